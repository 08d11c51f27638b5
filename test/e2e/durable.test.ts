import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {existsSync, mkdirSync, writeFileSync} from 'node:fs'
import {cp, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'
import {deliveredKeys} from '../../src/steps/registry.js'
import {openStore} from '../../src/store/open.js'
import {effectiveStatus} from '../../src/store/queries.js'
import type {AuditReport, RunStore} from '../../src/store/types.js'
import {hashJson} from '../../src/util/hash.js'
import {bin, defaultPipeline, examples, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {cancelHere, resumeHere, reviewHere, type InProcess} from '../helpers/in-process.js'
import {madeOnce} from '../helpers/stores.js'
import {changeIn} from '../helpers/wait.js'

interface RunJson {
  run_id: string
  feature_id: string
  status: string
  spec_version: string | null
  pending?: RunRecord['pending']
  error?: {code: string}
}

const sentence = path.join(examples, 'one-sentence.txt')
const answers = path.join(examples, 'one-sentence.answers.yaml')
const fullRun = ['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'go']

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-durable-')))
afterEach(async () => cleanup())

/*
 * States several tests start from, each made by one real `pipe run` per file and copied into each
 * test's own folder (tests that go on to run steps in the run's workspace make their own: a copy's
 * run still names the template's folder as its workspace).
 */
const made = (args: string[], code: number): ((into: string) => Promise<void>) =>
  madeOnce(async (cwd) => {
    const result = await pipe([...args, '--json'], {cwd})
    expect(result.code, result.stderr).to.equal(code)
  })
/** A default run that succeeded. */
const finished = made(fullRun, 0)
/** A default run paused for the answers to its first clarify round. */
const awaitingAnswers = made(['run', defaultPipeline, '--input', sentence], 10)
/** The run in a copy of a template (each holds one). */
async function onlyRun(cwd: string): Promise<RunJson> {
  const [runId] = await runIds(cwd)
  const record = await (await storeAt(cwd)).readRun(runId!)
  return {run_id: record.run_id, feature_id: record.feature_id, status: record.status, spec_version: record.spec_version ?? null, pending: record.pending}
}

/*
 * The checks after a kill read the store in this process, through the same store code the commands
 * use (`snapshot show`, `spec show`, `runs show`, `audit verify` print what these return): a CLI
 * process per check cost most of this file's time. What only a process shows stays a process: every
 * kill is a real SIGKILL of a real `pipe`, every resume and finish a real `pipe` after it, and
 * `audit verify` and `runs show` run as processes in the tests that check what they print and
 * exit with (here: the SIGTERM test, the audit trail and replay tests; and audit.test.ts).
 */
async function storeAt(cwd: string): Promise<RunStore> {
  return openStore(path.join(cwd, '.pipe'), 'existing')
}

async function snapshotsOf(cwd: string, runId: string): Promise<Snapshot[]> {
  return (await storeAt(cwd)).readSnapshots(runId)
}

/** What `pipe runs show RUN --json` says the run's status is (a running run whose process died is interrupted). */
async function statusOf(cwd: string, runId: string): Promise<string> {
  const store = await storeAt(cwd)
  return effectiveStatus(store, await store.readRun(runId))
}

/** `pipe audit verify` of the whole store: leftovers of crashes are cleaned (and listed as such), then every record checked. */
async function audited(cwd: string): Promise<AuditReport> {
  return (await storeAt(cwd)).audit(undefined, {deliveredKeys})
}

/** The report as `pipe audit verify` prints it, for a failure message. */
const said = (report: AuditReport): string =>
  [...report.problems, ...report.notes, ...report.cleaned].map((f) => `${f.file}  ${f.field}  ${f.record}: ${f.message}`).join('\n')

async function runIds(cwd: string): Promise<string[]> {
  return (await readdir(path.join(cwd, '.pipe', 'runs')).catch(() => [] as string[])).filter((n) => n.startsWith('R-'))
}

/** Every file under the store with a hash of its content, to show that a refused call changed nothing. */
async function storeState(cwd: string): Promise<Record<string, string>> {
  const root = path.join(cwd, '.pipe')
  const out: Record<string, string> = {}
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, {withFileTypes: true})) {
      const full = path.join(at, entry.name)
      if (entry.isDirectory()) await walk(full)
      else out[path.relative(root, full)] = hashJson(await readFile(full, 'utf8'))
    }
  }
  if (existsSync(root)) await walk(root)
  return out
}

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

