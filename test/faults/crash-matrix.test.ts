/**
 * The engine's crash matrix, in this process over the in-memory store (the reference store): a run
 * dies at every point it passes, not a sample of them (the points of one commit not yet made are one
 * state, and die once: sameUnmadeCommit), and a new engine over what the dead one left takes the run
 * to the end it would have had. A death here is what a SIGKILL is to the store: from
 * the point on, the dead engine's calls fail and change nothing, and the holders it had are gone
 * with it. What a real SIGKILL of a real process leaves on disk (a half-written file, a staged run
 * folder, a lock naming a dead pid) is the file store's and stays e2e (test/e2e/durable.test.ts).
 */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {prepareStart, storeSettings} from '../../src/app/sessions/prepare.js'
import {engineFor} from '../../src/app/sessions/shared.js'
import type {ResumeOptions, StartOptions} from '../../src/engine/engine-types.js'
import type {Engine, RunOutcome} from '../../src/engine/engine.js'
import {deliveredKeys} from '../../src/steps/registry.js'
import type {Provider} from '../../src/providers/types.js'
import {ledgerKey} from '../../src/store/file/ledger.js'
import {MemoryStore} from '../../src/store/memory/store.js'
import type {AuditReport, RunStore} from '../../src/store/types.js'
import type {RunStatus} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {defaultPipeline, examples, tempDir} from '../helpers/cli.js'

/** Thrown at the point a run dies, and by every call its engine makes after. */
class Died extends Error {}

/**
 * `store` as one process sees it: once `die` is called, every call fails and changes nothing (the
 * ledger's too). The store itself is the records that outlive the process.
 */
function processOn(store: MemoryStore): {view: RunStore; die(point: string): never; dead(): boolean} {
  let deadAt: string | undefined
  const refuse = (): never => {
    throw new Died(`the process died at ${deadAt}`)
  }
  const guarded = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(object, prop) {
        const value: unknown = Reflect.get(object, prop, object)
        if (typeof value !== 'function') return value
        return (...args: unknown[]) => {
          if (deadAt !== undefined) return refuse()
          const result: unknown = (value as (...a: unknown[]) => unknown).apply(object, args)
          return prop === 'ledger' && typeof result === 'object' && result !== null ? guarded(result) : result
        }
      },
    })
  return {
    view: guarded(store as RunStore),
    die(point) {
      deadAt = point
      return refuse()
    },
    dead: () => deadAt !== undefined,
  }
}

/** A run's start as `pipe run` prepares it in `cwd`, and the provider its plan makes (the offline one here). */
interface Prepared {
  settings: StartOptions
  provider: () => Promise<Provider>
}

/** What a run goes through: made ready, then the action its process dies in, then what a person does after the crash. */
interface Scenario {
  name: string
  /** The run's settings, as `pipe run` prepares them in `cwd` (once: each run of the scenario then has a folder of its own). */
  start(cwd: string): Promise<Prepared>
  /** Made before the action and never killed (a run paused for its review, a ledger entry): the run's id. */
  setup?(engine: Engine, settings: StartOptions, store: RunStore): Promise<string>
  /** The action whose process dies: a run's start by default, else on the run the set-up made. */
  act?(engine: Engine, runId: string, settings: ResumeOptions): Promise<RunOutcome>
  /** Drives a run whose process died to its end, as a person would after the crash (resume, review, cancel); undefined when it had ended. */
  finish(engine: Engine, runId: string, settings: ResumeOptions, status: RunStatus): Promise<RunOutcome | undefined>
  final: RunStatus
  /**
   * Why a death before the action's last snapshot may leave the run ended without it. Unset: every
   * step of the baseline, always.
   */
  withoutLast?: string
  /**
   * The first point of the part of the run only this scenario has: the deaths before it are another
   * scenario's (the same steps, the same records), so it dies at its first point and from this one on.
   */
  from?: string
}

const sentence = path.join(examples, 'one-sentence.txt')
const answers = path.join(examples, 'one-sentence.answers.yaml')
/** No key and no base URL: the offline provider, as on a machine without either. */
const env = (): NodeJS.ProcessEnv => ({PATH: process.env.PATH})

async function prepared(cwd: string, args: {pipeline: string; decision?: 'go' | 'drop'; answers?: string; input?: string}): Promise<Prepared> {
  const {settings, provider} = await prepareStart({cwd, store: path.join(cwd, '.pipe'), env: env(), ...args})
  return {settings, provider: provider.create}
}

