/**
 * Crashes on the built CLI never leave the file store unverifiable: a real SIGKILL at every traced
 * point of run creation, the moment a run folder starts to be built, and at points spread across
 * runs that fail, block or get cancelled; audit verify passes at once, and again when the run has ended.
 *
 * Every kill and every trace is a real `pipe` process (PIPE_FAULT_* is read once per process), as is
 * the first resume after a kill at run creation and each scenario's first resume, review or cancel
 * after a kill; the later ones, and the runs that set a scenario up, run in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {cp, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {AuditReport} from '../../src/store/types.js'
import {bin, defaultPipeline, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {
  answers,
  audited,
  fullRun,
  killedBy,
  kindOf,
  runIds,
  said,
  sample,
  sentence,
  statusOf,
  storePoints,
  storeState,
  type RunJson,
} from '../helpers/durable-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-durable-')))
afterEach(async () => cleanup())

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
        // The first run to resume is resumed by a real process, the others by the command in this process.
        const resumed = await (processResumes++ === 0 ? pipe : pipeHere)(['resume', id, '--json'], {cwd})
        expect(resumed.code, `resume after a kill at ${point}: ${resumed.stderr}`).to.equal(0)
        expect(json<RunJson>(resumed).status).to.equal('succeeded')
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

  type Pipe = (args: string[], options: {cwd: string}) => Promise<CliResult>

  interface Scenario {
    name: string
    /** Prepares a directory, once: each kill starts from a copy of it. Returns the command to kill and the run it concerns (if known before). */
    setup(cwd: string): Promise<{args: string[]; runId?: string}>
    final: string
    /** The exit code of the command when it is not killed. */
    code: number
    /** Drives a killed run to its end through `command` (a `pipe` process or the command in this process). */
    finish(cwd: string, runId: string, command: Pipe): Promise<void>
  }

  const review = async (cwd: string, runId: string, decision: 'go' | 'drop', command: Pipe): Promise<void> => {
    await command(['review', runId, '--decision', decision], {cwd})
  }
  const resume = async (cwd: string, runId: string, command: Pipe): Promise<void> => {
    await command(['resume', runId], {cwd})
  }
  const resumeTo = async (cwd: string, runId: string, command: Pipe): Promise<void> => {
    const status = await statusOf(cwd, runId)
    if (['failed', 'blocked', 'cancelled'].includes(status)) return
    if (status === 'awaiting_input') await review(cwd, runId, 'go', command)
    else await resume(cwd, runId, command)
  }

  /** The run a scenario starts from, paused for its review (set-up: in this process). */
  const paused = async (cwd: string): Promise<RunJson> => {
    const result = await pipeHere(['run', defaultPipeline, '--input', sentence, '--answers', answers, '--json'], {cwd})
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
      finish: async (cwd, runId, command) => {
        const status = await statusOf(cwd, runId)
        if (status === 'awaiting_input') await review(cwd, runId, 'drop', command)
        else if (status !== 'cancelled') await resume(cwd, runId, command)
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
      finish: async (cwd, runId, command) => {
        if ((await statusOf(cwd, runId)) === 'cancelled') return
        const cancelled = await command(['cancel', runId, '--reason', 'superseded'], {cwd})
        expect(cancelled.code, cancelled.stderr).to.equal(0)
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
      // The first resume, review or cancel after a kill in this scenario is a real process; the later ones, after
      // kills at other points, run the same command in this process (they read what the kill left on disk alike).
      const byProcess = new Set<string>()
      const finisher: Pipe = (args, options) => {
        if (byProcess.has(args[0]!)) return pipeHere(args, options)
        byProcess.add(args[0]!)
        return pipe(args, options)
      }
      for (const [i, point] of chosen.entries()) {
        const cwd = await copyOfSetup(`${scenario.final}-${scenarios.indexOf(scenario)}-${i}`)
        const killed = await pipe(setup.args, {cwd, env: {PIPE_FAULT_KILL_AT: point}})
        expect(killedBy(killed), `killed at ${point}: ${killed.stderr}`).to.equal(true)
        await verifiesAfterKill(cwd, point)
        const runId = setup.runId ?? (await runIds(cwd))[0]!
        await scenario.finish(cwd, runId, finisher)
        expect(await statusOf(cwd, runId), `${scenario.name}, killed at ${point}`).to.equal(scenario.final)
        const audit = await audited(cwd)
        expect(audit.ok, `after a kill at ${point} and the run's end:\n${said(audit)}`).to.equal(true)
        expect(audit.notes, `after a kill at ${point}: ${said(audit)}`).to.deep.equal([])
      }
    })
  }
})
