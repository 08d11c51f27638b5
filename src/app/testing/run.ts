/**
 * pipe test: runs each test's pipeline in-process through the same sessions `pipe run` uses, in a
 * temporary store and workspace of its own, then checks its expectations against the records the
 * run left. Tests run concurrently (a pool of `jobs`); nothing they share is process-global state
 * that one test could change under another: each gets its own store (ids, locks, command slots),
 * workspace (published files, command output), and an explicit environment for provider selection.
 */
import {existsSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {isDeepStrictEqual} from 'node:util'
import type {KindCatalog} from '../../config/kind-contract.js'
import type {TestCase} from '../../config/test-file.js'
import {isPipeError} from '../../errors.js'
import type {JsonValue} from '../../expr/index.js'
import {serialiseCassette, type CassetteOptions} from '../../providers/cassette.js'
import {openStore} from '../../store/open.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {makeDirs, writeFileAtomic} from '../../util/fs.js'
import type {RunOutcome} from '../../engine/engine.js'
import {contextFor, evaluatorFor, policyValues} from '../../engine/expressions.js'
import type {Policy} from '../../types/policy.js'
import {policyOrThrow} from '../sessions/shared.js'
import {loadRegexEngine, mayUseRegex} from '../../expr/regex.js'
import {startSession} from '../sessions/start.js'
import {givePersonDecisions} from './decisions.js'
import {goldenDiff, goldenText} from './golden.js'
import {killGroup} from '../../util/process-group.js'
import {childProcess, cp, mkdtemp, readFile, rm, writeFile} from '../../util/fs-async.js'

/** Who decides in a test run: fixed, so records (and goldens) do not depend on who runs the tests. */
export const TEST_USER = 'pipe-test'

/** When every test run starts: its ids (R-20000101-0001, F-2000-001) and times are the same on any day. */
export const TEST_EPOCH = Date.UTC(2000, 0, 1)

/** A test run's clock: from TEST_EPOCH, one millisecond further at each reading, so times still order the records. */
export function testClock(): () => Date {
  let ticks = 0
  return () => new Date(TEST_EPOCH + ticks++)
}

export type FailureKind = 'status' | 'code' | 'outcome' | 'output' | 'assert' | 'golden' | 'confirm' | 'budget' | 'error'

export interface TestFailure {
  kind: FailureKind
  message: string
  /** What the test expects and what the run gave, where a value is compared. */
  expected?: unknown
  actual?: unknown
  /** A unified diff (golden mismatches). */
  diff?: string
}

export interface TestResult {
  /** The test file, as given or found (relative to the working directory when below it). */
  file: string
  name: string
  status: 'passed' | 'failed'
  duration_ms: number
  failures: TestFailure[]
  /** The run, when one started. */
  run?: {run_id: string; status: RunOutcome['status']; steps_run: number; error?: {code: string; message: string; step?: string}}
  /** The test's temporary directory (store/ and workspace/), when it was kept (--keep, or a failure with --keep). */
  kept?: string
  /** What happened to the golden file: it matched, was written (it was missing) or updated. */
  golden?: 'matched' | 'written' | 'updated' | 'mismatch' | 'missing'
}

export interface RunTestsOptions {
  jobs: number
  /** Write missing golden files and rewrite those that differ. */
  update: boolean
  /** Keep every test's temporary directory. */
  keep: boolean
  catalog: KindCatalog
  /** How a test file is shown in results (relative to the working directory). */
  display: (file: string) => string
  /** Called as each test starts and ends (in the order they do). */
  onStart?: (test: TestCase) => void
  onResult?: (result: TestResult) => void
  /** Asked before each test starts; false starts no further test (--bail). */
  shouldStart?: () => boolean
  /** Aborted on Ctrl-C: running tests' runs stop as interrupted (and fail), no further test starts. */
  signal?: AbortSignal
  /** The environment the runs see for provider selection; without OPENAI_API_KEY and OPENAI_BASE_URL, so no test reaches the network. */
  env: NodeJS.ProcessEnv
  /**
   * pipe test --record: each test's cassette is replayed, and what it lacks is asked of the live
   * endpoint (`env` then names it) and added to the cassette, which is created when missing.
   */
  record?: {note?: string}
}

/** The environment tests run with: the process's, without what would send a model request anywhere. */
export function hermeticEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out = {...env}
  delete out.OPENAI_API_KEY
  delete out.OPENAI_BASE_URL
  return out
}

