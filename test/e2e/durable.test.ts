/**
 * Durable runs on the built CLI: the default run killed (a real SIGKILL) at points spread across
 * the file store's writes and resumed without loss or repetition, and stopped by SIGTERM. Crashes
 * in runs that fail, block or get cancelled are durable-crashes.test.ts's; the audit trail and
 * replay audit-trail.test.ts's; answers, reviews and cancels people-in-the-loop.test.ts's.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {existsSync, mkdirSync, writeFileSync} from 'node:fs'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {changeIn} from '../helpers/wait.js'
import {
  audited,
  firstOfEachKind,
  fullRun,
  killedBy,
  kindOf,
  runIds,
  said,
  sample,
  snapshotsOf,
  statusOf,
  storeAt,
  storePoints,
  type RunJson,
} from '../helpers/durable-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-durable-')))
afterEach(async () => cleanup())

/** The invariants a run must keep however it was interrupted. */
async function checkRun(cwd: string, runId: string, expectedSteps: string[], expectedBody: unknown): Promise<void> {
  const list = await snapshotsOf(cwd, runId)
  expect(
    list.map((s) => s.step.name),
    'the same steps, none twice, none missing',
  ).to.deep.equal(expectedSteps)
  expect(list.map((s) => s.step.seq)).to.deep.equal(expectedSteps.map((_, i) => i + 1))
  const written = list.map((s) => s.spec_version_out).filter((v): v is string => v !== null)
  expect(new Set(written).size).to.equal(written.length)
  const specFiles = (await readdir(path.join(cwd, '.pipe', 'specs'))).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5))
  expect(specFiles.sort(), 'every version written is used, once').to.deep.equal([...written].sort())
  const evidenceFiles = (await readdir(path.join(cwd, '.pipe', 'evidence'))).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5))
  const linked = list.flatMap((s) => s.evidence_links.map((l) => l.evidence_id))
  expect(evidenceFiles.sort(), 'every evidence record written is linked, once').to.deep.equal([...linked].sort())
  const last = await (await storeAt(cwd)).readSpec(written.at(-1)!)
  const {meta: _meta, ...body} = last
  expect(body).to.deep.equal(expectedBody)
  const audit = await audited(cwd)
  expect(audit.ok, `audit verify:\n${said(audit)}`).to.equal(true)
  expect(audit.notes, said(audit)).to.deep.equal([])
}

/**
 * `pipe resume RUN --json` as a process, or the same command in this process (test/helpers/pipe-here.ts):
 * the kill is always a real SIGKILL of a real process, and whatever it left (a lock naming a dead pid,
 * a staged folder, a half-written file) is what either resumer finds.
 */
const resumer =
  (asProcess: boolean) =>
  (cwd: string, runId: string): Promise<{code: number | null; stderr: string}> =>
    (asProcess ? pipe : pipeHere)(['resume', runId, '--json'], {cwd})

