/**
 * stdout and stderr over a pipe or a file are written directly (src/cli/std-streams.ts), not through
 * Node's streams: what arrives, and how a closed pipe ends the run.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {closeSync, openSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {bin, defaultPipeline, examples, tempDir} from '../helpers/cli.js'

const runArgs = ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']

/** `pipe ARGS` (bin/run.js), stdout to `stdout`; its exit code and stderr. */
function run(args: string[], cwd: string, stdout: 'closed-pipe' | number): Promise<{code: number | null; stderr: string}> {
  const argv = [bin, ...args]
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, {
      cwd,
      env: {...process.env, NO_COLOR: '1', PIPE_HOME: path.join(cwd, 'home')},
      stdio: ['ignore', stdout === 'closed-pipe' ? 'pipe' : stdout, 'pipe'],
    })
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

  it("a reader that closed stdout ends the run with the run's own exit code, no EPIPE error", async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const fast = await run([...runArgs, '--store', path.join(dir, 'a')], dir, 'closed-pipe')
      expect(fast.code, fast.stderr).to.equal(0)
      expect(fast.stderr).to.not.match(/EPIPE|Error/)
    } finally {
      await cleanup()
    }
  })

  it('stdout to a file holds the JSON document, whole, and nothing else', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const file = path.join(dir, 'out.json')
      const fd = openSync(file, 'w')
      try {
        const result = await run([...runArgs, '--store', path.join(dir, 'store')], dir, fd)
        expect(result.code, result.stderr).to.equal(0)
      } finally {
        closeSync(fd)
      }
      const document = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>
      expect(document.status).to.equal('succeeded')
      expect(Object.keys(document)).to.include.members(['run_id', 'status'])
    } finally {
      await cleanup()
    }
  })
})
