/**
 * Issue 37 item 14: a destructive command a step runs waits for a person by default, even when
 * allowed_commands allows it (seed 000: delete, execute, push wait for confirmation). The pause says
 * which built-in pattern matched and how to pre-approve it; tools_preapproved or
 * confirm.destructive: allow lifts it; a harmless command that only names one runs unasked.
 *
 * One `pipe` process per behaviour (the pause and the confirm --yes that runs it, the first bypass,
 * a run that goes unasked, policy explain, the first refused key); the further cases of each run in
 * this process (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

interface RunJson {
  run_id: string
  status: string
  reason?: string
  pending?: {kind: string; action?: {rule?: string; argv?: string[][]}}
  error?: {code: string; message: string; hint?: string}
}

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-confirm-destructive-'))
  execFileSync('git', ['init', '-q', '-b', 'main', dir])
  await writeFile(path.join(dir, 'x.txt'), 'keep me\n')
})
afterEach(async () => cleanup())

const run = (args: string[]): ReturnType<typeof pipe> => pipe(args, {cwd: dir, env: {PIPE_INTERACTIVE: '0'}, timeoutMs: 60000})
/** `run`'s command in this process. */
const here = (args: string[]): ReturnType<typeof pipe> => pipeHere(args, {cwd: dir, env: {PIPE_INTERACTIVE: '0'}})

/** A one-step pipeline running `argv`, and a policy allowing exactly it (with `extra` policy lines). */
async function files(argv: string[], extra = ''): Promise<void> {
  const pipeline = `version: 1\nname: destructive\nsteps:\n  - id: act\n    kind: command\n    run: ${JSON.stringify(argv)}\n    next: done\n  - {id: done, kind: end, status: succeeded, reason: it ran}\n`
  await writeFile(path.join(dir, 'p.yaml'), pipeline)
  await writeFile(path.join(dir, 'policy.yaml'), `version: 1\nallowed_commands:\n  - ${JSON.stringify(argv)}\n${extra}`)
}

describe('destructive commands wait for a person (CLI)', function () {
  this.timeout(180000)

  it('an allowed rm x.txt pauses before it runs, naming the pattern and how to pre-approve it; pipe confirm --yes runs it', async () => {
    await files(['rm', 'x.txt'])
    const paused = await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--json'])
    expect(paused.code, paused.stderr).to.equal(10)
    const out = json<RunJson>(paused)
    expect(out.status).to.equal('awaiting_input')
    expect(out.pending?.kind).to.equal('confirm')
    expect(out.reason).to.contain('the built-in destructive command "rm" matches "rm x.txt"')
    expect(out.reason).to.contain('tools_preapproved: [["rm","x.txt"]]')
    expect(out.reason).to.contain('confirm.destructive: allow')
    expect(existsSync(path.join(dir, 'x.txt')), 'rm ran before anyone confirmed it').to.equal(true)
    const yes = await run(['confirm', out.run_id, '--yes', '--json'])
    expect(yes.code, yes.stderr).to.equal(0)
    expect(json<RunJson>(yes).status).to.equal('succeeded')
    expect(existsSync(path.join(dir, 'x.txt'))).to.equal(false)
  })

  it('the bypasses an attacker would try pause too: a path, a wrapper, a shell line', async () => {
    for (const argv of [
      ['/bin/rm', 'x.txt'],
      ['env', 'rm', 'x.txt'],
      ['command', 'rm', 'x.txt'],
      ['sh', '-c', 'rm x.txt'],
    ]) {
      await files(argv)
      // The first from a process, the others in this process.
      const paused = await (argv[0] === '/bin/rm' ? run : here)(['run', 'p.yaml', '--policy', 'policy.yaml', '--json'])
      expect(paused.code, `${JSON.stringify(argv)}: ${paused.stderr}`).to.equal(10)
      expect(json<RunJson>(paused).reason, JSON.stringify(argv)).to.contain('the built-in destructive command "rm"')
      expect(existsSync(path.join(dir, 'x.txt')), `${JSON.stringify(argv)} ran unasked`).to.equal(true)
    }
  })

  it('a command that only names rm runs unasked; tools_preapproved or confirm.destructive: allow lets rm run unasked', async () => {
    await files(['echo', 'rm', 'x.txt'])
    const echo = await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--json'])
    expect(echo.code, echo.stdout).to.equal(0)

    await files(['rm', 'x.txt'], 'tools_preapproved:\n  - [rm, x.txt]\n')
    const approved = await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json'])
    expect(approved.code, approved.stdout).to.equal(0)
    expect(existsSync(path.join(dir, 'x.txt'))).to.equal(false)

    await writeFile(path.join(dir, 'x.txt'), 'again\n')
    await files(['rm', 'x.txt'], 'confirm:\n  destructive: allow\n')
    const allowed = await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json'])
    expect(allowed.code, allowed.stdout).to.equal(0)
    expect(existsSync(path.join(dir, 'x.txt'))).to.equal(false)
  })

  it('pipe policy explain says a command step would wait, and why', async () => {
    await files(['rm', 'x.txt'])
    const explained = await run(['policy', 'explain', '--policy', 'policy.yaml', '--json', '--', 'rm', 'x.txt'])
    expect(explained.code, explained.stderr).to.equal(0)
    expect(json<{step: {confirmation: string}}>(explained).step.confirmation).to.match(/^needed \(pipe confirm\): the built-in destructive command "rm"/)
  })

  it('a bad confirm.destructive or confirm.on_timeout is a clear E_CONFIG naming the key and the values allowed, and nothing runs', async () => {
    for (const [key, value] of [
      ['destructive', 'maybe'],
      ['on_timeout', 'explode'],
    ]) {
      await files(['rm', 'x.txt'], `confirm:\n  ${key}: ${value}\n`)
      // The first from a process, the second in this process.
      const refused = await (key === 'destructive' ? run : here)(['run', 'p.yaml', '--policy', 'policy.yaml', '--json'])
      expect(refused.code, refused.stdout).to.equal(2)
      const error = json<RunJson>(refused).error!
      expect(error.code).to.equal('E_CONFIG')
      expect(error.message).to.contain(`confirm.${key}`)
      expect(error.message).to.match(key === 'destructive' ? /ask.*allow/ : /wait.*deny.*cancel/)
      expect(existsSync(path.join(dir, 'x.txt'))).to.equal(true)
    }
  })
})
