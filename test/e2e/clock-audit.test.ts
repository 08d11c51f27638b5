/**
 * A clock set back, and a run creation stopped half way, through the built CLI on a file store:
 * ids keep their order whatever the clock says, and pipe audit verify notes (never fails on) time
 * running backwards in a chain and a feature record no run names, naming the records. The clock is
 * libfaketime preloaded into each process (see reproducible.test.ts); the stop is a fault point.
 * Those stay `pipe` processes, as does the first of each other command the file uses (runs list,
 * snapshot show, spec list, audit verify); the rest run in this process (test/helpers/pipe-here.ts).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir, type CliOptions, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {compareIds} from '../../src/store/file/ids.js'
import {clockAt, needs} from '../helpers/tools.js'

const prd = path.join(examples, 'full-prd.md')

/** The CLI with its clock starting at `at` (YYYY-MM-DD hh:mm:ss). */
function pipeAt(at: string, args: string[], options: CliOptions): Promise<CliResult> {
  return pipe(args, {...options, env: {...clockAt(`@${at}`), ...options.env}})
}

interface Finding {
  record: string
  file: string
  field: string
  message: string
}

interface Report {
  ok: boolean
  problems: Finding[]
  notes: Finding[]
}

/**
 * The spec versions runs wrote, in the order their steps wrote them (run after run), read by
 * `snapshot show` in this process; `firstAsProcess`: the first run's as a `pipe` process.
 */
async function versionsWritten(runIds: string[], cwd: string, store: string[] = [], firstAsProcess = false): Promise<string[]> {
  const out: string[] = []
  for (const [i, runId] of runIds.entries()) {
    const show = i === 0 && firstAsProcess ? pipe : pipeHere
    const shown = await show(['snapshot', 'show', runId, '--json', ...store], {cwd})
    expect(shown.code, shown.stderr).to.equal(0)
    for (const snapshot of json<Array<{step: {seq: number}; spec_version_out: string | null}>>(shown).sort((a, b) => a.step.seq - b.step.seq))
      if (snapshot.spec_version_out) out.push(snapshot.spec_version_out)
  }
  return out
}

/** Two runs, the second with the clock set back across a new year: their features, in creation order. */
async function featuresAcrossNewYear(cwd: string, store: string[] = []): Promise<string[]> {
  const features: string[] = []
  for (const at of ['2032-01-01 00:30:00', '2031-12-31 23:30:00']) {
    const made = await pipeAt(at, ['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json', ...store], {cwd})
    expect(made.code, made.stderr).to.equal(0)
    features.push(json<{feature_id: string}>(made).feature_id)
  }
  return features
}

