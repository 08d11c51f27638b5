import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {existsSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, repoRoot, tempDir} from '../helpers/cli.js'

/** The sh block of examples/coding/README.md, as a reader would copy it. */
async function readmeCommands(): Promise<string[]> {
  const text = await readFile(path.join(repoRoot, 'examples', 'coding', 'README.md'), 'utf8')
  const block = /```sh\n([\s\S]*?)```/.exec(text)
  if (!block) throw new Error('examples/coding/README.md has no sh block')
  return block[1]!.split('\n').filter((l) => l.trim() !== '')
}

function bash(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{code: number; stdout: string; stderr: string}> {
  return new Promise((resolve) => {
    execFile('bash', ['-e', '-c', script], {cwd, env, timeout: 120000}, (error, stdout, stderr) => {
      resolve({code: error ? ((error as {code?: number}).code ?? 1) : 0, stdout, stderr})
    })
  })
}

describe('examples/coding/README.md, followed literally', function () {
  this.timeout(120000)

  it('runs on a fresh git init (no commits yet) and exports the artifacts', async () => {
    const {dir, cleanup} = await tempDir('pipe-readme-')
    try {
      const scratch = path.join(dir, 'scratch')
      const lines = await readmeCommands()
      // Only what a reader must change: where pipe is, where the scratch copy goes, and the run id it printed.
      const script = lines
        .map((line) =>
          line
            .replaceAll('/path/to/pipe', repoRoot)
            .replaceAll('/tmp/scratch', scratch)
            .replace(
              /R-\.\.\./,
              '"$(pipe runs list --json | node -e \'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8")).runs[0].run_id)\')"',
            ),
        )
        .join('\n')
      // A machine with no git identity, as on a fresh CI box; pipe as an installed command.
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        NO_COLOR: '1',
        PIPE_HOME: path.join(dir, 'home'),
        HOME: dir,
        GIT_CONFIG_NOSYSTEM: '1',
        PATH: `${path.join(dir, 'bin')}:${process.env.PATH ?? ''}`,
      }
      delete env.PIPE_STORE
      delete env.OPENAI_API_KEY
      delete env.OPENAI_BASE_URL
      for (const name of ['GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL']) delete env[name]
      const shim = `mkdir -p ${JSON.stringify(path.join(dir, 'bin'))} && printf '#!/bin/sh\\nexec ${process.execPath} ${bin} "$@"\\n' > ${JSON.stringify(path.join(dir, 'bin', 'pipe'))} && chmod +x ${JSON.stringify(path.join(dir, 'bin', 'pipe'))}\n`
      const result = await bash(shim + script, repoRoot, env)
      expect(result.code, `${result.stdout}\n${result.stderr}`).to.equal(0)
      expect(result.stdout).to.match(/run R-\d{8}-\d{4}\s+succeeded/)
      expect(await readFile(path.join(scratch, 'calc.js'), 'utf8')).to.contain('a + b')
      const git = (...args: string[]): Promise<string> => bash(`git ${args.join(' ')}`, scratch, env).then((r) => r.stdout.trim())
      expect(await git('log', '--format=%s')).to.equal('T-001: add() adds\npipe: baseline before the edit')
      const runId = /run (R-\d{8}-\d{4})/.exec(result.stdout)![1]!
      expect(existsSync(path.join(scratch, 'artifacts', 'runs', runId, 'state.json')), 'pipe export wrote the artifacts').to.equal(true)
    } finally {
      await cleanup()
    }
  })
})
