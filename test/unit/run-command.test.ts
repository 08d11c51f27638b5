import {expect} from 'chai'
import {chmod, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {runCommand} from '../../src/policy/exec.js'
import {DEFAULT_POLICY, policyFrom} from '../../src/policy/policy.js'
import {tempDir} from '../helpers/cli.js'

// The process runner itself, in-process, uncontained (the sandbox has its own e2e tests): what a
// command step, QA, an agent's tool and tool_versions read of a command's end.
const policy = policyFrom({...DEFAULT_POLICY, sandbox: 'off', allowed_commands: [['node', '...'], ['./bad-interpreter']]}, null)

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-run-command-')))
afterEach(async () => cleanup())

describe('running a command', () => {
  it('reports the exit code and what the command printed on each stream', async () => {
    const result = await runCommand(policy, dir, {argv: ['node', '-e', 'console.log("out"); console.error("err"); process.exit(3)']})
    expect(result).to.deep.include({exit_code: 3, signal: null, timed_out: false})
    expect(result.stdout.head + result.stdout.tail).to.equal('out\n')
    expect(result.stderr.head + result.stderr.tail).to.equal('err\n')
    expect(result.spawn_error).to.equal(undefined)
  })

  it('reports the signal that ended a command, with no exit code and no start error', async () => {
    const result = await runCommand(policy, dir, {argv: ['node', '-e', 'process.kill(process.pid, "SIGKILL")']})
    expect(result).to.deep.include({exit_code: null, signal: 'SIGKILL', timed_out: false})
    expect(result.spawn_error).to.equal(undefined)
  })

  it('reports a program that is found but cannot start as a start error, not an exit', async () => {
    // Executable, so it is found on the way in; its interpreter does not exist, so exec fails.
    const bad = path.join(dir, 'bad-interpreter')
    await writeFile(bad, '#!/nonexistent/interpreter\n')
    await chmod(bad, 0o755)
    const result = await runCommand(policy, dir, {argv: ['./bad-interpreter']})
    expect(result.exit_code).to.equal(null)
    expect(result.spawn_error).to.match(/ENOENT/)
  })

  it('ends a command at its timeout and says so', async () => {
    const result = await runCommand(policy, dir, {argv: ['node', '-e', 'setInterval(() => {}, 1000)'], timeoutMs: 200})
    expect(result).to.deep.include({timed_out: true, exit_code: null, signal: 'SIGTERM'})
    expect(result.spawn_error).to.equal(undefined)
  })

  it('ends a command whose step was stopped before it started', async () => {
    const controller = new AbortController()
    controller.abort()
    const result = await runCommand(policy, dir, {argv: ['node', '-e', 'setInterval(() => {}, 1000)'], signal: controller.signal})
    expect(result).to.deep.include({exit_code: null, signal: 'SIGTERM', timed_out: false})
  })
})