/** A pipeline of files (name: YAML) written in `cwd`, the first of them run. */
async function pipelineOf(cwd: string, files: Record<string, string>): Promise<Prepared> {
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(cwd, name), text)
  return prepared(cwd, {pipeline: path.join(cwd, Object.keys(files)[0]!)})
}

/** The engine a command makes over `store` in `cwd`. */
const engineIn = (cwd: string, store: RunStore, provider: Prepared['provider'], hook?: (point: string) => void): Engine =>
  engineFor(store, {cwd, store: path.join(cwd, '.pipe'), ...(hook ? {hook} : {})}, provider)

const ended = (status: RunStatus): boolean => ['succeeded', 'failed', 'blocked', 'cancelled'].includes(status)

/** A person resumes a run that was interrupted, and decides the review it waits at. */
const resumeTo =
  (decision: 'go' | 'drop') =>
  async (engine: Engine, runId: string, settings: ResumeOptions, status: RunStatus): Promise<RunOutcome | undefined> => {
    if (ended(status)) return undefined
    return engine.resume(runId, status === 'awaiting_input' ? {...settings, review: {decision}} : settings)
  }

/** The default run of one sentence with its answers, paused for its review. */
async function pausedRun(engine: Engine, settings: StartOptions): Promise<string> {
  const paused = await engine.start(settings)
  expect(paused.status).to.equal('awaiting_input')
  return paused.run_id
}

const scenarios: Scenario[] = [
  {
    name: 'the default pipeline, answered and approved up front',
    start: (cwd) => prepared(cwd, {pipeline: defaultPipeline, input: sentence, answers, decision: 'go'}),
    finish: resumeTo('go'),
    final: 'succeeded',
  },
  {
    name: 'the default pipeline, dropped at its review',
    start: (cwd) => prepared(cwd, {pipeline: defaultPipeline, input: sentence, answers, decision: 'drop'}),
    finish: resumeTo('drop'),
    final: 'cancelled',
    from: 'before-step:manual_review#1',
  },
  {
    name: 'the default pipeline, answered up front, paused for its review',
    start: (cwd) => prepared(cwd, {pipeline: defaultPipeline, input: sentence, answers}),
    finish: async (engine, runId, settings, status) => (ended(status) || status === 'awaiting_input' ? undefined : engine.resume(runId, settings)),
    final: 'awaiting_input',
    from: 'before-step:manual_review#1',
  },
  {
    name: 'a pipeline whose last step fails',
    start: (cwd) =>
      pipelineOf(cwd, {
        'failing.yaml':
          'version: 1\nname: failing\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, next: c}\n  - {id: c, kind: command, run: [rm, -rf, /nonexistent]}\n',
      }),
    finish: resumeTo('go'),
    final: 'failed',
  },
  {
    name: 'a foreach of three child runs, one at a time',
    start: (cwd) =>
      pipelineOf(cwd, {
        'main.yaml':
          'version: 1\nname: main\nsteps:\n  - {id: each, kind: foreach, items: "${{ [\'a\', \'b\', \'c\'] }}", pipeline: ./item.yaml, with: {name: "${{ item }}"}, concurrency: 1, next: fin}\n  - {id: fin, kind: end, status: succeeded, reason: "${{ steps.each.outputs.succeeded }} of ${{ steps.each.outputs.total }}"}\n',
        'item.yaml':
          'version: 1\nname: item\ninputs:\n  name: {type: string, required: true}\nsteps:\n  - {id: work, kind: noop, next: done}\n  - {id: done, kind: end, status: succeeded, reason: "did ${{ inputs.name }}"}\n',
      }),
    finish: resumeTo('go'),
    final: 'succeeded',
  },
  {
    name: 'a paused run cancelled by pipe cancel',
    start: (cwd) => prepared(cwd, {pipeline: defaultPipeline, input: sentence, answers}),
    setup: pausedRun,
    act: (engine, runId) => engine.cancel(runId, 'superseded'),
    finish: async (engine, runId, _settings, status) => (status === 'cancelled' ? undefined : engine.cancel(runId, 'superseded')),
    final: 'cancelled',
    withoutLast:
      'a cancel that died after marking the paused run running, before its step was recorded cancelled, leaves a run whose process is gone: pipe cancel ends it without that snapshot (Engine.cancel)',
  },
  {
    name: 'a run approved while its publication is uncertain (it blocks)',
    start: (cwd) => prepared(cwd, {pipeline: defaultPipeline, input: sentence, answers}),
    async setup(engine, settings, store) {
      const runId = await pausedRun(engine, settings)
      const run = await store.readRun(runId)
      const at = '2026-01-01T00:00:00.000Z'
      await store.ledger().write({
        key: ledgerKey(run.feature_id, 'local', run.spec_version!),
        feature_id: run.feature_id,
        target: 'local',
        target_type: 'file',
        spec_version: run.spec_version!,
        run_id: runId,
        status: 'uncertain',
        attempts: [{n: 1, started_at: at, state: 'sending'}],
        created_at: at,
        updated_at: at,
      })
      return runId
    },
    act: (engine, runId, settings) => engine.resume(runId, {...settings, review: {decision: 'go'}}),
    finish: resumeTo('go'),
    final: 'blocked',
  },
]