/** A point's kind: `journal-written` of `journal-written:compile#1`, `write` of `write#17`. */
const kindOf = (point: string): string => point.replace(/[:#].*$/, '')

/**
 * The points the engine passes whatever its store: a death at every one of them, in every run
 * below, is test/unit/crash-matrix.test.ts's, in-process over the in-memory store. The kills here
 * are at the file store's own points (its journal, records, snapshots, bare writes, run creation),
 * where only a real SIGKILL shows what is left on disk.
 */
const ENGINE_POINTS = new Set(['run-created', 'before-step', 'attempt', 'after-step', 'publish-sent'])
const storePoints = (points: string[]): string[] => points.filter((p) => !ENGINE_POINTS.has(kindOf(p)))

/**
 * `count` points of a run's trace (in their order) to kill it at: the first of each kind of point
 * (a journal, an evidence record, a spec version, a snapshot, a bare file write...), the rest
 * spread evenly over the trace. Every kill costs two real processes;
 * the points between two chosen ones are the same kinds of write at other steps.
 */
function sample(points: string[], count: number): string[] {
  if (points.length <= count) return points
  const firsts = new Set([...new Set(points.map(kindOf))].map((kind) => points.find((p) => kindOf(p) === kind)!))
  const n = Math.max(count - firsts.size, 0)
  const spread = Array.from({length: n}, (_, i) => points[Math.floor((i * (points.length - 1)) / Math.max(n - 1, 1))]!)
  const chosen = new Set([...firsts, ...spread])
  return points.filter((p) => chosen.has(p))
}

/** The first chosen point of each kind: after these, a real `pipe resume` process continues the run; after the rest, the same session in this process. */
function firstOfEachKind(chosen: string[]): Set<string> {
  return new Set([...new Set(chosen.map(kindOf))].map((kind) => chosen.find((p) => kindOf(p) === kind)!))
}

/**
 * `pipe resume RUN` as a process, or its session in this process: the kill is always a real SIGKILL
 * of a real process, and whatever it left (a lock naming a dead pid, a staged folder, a half-written
 * file) is what either resumer finds. In-process, the exit code is the one the command maps the
 * outcome or error to.
 */
const resumer =
  (asProcess: boolean) =>
  async (cwd: string, runId: string): Promise<{code: number | null; stderr: string}> => {
    if (asProcess) return pipe(['resume', runId, '--json'], {cwd})
    const here: InProcess = await resumeHere(cwd, runId)
    return {code: here.code, stderr: here.error ? `${here.error.code}: ${here.error.message}` : ''}
  }

function killedBy(result: CliResult): boolean {
  return result.signal === 'SIGKILL' || result.code === 137
}

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
    expect(json<{status: string}>(await pipe(['runs', 'show', termed, '--json'], {cwd: dir})).status).to.equal('interrupted')

    const second = start(path.join(dir, 'pause-2'))
    const killed = await inStepB(second, path.join(dir, 'pause-2'), [termed])
    second.child.kill('SIGKILL')
    await second.done
    const shown = json<{status: string; run: {status: string}}>(await pipe(['runs', 'show', killed, '--json'], {cwd: dir}))
    expect(shown.run.status).to.equal('running')
    expect(shown.status).to.equal('interrupted')
    const listed = json<{runs: Array<{run_id: string; status: string}>}>(await pipe(['runs', 'list', '--json'], {cwd: dir}))
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

describe('the audit trail', function () {
  this.timeout(120000)

  it('keeps every id unique with eight runs in parallel on one store, and verifies', async () => {
    const results = await Promise.all(Array.from({length: 8}, () => pipe([...fullRun, '--json'], {cwd: dir})))
    for (const r of results) expect(r.code, r.stderr).to.equal(0)
    const bodies = results.map((r) => json<RunJson>(r))
    expect(new Set(bodies.map((b) => b.run_id)).size).to.equal(8)
    const all = {spec: [] as string[], evidence: [] as string[]}
    for (const b of bodies) {
      for (const s of await snapshotsOf(dir, b.run_id)) {
        if (s.spec_version_out) all.spec.push(s.spec_version_out)
        all.evidence.push(...s.evidence_links.map((l) => l.evidence_id))
      }
    }
    expect(new Set(all.spec).size).to.equal(all.spec.length)
    expect(new Set(all.evidence).size).to.equal(all.evidence.length)
    const audit = await pipe(['audit', 'verify', '--json'], {cwd: dir})
    expect(audit.code, audit.stdout).to.equal(0)
    expect(json<{ok: boolean; runs: number}>(audit)).to.include({ok: true, runs: 8})
  })

  it('names the file and field of a snapshot, a spec version and an evidence record changed by one byte', async () => {
    await finished(dir)
    const run = await onlyRun(dir)
    const list = await snapshotsOf(dir, run.run_id)
    const snapshotFile = path.join(dir, '.pipe', 'runs', run.run_id, 'snapshots', '000003.json')
    const specFile = path.join(dir, '.pipe', 'specs', `${run.spec_version}.json`)
    const evidenceFile = path.join(dir, '.pipe', 'evidence', `${list[0]!.evidence_links[0]!.evidence_id}.json`)
    const flip = async (file: string, from: string, to: string): Promise<void> => {
      const text = await readFile(file, 'utf8')
      expect(text).to.contain(from)
      await writeFile(file, text.replace(from, to))
    }
    await flip(snapshotFile, '"decision": "fail"', '"decision": "pass"')
    await flip(specFile, 'monthly sales', 'monthly Sales')
    await flip(evidenceFile, 'Build a', 'build a')
    const audit = await pipe(['audit', 'verify'], {cwd: dir})
    expect(audit.code).to.equal(4)
    expect(audit.stderr).to.contain('Error [E_INTEGRITY]')
    expect(audit.stdout).to.contain(`${snapshotFile}  decisions  ${run.run_id}#3: field changed`)
    expect(audit.stdout).to.contain(`${specFile}  goal  ${run.spec_version}: field changed`)
    expect(audit.stdout).to.match(new RegExp(`${evidenceFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}  content  E-\\d+: field changed`))
    const one = await pipe(['audit', 'verify', run.run_id, '--json'], {cwd: dir})
    expect(one.code).to.equal(4)
    const report = json<{ok: boolean; problems: Array<{file: string; field: string}>}>(one)
    expect(report.problems.map((p) => `${path.basename(p.file)} ${p.field}`)).to.include.members(['000003.json decisions', `${run.spec_version}.json goal`])
  })

  it('catches a re-sealed snapshot through the hash chain, and a missing one as a gap', async () => {
    await finished(dir)
    const run = await onlyRun(dir)
    const snapshots = path.join(dir, '.pipe', 'runs', run.run_id, 'snapshots')
    const {sealSnapshot} = await import('../../src/store/trail/integrity.js')
    const third = JSON.parse(await readFile(path.join(snapshots, '000003.json'), 'utf8')) as Snapshot
    third.decisions[0]!.reason = 'rewritten after the fact'
    await writeFile(path.join(snapshots, '000003.json'), JSON.stringify(sealSnapshot(third), null, 2))
    await (await import('node:fs/promises')).rm(path.join(snapshots, '000006.json'))
    const audit = await pipe(['audit', 'verify', run.run_id], {cwd: dir})
    expect(audit.code).to.equal(4)
    expect(audit.stdout).to.contain(`000004.json  meta.prev_hash  ${run.run_id}#4: does not match the record hash of the snapshot before it`)
    expect(audit.stdout).to.contain(`000006.json  (file)  ${run.run_id}#6: snapshot is missing (a gap in seq)`)
  })
})

describe('people in the loop', function () {
  this.timeout(120000)

  it('refuses bad answers and bad review calls with a clear error and an unchanged store', async () => {
    await awaitingAnswers(dir)
    const paused = await onlyRun(dir)
    expect(paused.status).to.equal('awaiting_input')
    const before = await storeState(dir)
    const cases: Array<{args: string[]; file?: string; content?: string; code: number; message: string}> = [
      {args: ['answer', paused.run_id, '--file', 'a.yaml'], file: 'a.yaml', content: 'answers: [1, 2]\n', code: 2, message: 'answers  must be object'},
      {
        args: ['answer', paused.run_id, '--file', 'a.yaml'],
        file: 'a.yaml',
        content: 'answers:\n  Q-042: yes\n  Q-001: x\n  Q-002: y\n  Q-003: z\n',
        code: 2,
        message: '"Q-042" is not a question of run',
      },
      {
        args: ['answer', paused.run_id, '--file', 'a.yaml'],
        file: 'a.yaml',
        content: 'answers:\n  Q-001: only one\n',
        code: 2,
        message: 'no answer to Q-002 [non_functional], Q-003 [constraints]',
      },
      {args: ['answer', paused.run_id, '--file', 'a.yaml'], file: 'a.yaml', content: '', code: 2, message: 'file is empty'},
      {
        args: ['answer', paused.run_id, '--file', 'a.yaml'],
        file: 'a.yaml',
        content: 'run_id: R-20000101-0001\nanswers:\n  Q-001: a\n  Q-002: b\n  Q-003: c\n',
        code: 2,
        message: 'the answers are for run R-20000101-0001',
      },
      {args: ['answer', paused.run_id], code: 2, message: 'no answers given'},
      {args: ['review', paused.run_id, '--decision', 'go'], code: 2, message: `run ${paused.run_id} is not waiting for a review (it waits for answers)`},
      {args: ['review', 'R-20000101-0001', '--decision', 'go'], code: 2, message: 'run R-20000101-0001 not found'},
      {args: ['review', paused.run_id, '--decision', 'maybe'], code: 2, message: '--decision "maybe" is not a decision'},
      {args: ['review', 'not-a-run', '--decision', 'go'], code: 2, message: '"not-a-run" is not a run id'},
    ]
    for (const c of cases) {
      if (c.file) await writeFile(path.join(dir, c.file), c.content ?? '')
      const result = await pipe(c.args, {cwd: dir, env: {PIPE_INTERACTIVE: '0'}})
      expect(result.code, `${c.args.join(' ')}: ${result.stderr}`).to.equal(c.code)
      expect(result.stderr, c.args.join(' ')).to.contain(c.message)
      expect(await storeState(dir), `${c.args.join(' ')} left the store unchanged`).to.deep.equal(before)
    }
  })

  it('asks the questions one at a time and the review decision at a terminal', async () => {
    const input = [
      'Given a month with sales, when I export it, then a PDF is written.',
      'Given no sales, when I export, then no file is written.',
      '',
      'Exports finish within 10 seconds.',
      '',
      'Must run on Node.js 20.',
      '',
      'go',
      'looks right',
      '',
    ].join('\n')
    const result = await pipe(['run', defaultPipeline, '--input', sentence], {cwd: dir, input, env: {PIPE_INTERACTIVE: '1'}})
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stderr)
      .to.contain('[1/3] Q-001 (acceptance_criteria)')
      .and.contain('[3/3] Q-003 (constraints)')
      .and.contain('Decision [go/hold/drop]:')
      .and.contain('gates: gate_s pass, gate_t pass')
    const [runId] = await runIds(dir)
    const list = await snapshotsOf(dir, runId!)
    const applied = list.find((s) => s.step.name === 'apply_answers')!
    expect(applied.evidence_links).to.have.length(3)
    const review = list.find((s) => s.step.name === 'manual_review')!.decisions[0]!
    expect(review).to.include({decision: 'go', note: 'looks right'})
    const spec = json<CanonicalSpec>(await pipe(['spec', 'show', list.at(-1)!.spec_version_in!, '--json'], {cwd: dir}))
    expect(spec.acceptance_criteria.map((a) => a.text)).to.deep.equal([
      'Given a month with sales, when I export it, then a PDF is written.',
      'Given no sales, when I export, then no file is written.',
    ])
  })

  it('takes one sentence through two clarify rounds, a hold and a go, across processes', async () => {
    const paused = json<RunJson>(await pipe(['run', defaultPipeline, '--input', sentence, '--json'], {cwd: dir}))
    await writeFile(
      path.join(dir, 'round1.yaml'),
      'answers:\n  acceptance_criteria: TBD\n  non_functional: Exports finish within 10 seconds.\n  constraints: none\n',
    )
    const round2 = json<RunJson>(await pipe(['answer', paused.run_id, '--file', 'round1.yaml', '--json'], {cwd: dir}))
    expect(round2.pending?.questions?.map((q) => `${q.id} ${q.field}`)).to.deep.equal(['Q-004 acceptance_criteria'])
    const folded = await pipe(['answer', paused.run_id, '--questions'], {cwd: dir})
    expect(folded.stdout).to.contain('Round 2 (waiting for answers):').and.contain('(1 earlier round(s) folded; --history shows them)')
    const history = await pipe(['answer', paused.run_id, '--questions', '--history'], {cwd: dir})
    expect(history.stdout.indexOf('Round 2')).to.be.lessThan(history.stdout.indexOf('Round 1'))
    expect(history.stdout).to.contain('answered: Exports finish within 10 seconds.')
    await writeFile(path.join(dir, 'round2.yaml'), 'answers:\n  Q-004: Given sales data, when exported, then a PDF exists.\n')
    const review = json<RunJson>(await pipe(['answer', paused.run_id, '--file', 'round2.yaml', '--json'], {cwd: dir}))
    expect(review.pending?.kind).to.equal('review')
    const held = await pipe(['review', paused.run_id, '--decision', 'hold', '--note', 'legal', '--json'], {cwd: dir})
    expect(held.code).to.equal(10)
    const gone = await pipe(['review', paused.run_id, '--decision', 'go', '--json'], {cwd: dir})
    expect(gone.code, gone.stderr).to.equal(0)
    const list = await snapshotsOf(dir, paused.run_id)
    expect(list.filter((s) => s.step.name === 'clarify_questions')).to.have.length(2)
    expect(list.filter((s) => s.step.name === 'manual_review').map((s) => s.decisions[0]!.decision)).to.deep.equal(['hold', 'go'])
    expect(list.at(-1)!.step.name).to.equal('publish')
    const timeline = await pipe(['runs', 'show', paused.run_id], {cwd: dir})
    expect(timeline.stdout).to.contain('review_given').and.contain('answers_given').and.contain('manual_review hold by')
  })

  it('cancels a paused run', async () => {
    await awaitingAnswers(dir)
    const paused = await onlyRun(dir)
    const cancelled = await pipe(['cancel', paused.run_id, '--reason', 'superseded', '--json'], {cwd: dir})
    expect(cancelled.code, cancelled.stderr).to.equal(0)
    expect(json<RunJson>(cancelled).status).to.equal('cancelled')
    const again = await pipe(['cancel', paused.run_id], {cwd: dir})
    expect(again.code).to.equal(2)
    expect(again.stderr).to.contain('has already ended (cancelled)')
  })
})

describe('replay', function () {
  this.timeout(120000)

  it('reproduces every gate result of a finished run, and replays from a step to identical gate results', async () => {
    const original = json<RunJson>(await pipe([...fullRun, '--json'], {cwd: dir}))
    const check = await pipe(['replay', original.run_id, '--check', '--json'], {cwd: dir})
    expect(check.code, check.stderr).to.equal(0)
    const report = json<{same: boolean; gates: Array<{same: boolean}>}>(check)
    expect(report.same).to.equal(true)
    expect(report.gates).to.have.length(2)

    const replayed = await pipe(['replay', original.run_id, '--from', 'validate_gates', '--decision', 'go', '--json'], {cwd: dir})
    expect(replayed.code, replayed.stderr).to.equal(0)
    const copy = json<RunJson>(replayed)
    expect(copy.run_id).to.not.equal(original.run_id)
    expect(copy.feature_id).to.equal(original.feature_id)
    const before = await snapshotsOf(dir, original.run_id)
    const after = await snapshotsOf(dir, copy.run_id)
    const gates = (list: Snapshot[]): string[] =>
      list.filter((s) => s.step.kind === 'gate').map((s) => JSON.stringify((s.outputs as {gate_result?: unknown}).gate_result))
    expect(gates(after)).to.deep.equal(gates(before))
    expect(after[0]!.meta.replay_of).to.deep.equal({run_id: original.run_id, seq: 3})
    expect(after[0]!.meta.prev_hash).to.equal(before[1]!.meta.record_hash)
    expect(after[0]!.spec_version_in).to.equal(before[2]!.spec_version_in)
    expect(json<{run: RunRecord}>(await pipe(['runs', 'show', copy.run_id, '--json'], {cwd: dir})).run.replay_of).to.deep.equal({
      run_id: original.run_id,
      seq: 3,
      step: 'validate_gates',
    })
    expect((await pipe(['audit', 'verify'], {cwd: dir})).code).to.equal(0)
  })

  it('reports a gate result that no longer reproduces', async () => {
    await finished(dir)
    const original = await onlyRun(dir)
    const first = (await snapshotsOf(dir, original.run_id)).find((s) => s.step.kind === 'gate')!
    const file = path.join(dir, '.pipe', 'runs', original.run_id, 'snapshots', `${String(first.step.seq).padStart(6, '0')}.json`)
    const {sealSnapshot} = await import('../../src/store/trail/integrity.js')
    const changed = JSON.parse(await readFile(file, 'utf8')) as Snapshot
    ;(changed.outputs as {gate_result: {completeness_score: number}}).gate_result.completeness_score = 0.99
    await writeFile(file, JSON.stringify(sealSnapshot(changed), null, 2))
    const check = await pipe(['replay', original.run_id, '--check'], {cwd: dir})
    expect(check.code).to.equal(4)
    expect(check.stdout).to.contain(`#${first.step.seq} validate_gates on ${first.spec_version_in}: DIFFERENT`)
  })
})

describe('crashes never leave the store unverifiable: at run creation, and in runs that fail, block or get cancelled', function () {
  this.timeout(900000)

  /** After a kill: audit verify passes (crash leftovers cleaned, never reported as damage), runs list loads, no temp file is left. */
  async function verifiesAfterKill(cwd: string, point: string): Promise<AuditReport> {
    const audit = await audited(cwd)
    expect(audit.ok, `audit verify after a kill at ${point}:\n${said(audit)}`).to.equal(true)
    for (const id of await runIds(cwd))
      expect(['pending', 'interrupted', 'running', 'awaiting_input', 'succeeded', 'failed', 'blocked', 'cancelled']).to.include(await statusOf(cwd, id))
    const leftovers = Object.keys(await storeState(cwd)).filter((f) => /(^|\/)\.new-|\.tmp$/.test(f))
    expect(leftovers, `left after a kill at ${point} and audit verify`).to.deep.equal([])
    return audit
  }

  async function tracePoints(cwd: string, args: string[], env: Record<string, string> = {}): Promise<{points: string[]; result: CliResult}> {
    const trace = path.join(cwd, 'trace.txt')
    const result = await pipe(args, {cwd, env: {...env, PIPE_FAULT_TRACE: trace}})
    const points = (await readFile(trace, 'utf8')).trim().split('\n')
    await (await import('node:fs/promises')).rm(trace)
    return {points, result}
  }

  async function fresh(name: string): Promise<string> {
    const cwd = path.join(dir, name)
    await (await import('node:fs/promises')).mkdir(cwd)
    return cwd
  }

  it('is killed at every traced point of run creation, and the store verifies, lists and resumes', async () => {
    const {points} = await tracePoints(await fresh('baseline'), fullRun)
    const creation = points.slice(0, points.indexOf('run-created#1'))
    expect(creation).to.include.members(['run-staged#1', 'run-indexed#1'])
    let processResumes = 0
    for (const [i, point] of creation.entries()) {
      const cwd = await fresh(`create-${i}`)
      const killed = await pipe(fullRun, {cwd, env: {PIPE_FAULT_KILL_AT: point}})
      expect(killedBy(killed), `killed at ${point}: ${killed.stderr}`).to.equal(true)
      const audit = await verifiesAfterKill(cwd, point)
      const ids = await runIds(cwd)
      const cleaned = audit.cleaned.map((c) => c.message).join('\n')
      if (point === 'run-staged#1') {
        expect(cleaned).to.contain('removed a run creation that process')
        expect(ids).to.deep.equal([])
      }
      if (point === 'run-indexed#1') {
        expect(cleaned).to.contain('finished creating the run')
        expect(ids).to.have.length(1)
      }
      for (const id of ids) {
        // The first run to resume is resumed by a real process, the others by its session here.
        if (processResumes++ === 0) {
          const resumed = await pipe(['resume', id, '--json'], {cwd})
          expect(resumed.code, `resume after a kill at ${point}: ${resumed.stderr}`).to.equal(0)
          expect(json<RunJson>(resumed).status).to.equal('succeeded')
        } else {
          const resumed = await resumeHere(cwd, id)
          expect(resumed.code, `resume after a kill at ${point}: ${JSON.stringify(resumed.error)}`).to.equal(0)
          expect(resumed.outcome?.status).to.equal('succeeded')
        }
      }
      const again = await audited(cwd)
      expect(again.ok, `after a kill at ${point} and resume:\n${said(again)}`).to.equal(true)
      // A kill after the feature record and before the run: the feature no run names is named, nothing else.
      const features = (await readdir(path.join(cwd, '.pipe', 'features')).catch(() => [] as string[])).filter((f) => f.endsWith('.json'))
      const orphaned = ids.length === 0 && features.length === 1
      expect(
        again.notes.map((n) => /no run names this feature/.test(n.message)),
        point,
      ).to.deep.equal(orphaned ? [true] : [])
    }
  })

  it('is killed the moment a run folder starts to be built (watched, not timed), and the store verifies', async () => {
    const {watch} = await import('node:fs')
    for (let i = 0; i < 6; i++) {
      const cwd = await fresh(`watched-${i}`)
      const runs = path.join(cwd, '.pipe', 'runs')
      await (await import('node:fs/promises')).mkdir(runs, {recursive: true})
      const child = spawn(process.execPath, [bin, ...fullRun], {cwd, env: {...process.env, PIPE_HOME: dir}})
      child.stdout.resume()
      child.stderr.resume()
      const done = new Promise<void>((resolve) => child.on('close', () => resolve()))
      // Kill on the first, second or third change that creating the run makes to runs/ (staging folder made, renamed away, renamed in).
      let seen = 0
      const watcher = watch(runs, () => {
        if (++seen === (i % 3) + 1) child.kill('SIGKILL')
      })
      await done
      watcher.close()
      await verifiesAfterKill(cwd, `watched change ${i + 1}`)
    }
  })

  const failing =
    'version: 1\nname: failing\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, next: c}\n  - {id: c, kind: command, run: [rm, -rf, /nonexistent]}\n'

  interface Scenario {
    name: string
    /** Prepares a directory, once: each kill starts from a copy of it. Returns the command to kill and the run it concerns (if known before). */
    setup(cwd: string): Promise<{args: string[]; runId?: string}>
    final: string
    /** The exit code of the command when it is not killed. */
    code: number
    /** Drives a killed run to its end: by real `pipe` processes, or by their sessions in this process. */
    finish(cwd: string, runId: string, asProcess: boolean): Promise<void>
  }

  const review = async (cwd: string, runId: string, decision: 'go' | 'drop', asProcess: boolean): Promise<void> => {
    if (asProcess) await pipe(['review', runId, '--decision', decision], {cwd})
    else await reviewHere(cwd, runId, decision)
  }
  const resume = async (cwd: string, runId: string, asProcess: boolean): Promise<void> => {
    if (asProcess) await pipe(['resume', runId], {cwd})
    else await resumeHere(cwd, runId)
  }
  const resumeTo = async (cwd: string, runId: string, asProcess: boolean): Promise<void> => {
    const status = await statusOf(cwd, runId)
    if (['failed', 'blocked', 'cancelled'].includes(status)) return
    if (status === 'awaiting_input') await review(cwd, runId, 'go', asProcess)
    else await resume(cwd, runId, asProcess)
  }

  const paused = async (cwd: string): Promise<RunJson> => {
    const result = await pipe(['run', defaultPipeline, '--input', sentence, '--answers', answers, '--json'], {cwd})
    expect(result.code, result.stderr).to.equal(10)
    return json<RunJson>(result)
  }

  const scenarios: Scenario[] = [
    {
      name: 'a run that fails',
      async setup(cwd) {
        await writeFile(path.join(cwd, 'failing.yaml'), failing)
        return {args: ['run', 'failing.yaml']}
      },
      final: 'failed',
      code: 3,
      finish: resumeTo,
    },
    {
      name: 'a run cancelled by its review (--decision drop)',
      setup: async () => ({args: ['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'drop']}),
      final: 'cancelled',
      code: 5,
      finish: async (cwd, runId, asProcess) => {
        const status = await statusOf(cwd, runId)
        if (status === 'awaiting_input') await review(cwd, runId, 'drop', asProcess)
        else if (status !== 'cancelled') await resume(cwd, runId, asProcess)
      },
    },
    {
      name: 'a paused run cancelled by pipe cancel',
      async setup(cwd) {
        const run = await paused(cwd)
        return {args: ['cancel', run.run_id, '--reason', 'superseded'], runId: run.run_id}
      },
      final: 'cancelled',
      // pipe cancel exits 0: it did what was asked (issue 37: it exited 5).
      code: 0,
      finish: async (cwd, runId, asProcess) => {
        if ((await statusOf(cwd, runId)) === 'cancelled') return
        const cancelled = asProcess ? await pipe(['cancel', runId, '--reason', 'superseded'], {cwd}) : await cancelHere(cwd, runId, 'superseded')
        expect(cancelled.code).to.equal(0)
      },
    },
    {
      name: 'a run that blocks (its publication is held as uncertain)',
      async setup(cwd) {
        const run = await paused(cwd)
        const {Store} = await import('../../src/store/file/store.js')
        const {Ledger, ledgerKey} = await import('../../src/store/file/ledger.js')
        const at = new Date().toISOString()
        await new Ledger(await Store.open(path.join(cwd, '.pipe'))).write({
          key: ledgerKey(run.feature_id, 'local', run.spec_version!),
          feature_id: run.feature_id,
          target: 'local',
          target_type: 'file',
          spec_version: run.spec_version!,
          run_id: run.run_id,
          status: 'uncertain',
          attempts: [{n: 1, started_at: at, state: 'sending'}],
          created_at: at,
          updated_at: at,
        })
        return {args: ['review', run.run_id, '--decision', 'go'], runId: run.run_id}
      },
      final: 'blocked',
      code: 6,
      finish: resumeTo,
    },
  ]

  for (const scenario of scenarios) {
    it(`is killed at points spread across ${scenario.name}; the store verifies at once, and again when the run has ended`, async () => {
      // The set-up (a paused run, a ledger entry) is made once; the baseline and every kill start from a copy of it.
      const template = await fresh(`${scenario.final}-template-${scenarios.indexOf(scenario)}`)
      const setup = await scenario.setup(template)
      const copyOfSetup = async (name: string): Promise<string> => {
        const cwd = await fresh(name)
        await cp(template, cwd, {recursive: true})
        return cwd
      }
      const baseDir = await copyOfSetup(`${scenario.final}-baseline-${scenarios.indexOf(scenario)}`)
      const {points, result} = await tracePoints(baseDir, setup.args)
      expect(result.code, result.stderr).to.equal(scenario.code)
      const from = points.indexOf('run-created#1')
      // The store's kinds of point, and the snapshot that ends the run written before its status (a failed or blocked run settled, not run again, by the resume).
      const candidates = storePoints(points.slice(Math.max(from, 0)))
      const ending = candidates.filter((p) => kindOf(p) === 'snapshot-written').at(-1)
      const picked = new Set([...sample(candidates, 6), ...(ending ? [ending] : [])])
      const chosen = candidates.filter((p) => picked.has(p))
      const firsts = firstOfEachKind(chosen)
      for (const [i, point] of chosen.entries()) {
        const cwd = await copyOfSetup(`${scenario.final}-${scenarios.indexOf(scenario)}-${i}`)
        const killed = await pipe(setup.args, {cwd, env: {PIPE_FAULT_KILL_AT: point}})
        expect(killedBy(killed), `killed at ${point}: ${killed.stderr}`).to.equal(true)
        await verifiesAfterKill(cwd, point)
        const runId = setup.runId ?? (await runIds(cwd))[0]!
        await scenario.finish(cwd, runId, firsts.has(point))
        expect(await statusOf(cwd, runId), `${scenario.name}, killed at ${point}`).to.equal(scenario.final)
        const audit = await audited(cwd)
        expect(audit.ok, `after a kill at ${point} and the run's end:\n${said(audit)}`).to.equal(true)
        expect(audit.notes, `after a kill at ${point}: ${said(audit)}`).to.deep.equal([])
      }
    })
  }
})