describe('a clock set back and a run creation stopped half way: ids in order, pipe audit verify says so', function () {
  this.timeout(120000)
  let dir: string
  let cleanup: () => Promise<void>
  before(function () {
    needs(this, 'faketime')
  })
  beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-clock-')))
  afterEach(async () => cleanup())

  /** `pipe audit verify --json`, in this process unless `cli` is pipe(). */
  const audit = async (cli: typeof pipe = pipeHere): Promise<Report> => {
    const result = await cli(['audit', 'verify', '--json'], {cwd: dir})
    expect(result.code, result.stdout + result.stderr).to.equal(0)
    return json<Report>(result)
  }

  it('a run made after the clock went back a day gets an id after the earlier ones, and the audit notes the run index and a review running backwards', async () => {
    const later = await pipeAt('2031-07-10 12:00:00', ['run', defaultPipeline, '--input', prd, '--json'], {cwd: dir})
    expect(later.code, later.stderr).to.equal(10)
    const first = json<{run_id: string}>(later).run_id
    expect(first).to.equal('R-20310710-0001')
    // The clock is set back a day: the review of the spec compiled "tomorrow", and a new run.
    const review = await pipeAt('2031-07-09 12:00:00', ['review', first, '--decision', 'go', '--json'], {cwd: dir})
    expect(review.code, review.stdout + review.stderr).to.equal(0)
    const earlier = await pipeAt('2031-07-09 12:30:00', ['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir})
    expect(earlier.code, earlier.stderr).to.equal(0)
    const second = json<{run_id: string}>(earlier).run_id
    expect(second, 'never an id that sorts before one allocated earlier').to.equal('R-20310710-0002')
    const list = json<{runs: Array<{run_id: string}>}>(await pipe(['runs', 'list', '--json'], {cwd: dir}))
    expect(list.runs.map((r) => r.run_id).sort()).to.deep.equal([first, second])
    // Spec versions too: those written with the clock a day back come after the later ones.
    const versions = await versionsWritten([first, second], dir, [], true)
    expect(versions.length, JSON.stringify(versions)).to.be.greaterThan(2)
    expect(versions, 'versions numbered in allocation order').to.deep.equal([...versions].sort(compareIds))
    expect(new Set(versions).size).to.equal(versions.length)
    expect(
      versions.every((v) => v.startsWith('S-20310710-')),
      JSON.stringify(versions),
    ).to.equal(true)
    const specs = json<{specs: Array<{spec_version: string}>}>(await pipe(['spec', 'list', '--limit', '1000', '--json'], {cwd: dir}))
    expect(specs.specs.map((s) => s.spec_version)).to.deep.equal([...versions].reverse())

    const report = await audit(pipe)
    expect(report.ok, JSON.stringify(report.problems)).to.equal(true)
    const backwards = report.notes.filter((n) => /time runs backwards/.test(n.message))
    const index = backwards.find((n) => n.record === second)
    expect(index, JSON.stringify(report.notes)).to.not.equal(undefined)
    expect(index!.message).to.include(first)
    expect(index!.message).to.include('the run index')
    const timeline = backwards.find((n) => n.record.startsWith(`${first} review_given`))
    expect(timeline, JSON.stringify(report.notes)).to.not.equal(undefined)
    expect(timeline!.message).to.match(/2031-07-09T12:00/)
    expect(timeline!.message).to.match(/2031-07-10T12:0/)
  })

  it('a commit killed after writing a version numbered in a later day than its clock: resume finishes it with that version', async () => {
    const later = await pipeAt('2031-07-10 12:00:00', ['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir})
    expect(later.code, later.stderr).to.equal(0)
    const killed = await pipeAt('2031-07-09 12:00:00', ['run', defaultPipeline, '--input', prd, '--decision', 'go'], {
      cwd: dir,
      env: {PIPE_FAULT_KILL_AT: 'spec-written:compile'},
    })
    expect(killed.code, killed.stdout + killed.stderr).to.not.equal(0)
    const second = 'R-20310710-0002'
    const logged = (await readFile(path.join(dir, '.pipe', 'runs', second, 'commits.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as {spec: {candidate?: string} | null}).spec?.candidate)
      .filter((v): v is string => v !== undefined)
    expect(logged, 'the killed commit named a version of the later day').to.have.length(1)
    expect(logged[0]).to.match(/^S-20310710-/)
    expect(existsSync(path.join(dir, '.pipe', 'specs', `${logged[0]}.json`)), 'killed after the version was written').to.equal(true)
    const resumed = await pipeAt('2031-07-09 12:30:00', ['resume', second, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stdout + resumed.stderr).to.equal(0)
    // Finished with the version the killed process wrote: no number skipped, none written twice.
    const versions = await versionsWritten([json<{run_id: string}>(later).run_id, second], dir)
    expect(versions).to.include(logged[0])
    expect(versions).to.deep.equal(versions.map((_, i) => `S-20310710-${String(i + 1).padStart(4, '0')}`))
    const specs = json<{specs: Array<{spec_version: string}>}>(await pipeHere(['spec', 'list', '--limit', '1000', '--json'], {cwd: dir}))
    expect(specs.specs.map((s) => s.spec_version)).to.deep.equal([...versions].reverse())
    const report = await audit()
    expect(report.ok, JSON.stringify(report.problems)).to.equal(true)
    expect(report.notes.filter((n) => /interrupted/.test(n.message))).to.deep.equal([])
  })

  it('a feature made with the clock set back into the year before is numbered in the later year', async () => {
    expect(await featuresAcrossNewYear(dir)).to.deep.equal(['F-2032-001', 'F-2032-002'])
  })

  it('a run stopped after its feature was recorded and before its run was: the audit names the feature no run names', async () => {
    const made = await pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir})
    expect(made.code, made.stderr).to.equal(0)
    const killed = await pipe(['run', defaultPipeline, '--input', prd, '--decision', 'go'], {cwd: dir, env: {PIPE_FAULT_KILL_AT: 'feature-recorded'}})
    expect(killed.signal, killed.stderr).to.equal('SIGKILL')
    const report = await audit()
    expect(report.ok).to.equal(true)
    const orphans = report.notes.filter((n) => /no run names this feature/.test(n.message))
    const named = json<{runs: Array<{feature_id: string}>}>(await pipeHere(['runs', 'list', '--json'], {cwd: dir})).runs.map((r) => r.feature_id)
    expect(named).to.have.length(1)
    expect(orphans.map((n) => n.record)).to.deep.equal([named[0]!.replace(/-001$/, '-002')])
    expect(orphans[0]!.message).to.match(/pipe run --feature/)
  })
})

describe('on a PostgreSQL store: a run creation stopped after its feature, and a clock set back', function () {
  this.timeout(120000)
  let cluster: Cluster
  let dir: string
  let cleanup: () => Promise<void>
  let url: string
  before(async function () {
    needs(this, 'faketime')
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-clock-pg-'))
    url = cluster.url(await cluster.createDatabase())
  })
  afterEach(async () => cleanup())

  it('names the feature no run names, numbers a run made a day back after the later one, and notes the run index running backwards', async () => {
    const later = await pipeAt('2031-07-10 12:00:00', ['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', url, '--json'], {cwd: dir})
    expect(later.code, later.stderr).to.equal(0)
    const killed = await pipe(['run', defaultPipeline, '--input', prd, '--store', url], {cwd: dir, env: {PIPE_FAULT_KILL_AT: 'feature-recorded'}})
    expect(killed.signal, killed.stderr).to.equal('SIGKILL')
    const earlier = await pipeAt('2031-07-09 12:00:00', ['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', url, '--json'], {cwd: dir})
    expect(earlier.code, earlier.stderr).to.equal(0)
    expect([json<{run_id: string}>(later).run_id, json<{run_id: string}>(earlier).run_id]).to.deep.equal(['R-20310710-0001', 'R-20310710-0002'])
    const versions = await versionsWritten(['R-20310710-0001', 'R-20310710-0002'], dir, ['--store', url])
    expect(versions.length, JSON.stringify(versions)).to.be.greaterThan(2)
    expect(versions, 'versions numbered in allocation order').to.deep.equal([...versions].sort(compareIds))
    expect(
      versions.every((v) => v.startsWith('S-20310710-')),
      JSON.stringify(versions),
    ).to.equal(true)
    const result = await pipeHere(['audit', 'verify', '--json', '--store', url], {cwd: dir})
    expect(result.code, result.stdout + result.stderr).to.equal(0)
    const report = json<Report>(result)
    // The killed run's clock is the machine's: its feature is the one the two runs do not name.
    const named = json<{runs: Array<{feature_id: string}>}>(await pipeHere(['runs', 'list', '--json', '--store', url], {cwd: dir})).runs.map(
      (r) => r.feature_id,
    )
    const orphans = report.notes.filter((n) => /no run names this feature/.test(n.message)).map((n) => n.record)
    expect(orphans).to.have.length(1)
    expect(named).to.have.length(2).and.not.include(orphans[0])
    const backwards = report.notes.find((n) => n.record === 'R-20310710-0002' && /time runs backwards in the run index/.test(n.message))
    expect(backwards, JSON.stringify(report.notes)).to.not.equal(undefined)
  })

  it('numbers a feature made with the clock set back into the year before in the later year', async () => {
    expect(await featuresAcrossNewYear(dir, ['--store', url])).to.deep.equal(['F-2032-001', 'F-2032-002'])
  })
})