/** Runs the tests, at most `jobs` at once; results in the order of `tests` (without those never started). */
export async function runTests(tests: readonly TestCase[], options: RunTestsOptions): Promise<TestResult[]> {
  const results: Array<TestResult | undefined> = new Array<TestResult | undefined>(tests.length)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < tests.length && (options.shouldStart?.() ?? true) && options.signal?.aborted !== true) {
      const index = next++
      const test = tests[index]!
      options.onStart?.(test)
      const result = await runOne(test, options)
      results[index] = result
      options.onResult?.(result)
    }
  }
  await Promise.all(Array.from({length: Math.max(1, Math.min(options.jobs, tests.length))}, worker))
  return results.filter((r): r is TestResult => r !== undefined)
}

async function runOne(test: TestCase, options: RunTestsOptions): Promise<TestResult> {
  const started = performance.now()
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'pipe-test-'))
  const store = path.join(tmp, 'store')
  const workspace = path.join(tmp, 'workspace')
  const failures: TestFailure[] = []
  const base = {file: options.display(test.file), name: test.name}
  let run: TestResult['run']
  let golden: TestResult['golden']
  try {
    if (test.workspace) await cp(test.workspace, workspace, {recursive: true})
    else makeDirs(workspace)
    for (const argv of test.setup ?? []) await runSetup(argv, workspace, options.env, options.signal)
    let answers: string | undefined
    if (typeof test.answers === 'string') answers = test.answers
    else if (test.answers) {
      answers = path.join(tmp, 'answers.yaml')
      await writeFile(answers, JSON.stringify({answers: test.answers}))
    }
    let inputsFile: string | undefined
    if (test.inputs) {
      inputsFile = path.join(tmp, 'inputs.yaml')
      await writeFile(inputsFile, JSON.stringify(test.inputs))
    }
    let outcome: RunOutcome | undefined
    const now = testClock()
    // A test's stand-in secrets are its run's environment, never this process's (tests run at once).
    const env = test.secrets ? {...options.env, ...test.secrets} : options.env
    try {
      outcome = await startSession({
        cwd: workspace,
        store,
        pipeline: test.pipeline.file,
        user: TEST_USER,
        now,
        env,
        ...(options.signal ? {signal: options.signal} : {}),
        ...(test.input !== undefined ? {text: test.input} : {}),
        ...(test.inputFile ? {input: test.inputFile} : {}),
        ...(answers ? {answers} : {}),
        ...(inputsFile ? {inputsFile} : {}),
        ...(test.decision ? {decision: test.decision} : {}),
        ...(test.note !== undefined ? {note: test.note} : {}),
        // Without --policy a run reads policy.yaml in its workspace: a test names its policy or gets the
        // built-in one, never one lying above the temporary folder.
        ...(test.policy ? {policy: test.policy} : {policyCeiling: workspace}),
        ...(test.cassette
          ? {
              cassette: options.record
                ? await recordingCassette(test.cassette, options.record.note)
                : {file: test.cassette, mode: 'replay' as const, missing: 'error' as const},
            }
          : {}),
      })
    } catch (error) {
      // Refused before the run started (bad input, a missing secret): only an expected code makes that a pass.
      if (!isPipeError(error)) throw error
      const expectedStatus = test.expect.status
      if (test.expect.code !== error.code || expectedStatus !== undefined) {
        failures.push({
          kind: 'error',
          message: `the run did not start: [${error.code}] ${error.message}`,
          ...(test.expect.code !== undefined ? {expected: test.expect.code} : {}),
          actual: error.code,
        })
      }
    }
    if (outcome) {
      const confirmed = await givePersonDecisions(test, outcome, {cwd: workspace, store, user: TEST_USER, now, env, signal: options.signal})
      outcome = confirmed.outcome
      if (confirmed.failure) failures.push(confirmed.failure)
      run = {
        run_id: outcome.run_id,
        status: outcome.status,
        steps_run: outcome.steps_run,
        ...(outcome.error
          ? {error: {code: outcome.error.code, message: outcome.error.message, ...(outcome.error.step ? {step: outcome.error.step} : {})}}
          : {}),
      }
      const records = await openStore(store, 'existing')
      const record = await records.readRun(outcome.run_id)
      const snapshots = await records.readSnapshots(outcome.run_id)
      const spec = record.spec_version ? await records.readSpec(record.spec_version) : null
      failures.push(...checkRun(test, outcome, snapshots))
      // Asserts read the policy the run was under, as its steps did.
      const policy = await policyOrThrow(test.policy, workspace, workspace)
      failures.push(...(await checkAsserts(test, options.catalog, record, snapshots, spec, policy.policy)))
      if (test.golden) {
        const text = goldenText(snapshots, {tmp, root: test.root, tmpdir: os.tmpdir()})
        const checked = await checkGolden(test.golden, text, options.update, options.display)
        golden = checked.state
        if (checked.failure) failures.push(checked.failure)
      }
    }
  } catch (error) {
    failures.push({kind: 'error', message: `pipe test could not run it: ${error instanceof Error ? error.message : String(error)}`})
  }
  const failed = failures.length > 0
  const keep = options.keep
  if (!keep) await rm(tmp, {recursive: true, force: true})
  return {
    ...base,
    status: failed ? 'failed' : 'passed',
    duration_ms: Math.round(performance.now() - started),
    failures,
    ...(run ? {run} : {}),
    ...(keep ? {kept: tmp} : {}),
    ...(golden ? {golden} : {}),
  }
}

