/**
 * stdout and stderr over a pipe or a file are written directly (src/cli/std-streams.ts), not through
 * Node's streams: what arrives, and how a closed pipe ends the run, must be what oclif's path gives.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {closeSync, openSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {bin, defaultPipeline, examples, repoRoot, tempDir} from '../helpers/cli.js'

const runArgs = ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']

/** node ARGS through the fast path (bin/run.js) or oclif's (dist/cli/main.js), stdout to `stdout`; its exit code and stderr. */
function run(via: 'fast' | 'oclif', args: string[], cwd: string, stdout: 'closed-pipe' | number): Promise<{code: number | null; stderr: string}> {
  const argv =
    via === 'fast'
      ? [bin, ...args]
      : ['--input-type=module', '-e', `const {execute} = await import(${JSON.stringify(pathToFileURL(path.join(repoRoot, 'dist', 'cli', 'main.js')).href)})\nawait execute({dir: ${JSON.stringify(repoRoot)}, args: ${JSON.stringify(args)}})`]
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, {cwd, env: {...process.env, NO_COLOR: '1', PIPE_HOME: path.join(cwd, 'home')}, stdio: ['ignore', stdout === 'closed-pipe' ? 'pipe' : stdout, 'pipe']})
    // The reader goes away before the run can have written its result: its first write meets EPIPE.
    if (stdout === 'closed-pipe') child.stdout!.destroy()
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stderr}))
  })
}

describe('pipe run: stdout and stderr written directly', function () {
  this.timeout(240000)

  it('a reader that closed stdout ends the run as through oclif: the run\'s own exit code, no EPIPE error', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const fast = await run('fast', [...runArgs, '--store', path.join(dir, 'a')], dir, 'closed-pipe')
      const oclif = await run('oclif', [...runArgs, '--store', path.join(dir, 'b')], dir, 'closed-pipe')
      expect(fast.code, fast.stderr).to.equal(0)
      expect(fast.code).to.equal(oclif.code)
      expect(fast.stderr).to.not.match(/EPIPE|Error/)
    } finally {
      await cleanup()
    }
  })

  it('stdout to a file holds the same JSON document as through oclif', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const documents: Array<Record<string, unknown>> = []
      for (const via of ['fast', 'oclif'] as const) {
        const file = path.join(dir, `${via}.json`)
        const fd = openSync(file, 'w')
        try {
          const result = await run(via, [...runArgs, '--store', path.join(dir, via)], dir, fd)
          expect(result.code, result.stderr).to.equal(0)
        } finally {
          closeSync(fd)
        }
        documents.push(JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>)
      }
      const keys = documents.map((d) => Object.keys(d))
      expect(keys[0]).to.deep.equal(keys[1])
      expect(documents[0]!.status).to.equal('succeeded')
      expect(documents[0]!.status).to.equal(documents[1]!.status)
    } finally {
      await cleanup()
    }
  })
})