interface Ended {
  steps: string[]
  spec: unknown
  /** Its child runs in step and item order: their status, steps and what their last step said. */
  children: string[]
}

/** A run's child runs as the checks compare them. */
async function childrenOf(store: RunStore, runId: string): Promise<string[]> {
  return Promise.all(
    (await store.listChildren(runId)).map(async (child) => {
      const steps = await store.readSnapshots(child.run_id)
      return `${child.status}: ${steps.map((s) => s.step.name).join(' ')} (${steps.at(-1)?.decisions.at(-1)?.reason ?? ''})`
    }),
  )
}

/** The snapshots of a run and of its children. */
async function snapshotsWithChildren(store: RunStore, runId: string): Promise<Snapshot[]> {
  const own = await store.readSnapshots(runId)
  const children = await Promise.all((await store.listChildren(runId)).map(async (child) => store.readSnapshots(child.run_id)))
  return [...own, ...children.flat()]
}

/**
 * The scenario in `cwd` over `store`: its set-up through `store`, then its action through `acting`
 * (the store as the process that may die sees it), every point the action passes handed to `hook`.
 */
async function runScenario(
  scenario: Scenario,
  prepared: Prepared,
  cwd: string,
  store: RunStore,
  acting: RunStore,
  hook?: (point: string) => void,
): Promise<{runId?: string; outcome: Promise<RunOutcome>; settings: ResumeOptions}> {
  const settings = await storeSettings({...prepared.settings, cwd}, store)
  const resume: ResumeOptions = {pipeline: settings.pipeline, policy: settings.policy, cwd}
  const runId = scenario.setup ? await scenario.setup(engineIn(cwd, store, prepared.provider), settings, store) : undefined
  const engine = engineIn(cwd, acting, prepared.provider, hook)
  const outcome = runId !== undefined && scenario.act ? scenario.act(engine, runId, resume) : engine.start(settings)
  return {...(runId !== undefined ? {runId} : {}), outcome, settings: resume}
}

const said = (report: AuditReport): string =>
  [...report.problems, ...report.notes, ...report.cleaned].map((f) => `${f.file}  ${f.field}  ${f.record}: ${f.message}`).join('\n')

/** The invariants a run keeps however it was interrupted: the baseline's steps once each, every record written used once, the same last spec, a clean audit. */
async function checkEnded(store: RunStore, runId: string, baseline: Ended, point: string, withoutLast?: string): Promise<void> {
  const list = await store.readSnapshots(runId)
  const steps = withoutLast && list.length === baseline.steps.length - 1 ? baseline.steps.slice(0, -1) : baseline.steps
  expect(
    list.map((s) => s.step.name),
    `the same steps, none twice, none missing, after a death at ${point}`,
  ).to.deep.equal(steps)
  expect(list.map((s) => s.step.seq)).to.deep.equal(steps.map((_, i) => i + 1))
  expect(await childrenOf(store, runId), `one child run per item, each ended as it would have, after a death at ${point}`).to.deep.equal(baseline.children)
  const all = await snapshotsWithChildren(store, runId)
  const written = list.map((s) => s.spec_version_out).filter((v): v is string => v !== null)
  const writtenAll = all.map((s) => s.spec_version_out).filter((v): v is string => v !== null)
  expect((await store.listSpecVersions()).sort(), `every spec version written is used, once, after a death at ${point}`).to.deep.equal([...writtenAll].sort())
  const linked = all.flatMap((s) => s.evidence_links.map((l) => l.evidence_id))
  expect((await store.listEvidenceIds()).sort(), `every evidence record written is linked, once, after a death at ${point}`).to.deep.equal([...linked].sort())
  if (written.length > 0 && steps === baseline.steps)
    expect(await lastSpec(store, written), `the last spec after a death at ${point}`).to.deep.equal(baseline.spec)
  const audit = await store.audit(undefined, {deliveredKeys})
  expect(audit.ok, `audit after a death at ${point}:\n${said(audit)}`).to.equal(true)
  expect(audit.notes, said(audit)).to.deep.equal([])
}