/** Fixed so that the commits a setup makes have the same ids on every machine (a cassette's requests may quote them). */
const SETUP_GIT_ENV = {
  GIT_AUTHOR_NAME: 'pipe test',
  GIT_AUTHOR_EMAIL: 'pipe-test@example.invalid',
  GIT_AUTHOR_DATE: '2026-01-01T00:00:00Z',
  GIT_COMMITTER_NAME: 'pipe test',
  GIT_COMMITTER_EMAIL: 'pipe-test@example.invalid',
  GIT_COMMITTER_DATE: '2026-01-01T00:00:00Z',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
}

/** How long one setup command may run; what it prints is kept only as a tail this long. */
const SETUP_TIMEOUT_MS = 60_000
const SETUP_OUTPUT_TAIL = 64 * 1024

/**
 * Runs one setup command in its own process group: at the timeout or on Ctrl-C the whole group is
 * killed (a child it started, holding the output pipes, would otherwise keep the test waiting),
 * and only the tail of its output is kept, whatever it prints.
 */
async function runSetup(argv: string[], cwd: string, env: NodeJS.ProcessEnv, signal?: AbortSignal): Promise<void> {
  const [command, ...args] = argv
  const shown = argv.map((a) => (/^[\w./=:@+-]+$/.test(a) ? a : JSON.stringify(a))).join(' ')
  if (signal?.aborted) throw new Error(`setup command not run: ${shown}: pipe test was interrupted`)
  const outcome = await new Promise<{code: number | null; error?: NodeJS.ErrnoException; why?: 'timeout' | 'interrupted'; stderr: string}>((resolve) => {
    let stderr = ''
    let why: 'timeout' | 'interrupted' | undefined
    const child = childProcess().spawn(command!, args, {cwd, env: {...env, ...SETUP_GIT_ENV}, detached: true, stdio: ['ignore', 'pipe', 'pipe']})
    const killAll = (): void => killGroup(child.pid, 'SIGKILL')
    child.stdout.resume()
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-SETUP_OUTPUT_TAIL)
    })
    const timer = setTimeout(() => {
      why = 'timeout'
      killAll()
    }, SETUP_TIMEOUT_MS)
    const onAbort = (): void => {
      why = 'interrupted'
      killAll()
    }
    signal?.addEventListener('abort', onAbort, {once: true})
    const done = (code: number | null, error?: NodeJS.ErrnoException): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      resolve({code, stderr, ...(error ? {error} : {}), ...(why ? {why} : {})})
    }
    let drain: NodeJS.Timeout | undefined
    child.once('error', (error) => {
      clearTimeout(drain)
      done(null, error)
    })
    child.once('exit', () => {
      // What its group left running goes too; one that left the group may hold the pipes: they are cut.
      killAll()
      drain = setTimeout(() => {
        child.stdout.destroy()
        child.stderr.destroy()
      }, 2000)
    })
    child.once('close', (code) => {
      clearTimeout(drain)
      done(code)
    })
  })
  if (outcome.code === 0 && !outcome.why) return
  const why =
    outcome.error?.code === 'ENOENT'
      ? `${command} is not installed or not on PATH`
      : outcome.why === 'timeout'
        ? `it ran over ${SETUP_TIMEOUT_MS / 1000} s`
        : outcome.why === 'interrupted'
          ? 'pipe test was interrupted'
          : outcome.stderr.trim().split('\n').slice(-5).join('\n') || (outcome.error?.message ?? `it exited with ${outcome.code ?? 'a signal'}`)
  throw new Error(`setup command failed: ${shown}: ${why}`)
}

/** Replay what the cassette has, record what it lacks; a missing cassette starts empty (concurrent tests may share one: writes merge under its lock). */
async function recordingCassette(file: string, note: string | undefined): Promise<CassetteOptions> {
  if (!existsSync(file)) {
    makeDirs(path.dirname(file))
    // wx: when two tests create it at once, one header wins and both append to it.
    await writeFile(file, serialiseCassette({interactions: new Map(), ...(note !== undefined ? {note} : {})}), {flag: 'wx'}).catch(
      (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EEXIST') throw error
      },
    )
  }
  return {file, mode: 'replay', missing: 'live', append: true, ...(note !== undefined ? {note} : {})}
}

