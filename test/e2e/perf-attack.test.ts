/**
 * What the start-up and per-step speed-ups (a run born started and held, the run index read and
 * appended through one open, folders made once per process, one timer for step deadlines) must not
 * change for a user: stores a long process works in stay as they were.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {existsSync} from 'node:fs'
import {copyFile, mkdir, readdir, readFile, rm, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {changeIn} from '../helpers/wait.js'

const sentence = path.join(examples, 'one-sentence.txt')
const answers = path.join(examples, 'one-sentence.answers.yaml')
const fullRun = ['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'go']

let dir: string
let cleanup: () => Promise<void>

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-perf-attack-'))
})

afterEach(async () => {
  await cleanup()
})

/** Starts pipe held at the fault point `at` (PIPE_FAULT_PAUSE_AT); `go` lets it on, `done` settles when it ends. */
async function heldAt(args: string[], at: string, cwd: string): Promise<{go: () => Promise<void>; done: Promise<{code: number | null; stderr: string}>}> {
  const gate = path.join(cwd, '.gate')
  await mkdir(gate)
  const child = spawn(process.execPath, [bin, ...args], {
    cwd,
    env: {...process.env, NO_COLOR: '1', PIPE_HOME: dir, PIPE_FAULT_PAUSE_AT: at, PIPE_FAULT_PAUSE_DIR: gate},
  })
  let stderr = ''
  child.stdout.resume()
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  const done = new Promise<{code: number | null; stderr: string}>((resolve) => child.on('close', (code) => resolve({code, stderr})))
  // Waits for the process to report that it reached the point (an event, not a duration).
  await changeIn(gate, () => existsSync(path.join(gate, `reached.${child.pid}`)), `reaching ${at}`, done).catch(() => {
    throw new Error(`pipe ended before reaching ${at}: ${stderr}`)
  })
  return {go: () => writeFile(path.join(gate, 'go'), ''), done}
}

describe('speed-ups that must not change a store', function () {
  this.timeout(300000)

  it('puts the id hints back when the ids folder is removed while a run goes on', async () => {
    // ids/ holds hints only (allocation and the newest-first spec listing cope without them), so a
    // person may clear it; a process that made it once must make it again rather than lose every
    // hint it would write for the rest of its run.
    const cwd = path.join(dir, 'work')
    await mkdir(cwd)
    const held = await heldAt(fullRun, 'after-step:plan_tasks', cwd)
    await rm(path.join(cwd, '.pipe', 'ids'), {recursive: true})
    await held.go()
    const {code, stderr} = await held.done
    expect(code, stderr).to.equal(0)
    const versions = (await readdir(path.join(cwd, '.pipe', 'specs')))
      .filter((f) => f.endsWith('.json'))
      .map((f) => f.slice(0, -5))
      .sort()
    const newest = versions.at(-1)!
    const day = newest.slice(0, newest.lastIndexOf('-'))
    const hint = await readFile(path.join(cwd, '.pipe', 'ids', day), 'utf8').catch(() => null)
    expect(hint, 'the spec version hint after the ids folder was removed').to.equal(String(Number(newest.slice(newest.lastIndexOf('-') + 1))))
    const audit = await pipe(['audit', 'verify'], {cwd, env: {PIPE_HOME: dir}})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
  })
  it('never appends to a file outside the store through a link put in place of the run index', async () => {
    const cwd = path.join(dir, 'work')
    await mkdir(cwd)
    const noop = path.join(cwd, 'noop.yaml')
    await writeFile(noop, 'version: 1\nname: noop\nsteps:\n  - {id: a, kind: noop}\n')
    const first = await pipe(['run', noop], {cwd, env: {PIPE_HOME: dir}})
    expect(first.code, first.stderr).to.equal(0)
    const index = path.join(cwd, '.pipe', 'audit', 'runs.jsonl')
    const elsewhere = path.join(dir, 'elsewhere.jsonl')
    await copyFile(index, elsewhere)
    const before = await readFile(elsewhere, 'utf8')
    await rm(index)
    await symlink(elsewhere, index)
    const linked = await pipe(['run', noop], {cwd, env: {PIPE_HOME: dir}})
    expect(linked.code, linked.stderr).to.not.equal(0)
    expect(linked.stderr).to.contain('E_INTEGRITY').and.contain('runs.jsonl')
    expect(await readFile(elsewhere, 'utf8'), 'the file the link names').to.equal(before)
    // A link to nothing: no file is made where it points.
    const nowhere = path.join(dir, 'nowhere.jsonl')
    await rm(index)
    await symlink(nowhere, index)
    const dangling = await pipe(['run', noop], {cwd, env: {PIPE_HOME: dir}})
    expect(dangling.code, dangling.stderr).to.not.equal(0)
    expect(dangling.stderr).to.contain('E_INTEGRITY')
    expect(existsSync(nowhere), 'a file made outside the store').to.equal(false)
  })
  it('a policy step timeout longer than a timer holds (2^31 ms and more) neither times the step out at once nor floods stderr', async () => {
    const cwd = path.join(dir, 'work')
    await mkdir(cwd)
    const policy = (await readFile(path.join(examples, 'release-notes', 'policy.yaml'), 'utf8')).replace(/step_timeout_ms: \d+/, 'step_timeout_ms: 3000000000')
    expect(policy).to.contain('step_timeout_ms: 3000000000')
    await writeFile(path.join(cwd, 'policy.yaml'), policy)
    await writeFile(path.join(cwd, 'slow.yaml'), 'version: 1\nname: slow\nsteps:\n  - {id: a, kind: noop, sleep_ms: 300, next: b}\n  - {id: b, kind: noop}\n')
    const result = await pipe(['run', 'slow.yaml', '--json'], {cwd, env: {PIPE_HOME: dir}})
    expect(result.code, result.stderr).to.equal(0)
    expect(json<{status: string}>(result).status).to.equal('succeeded')
    expect(result.stderr).to.not.contain('TimeoutOverflowWarning')
  })
})