describe('durable runs: killed at any point, resumed without loss or repetition', function () {
  this.timeout(600000)

  it("survives SIGKILL at 10 points spread across the default pipeline, every kind of the file store's points among them", async () => {
    // A clean run, traced: the points it passes, its steps and its final spec.
    const trace = path.join(dir, 'trace.txt')
    const baselineDir = path.join(dir, 'baseline')
    await (await import('node:fs/promises')).mkdir(baselineDir)
    const baseline = await pipe([...fullRun, '--json'], {cwd: baselineDir, env: {PIPE_FAULT_TRACE: trace}})
    expect(baseline.code, baseline.stderr).to.equal(0)
    const base = json<RunJson>(baseline)
    const steps = (await snapshotsOf(baselineDir, base.run_id)).map((s) => s.step.name)
    const {meta: _m, ...body} = await (await storeAt(baselineDir)).readSpec(base.spec_version!)
    const points = (await readFile(trace, 'utf8')).trim().split('\n')
    const from = points.indexOf('run-created#1')
    expect(from).to.be.greaterThan(-1)
    const candidates = storePoints(points.slice(from))
    expect(candidates.length).to.be.greaterThan(50)
    const chosen = sample(candidates, 10)
    // Every kind of the store's points the run passes is killed at, at least once.
    expect(new Set(chosen.map(kindOf))).to.deep.equal(new Set(candidates.map(kindOf)))
    expect([...new Set(chosen.map(kindOf))]).to.include.members(['journal-written', 'snapshot-written', 'write'])
    const firsts = firstOfEachKind(chosen)

    const one = async (point: string, i: number): Promise<void> => {
      const cwd = path.join(dir, `kill-${i}`)
      await (await import('node:fs/promises')).mkdir(cwd)
      const killed = await pipe(fullRun, {cwd, env: {PIPE_FAULT_KILL_AT: point}})
      expect(killedBy(killed), `killed at ${point}: ${killed.stderr}`).to.equal(true)
      const [runId] = await runIds(cwd)
      expect(runId, `a run exists after ${point}`).to.be.a('string')
      const status = await statusOf(cwd, runId!)
      expect(['interrupted', 'succeeded', 'pending'], `status after ${point}`).to.include(status)
      const resumed = await resumer(firsts.has(point))(cwd, runId!)
      if (status === 'succeeded') expect(resumed.code).to.equal(2)
      else expect(resumed.code, `resume after ${point}: ${resumed.stderr}`).to.equal(0)
      await checkRun(cwd, runId!, steps, body).catch((error: Error) => {
        error.message = `after a kill at ${point}: ${error.message}`
        throw error
      })
    }
    for (let i = 0; i < chosen.length; i += 2) await Promise.all(chosen.slice(i, i + 2).map((p, j) => one(p, i + j)))
  })

  it('records SIGTERM as interrupted (exit 130), shows a killed run as interrupted, and resumes both', async () => {
    const slow = path.join(dir, 'slow.yaml')
    await writeFile(
      slow,
      'version: 1\nname: slow\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, sleep_ms: 3000, next: c}\n  - {id: c, kind: noop}\n',
    )
    // Each run stops at step b's start (a synchronous pause, until its folder holds `go`), so a signal
    // sent then always finds it inside step b, however slow the machine: it is handled as soon as the
    // run goes on, during b's sleep.
    const start = (pause: string): {child: ReturnType<typeof spawn>; done: Promise<{code: number | null; signal: string | null}>} => {
      mkdirSync(pause)
      const child = spawn(process.execPath, [bin, 'run', slow], {
        cwd: dir,
        env: {...process.env, PIPE_HOME: dir, PIPE_FAULT_PAUSE_AT: 'before-step:b', PIPE_FAULT_PAUSE_DIR: pause},
      })
      child.stderr.resume()
      child.stdout.resume()
      return {child, done: new Promise((resolve) => child.on('close', (code, signal) => resolve({code, signal})))}
    }
    /** Waits until the run has recorded step a and stopped at step b's start, and returns the run's id. */
    const inStepB = async (run: ReturnType<typeof start>, pause: string, known: string[]): Promise<string> => {
      await changeIn(pause, () => existsSync(path.join(pause, `reached.${run.child.pid}`)), 'step b starting', run.done)
      const fresh = (await runIds(dir)).filter((id) => !known.includes(id))
      expect(fresh).to.have.length(1)
      expect(existsSync(path.join(dir, '.pipe', 'runs', fresh[0]!, 'snapshots', '000001.json')), 'step a recorded').to.equal(true)
      return fresh[0]!
    }
    const first = start(path.join(dir, 'pause-1'))
    const termed = await inStepB(first, path.join(dir, 'pause-1'), [])
    first.child.kill('SIGTERM')
    writeFileSync(path.join(dir, 'pause-1', 'go'), '')
    expect((await first.done).code).to.equal(130)
    // What the runs show and list say runs in this process; the signals, and the two resumes at once, are processes.
    expect(json<{status: string}>(await pipeHere(['runs', 'show', termed, '--json'], {cwd: dir})).status).to.equal('interrupted')

    const second = start(path.join(dir, 'pause-2'))
    const killed = await inStepB(second, path.join(dir, 'pause-2'), [termed])
    second.child.kill('SIGKILL')
    await second.done
    const shown = json<{status: string; run: {status: string}}>(await pipeHere(['runs', 'show', killed, '--json'], {cwd: dir}))
    expect(shown.run.status).to.equal('running')
    expect(shown.status).to.equal('interrupted')
    const listed = json<{runs: Array<{run_id: string; status: string}>}>(await pipeHere(['runs', 'list', '--json'], {cwd: dir}))
    expect(listed.runs.find((r) => r.run_id === killed)?.status).to.equal('interrupted')

    // Both resumed at once (each sleeps through step b again), on the one store.
    await Promise.all(
      [termed, killed].map(async (id) => {
        const resumed = await pipe(['resume', id, '--json'], {cwd: dir})
        expect(resumed.code, resumed.stderr).to.equal(0)
        expect((await snapshotsOf(dir, id)).map((s) => s.step.name)).to.deep.equal(['a', 'b', 'c'])
      }),
    )
  })
})