function show(value: unknown): string {
  return value === undefined ? '(nothing)' : JSON.stringify(value)
}

/** Status, code, outcomes and outputs: each expectation that does not hold is one failure. */
function checkRun(test: TestCase, outcome: RunOutcome, snapshots: readonly Snapshot[]): TestFailure[] {
  const out: TestFailure[] = []
  const {expect} = test
  const where = outcome.error
    ? ` (${outcome.error.step ? `step ${outcome.error.step}: ` : ''}[${outcome.error.code}] ${outcome.error.message})`
    : outcome.reason && outcome.status !== 'succeeded'
      ? ` (${outcome.reason})`
      : ''
  if (expect.status !== undefined && expect.status !== outcome.status) {
    out.push({kind: 'status', message: `status: expected ${expect.status}, got ${outcome.status}${where}`, expected: expect.status, actual: outcome.status})
  }
  if (expect.code !== undefined && expect.code !== outcome.error?.code) {
    out.push({
      kind: 'code',
      message: `code: expected ${expect.code}, got ${outcome.error?.code ?? 'no error'}${where}`,
      expected: expect.code,
      actual: outcome.error?.code ?? null,
    })
  }
  const latest = new Map<string, Snapshot>()
  for (const s of snapshots) latest.set(s.step.name, s)
  for (const [id, want] of Object.entries(expect.outcomes ?? {})) {
    const got = latest.get(id)?.decisions.at(-1)?.decision ?? null
    if ((want ?? null) !== got) {
      const expected = want ?? 'not run'
      out.push({kind: 'outcome', message: `outcome of ${id}: expected ${expected}, got ${got ?? 'not run'}`, expected: want ?? null, actual: got})
    }
  }
  for (const [key, want] of Object.entries(expect.outputs ?? {})) {
    const id = /^[a-z][a-z0-9_]*/.exec(key)![0]
    const snapshot = latest.get(id)
    if (!snapshot) {
      out.push({kind: 'output', message: `outputs ${key}: expected ${show(want)}, but step ${id} did not run`, expected: want, actual: null})
      continue
    }
    const got = pathValue(snapshot.outputs, key.slice(id.length))
    if (!isDeepStrictEqual(got, want))
      out.push({kind: 'output', message: `outputs ${key}: expected ${show(want)}, got ${show(got)}`, expected: want, actual: got ?? null})
  }
  return out
}

/** The value at `.a.b[2].c` below `root`; undefined when the path leads nowhere. */
function pathValue(root: unknown, rest: string): unknown {
  let node = root
  for (const m of rest.matchAll(/\.([^.[]+)|\[(\d+)\]/g)) {
    if (node === null || typeof node !== 'object') return undefined
    const key = m[1] ?? Number(m[2])
    node = (node as Record<string | number, unknown>)[key]
  }
  return node
}

async function checkAsserts(
  test: TestCase,
  catalog: KindCatalog,
  record: Parameters<typeof contextFor>[0],
  snapshots: Snapshot[],
  spec: CanonicalSpec | null,
  policy: Policy,
): Promise<TestFailure[]> {
  const asserts = test.expect.assert ?? []
  if (asserts.length === 0) return []
  const evaluator = await evaluatorFor(test.pipeline, catalog)
  if (asserts.some(mayUseRegex)) await loadRegexEngine()
  const bound = evaluator.bind(contextFor(record, snapshots, spec, {secrets: {}, policy: policyValues(policy)}))
  const out: TestFailure[] = []
  for (const text of asserts) {
    let value: JsonValue
    try {
      value = bound.render(text)
    } catch (error) {
      out.push({kind: 'assert', message: `assert ${text}: ${error instanceof Error ? error.message : String(error)}`})
      continue
    }
    if (value !== true) out.push({kind: 'assert', message: `assert ${text}: gave ${JSON.stringify(value)}`, expected: true, actual: value})
  }
  return out
}

async function checkGolden(
  file: string,
  text: string,
  update: boolean,
  display: (file: string) => string,
): Promise<{state: NonNullable<TestResult['golden']>; failure?: TestFailure}> {
  const current = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null
    throw error
  })
  const shown = display(file)
  if (current === text) return {state: 'matched'}
  if (update) {
    makeDirs(path.dirname(file))
    await writeFileAtomic(file, text)
    return {state: current === null ? 'written' : 'updated'}
  }
  if (current === null) return {state: 'missing', failure: {kind: 'golden', message: `golden ${shown} does not exist; pipe test --update writes it`}}
  return {
    state: 'mismatch',
    failure: {
      kind: 'golden',
      message: `golden ${shown} differs from this run's snapshots (pipe test --update rewrites it)`,
      diff: goldenDiff(shown, current, text),
    },
  }
}