/** The last spec version's body, without its meta (its id and time). */
async function lastSpec(store: RunStore, written: string[]): Promise<unknown> {
  if (written.length === 0) return undefined
  const {meta: _meta, ...body} = await store.readSpec(written.at(-1)!)
  return body
}

/** The points the in-memory store passes inside one step's commit before it makes it (MemoryStore.commitStep). */
const BEFORE_COMMIT = /^(evidence-written|spec-written|before-snapshot):(.+)#\d+$/

/**
 * Whether a death at `point` leaves what a death at the point just before it left: both are points
 * of one commit not yet made. The in-memory store keeps nothing of a commit until it has passed them
 * all (it is all or nothing by construction) and the engine does nothing between them, so the
 * first death of a commit stands for the rest. A store that writes a commit's records one by one
 * (the file store) leaves a different state at each: test/e2e/durable.test.ts kills at those.
 */
function sameUnmadeCommit(before: string | undefined, point: string): boolean {
  const [a, b] = [before === undefined ? null : BEFORE_COMMIT.exec(before), BEFORE_COMMIT.exec(point)]
  return a !== null && b !== null && a[2] === b[2]
}

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-crash-matrix-')))
afterEach(async () => cleanup())

describe('the engine, killed at every point of a run and resumed by another (in-process, the in-memory store)', function () {
  this.timeout(300000)

  for (const scenario of scenarios) {
    it(`${scenario.name}: ends ${scenario.final} with every step once, whatever point its process died at`, async () => {
      const prepared = await scenario.start(dir)
      const baseCwd = path.join(dir, 'baseline')
      await mkdir(baseCwd)
      const baseStore = new MemoryStore(path.join(baseCwd, '.pipe'))
      const points: string[] = []
      const counts = new Map<string, number>()
      const base = await runScenario(scenario, prepared, baseCwd, baseStore, baseStore, (point) => {
        const n = (counts.get(point) ?? 0) + 1
        counts.set(point, n)
        points.push(`${point}#${n}`)
      })
      const outcome = await base.outcome
      expect(outcome.status).to.equal(scenario.final)
      const snapshots = await baseStore.readSnapshots(outcome.run_id)
      const baseline: Ended = {
        steps: snapshots.map((s) => s.step.name),
        children: await childrenOf(baseStore, outcome.run_id),
        spec: await lastSpec(
          baseStore,
          snapshots.map((s) => s.spec_version_out).filter((v): v is string => v !== null),
        ),
      }
      expect(points.length, 'the points the action passes').to.be.at.least(2)

      const from = scenario.from === undefined ? 0 : points.indexOf(scenario.from)
      expect(from, `${scenario.from} is a point of the run`).to.be.at.least(0)
      for (const [i, point] of points.entries()) {
        if (i > 0 && i < from) continue
        if (sameUnmadeCommit(points[i - 1], point)) continue
        const cwd = path.join(dir, `died-${i}`)
        await mkdir(cwd)
        const store = new MemoryStore(path.join(cwd, '.pipe'))
        const first = processOn(store)
        const seen = new Map<string, number>()
        const run = await runScenario(scenario, prepared, cwd, store, first.view, (at) => {
          if (first.dead()) first.die(point)
          const n = (seen.get(at) ?? 0) + 1
          seen.set(at, n)
          if (`${at}#${n}` === point) first.die(point)
        })
        await run.outcome.catch((error: unknown) => {
          // What the dead engine said is the dead process's: only that it died is asserted.
          if (!(error instanceof Died) && !first.dead()) throw error
        })
        expect(first.dead(), `the action reached ${point}`).to.equal(true)
        // The process is gone, and so is every run it held.
        store.endProcess()
        const before = await store.audit(undefined, {deliveredKeys})
        expect(before.ok, `audit at once after a death at ${point}:\n${said(before)}`).to.equal(true)
        const runs = (await store.listRuns({limit: 100})).runs.filter((r) => r.parent === undefined)
        expect(runs.length, `runs after a death at ${point}`).to.be.at.most(1)
        if (runs.length === 0) continue
        const record = runs[0]!
        const second = engineIn(cwd, store, prepared.provider)
        const finished = await scenario.finish(second, record.run_id, run.settings, record.status)
        expect(finished?.status ?? record.status, `the end after a death at ${point}`).to.equal(scenario.final)
        await checkEnded(store, record.run_id, baseline, point, scenario.withoutLast)
      }
    })
  }
})
