/**
 * pipe store copy SRC DST between the file store and the PostgreSQL store, either way: chains and
 * seals intact (pipe audit verify passes on each copy, keyed), the records byte for byte the same
 * after a round trip, and a destination holding records refused.
 *
 * One `pipe` process per behaviour (a copy into the database and one out of it, a head digest read
 * from the database, the two copies at once, a refusal); the runs that make the stores, the audits,
 * the review and the copies around them run in this process (test/helpers/pipe-here.ts: the same
 * command from argv, its output and exit code, the same PostgreSQL store code).
 */
import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import pg from 'pg'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {copyStore} from '../helpers/stores.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {until} from '../helpers/workers.js'

const KEY = 'a-key-only-this-test-knows'

/** Every record file of a file store (the leftovers that are no record, locks and hints, aside). */
async function records(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, {withFileTypes: true})) {
      const full = path.join(at, entry.name)
      const rel = path.relative(root, full)
      if (entry.isDirectory()) await walk(full)
      else if (!/^ids\/|\.lock$|^\.gitignore$|commits\.jsonl$/.test(rel)) out[rel] = await readFile(full, 'utf8')
    }
  }
  await walk(root)
  return out
}

describe('pipe store copy', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let cleanup: () => Promise<void>
  /** Folder stores made once by real runs and copied by each test (helpers/stores.ts): keyed with a finished and a paused run, and plain with one finished run. */
  let made: {dir: string; cleanup: () => Promise<void>}
  let keyed: string
  let pausedId: string
  let plain: string
  before(async function () {
    cluster = await startCluster(this)
    made = await tempDir('pipe-store-copy-made-')
    keyed = path.join(made.dir, 'keyed')
    plain = path.join(made.dir, 'plain')
    const run = (extra: string[], store: string, env: Record<string, string> = {}) =>
      pipeHere(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), ...extra, '--store', store, '--json'], {cwd: made.dir, env})
    const done = await run(['--decision', 'go'], keyed, {PIPE_AUDIT_KEY: KEY})
    expect(done.code, done.stderr).to.equal(0)
    const paused = await run([], keyed, {PIPE_AUDIT_KEY: KEY})
    expect(paused.code, paused.stderr).to.equal(10)
    pausedId = json<{run_id: string}>(paused).run_id
    const one = await run(['--decision', 'go'], plain)
    expect(one.code, one.stderr).to.equal(0)
  })
  after(async () => {
    await cluster?.stop()
    await made?.cleanup()
  })
  beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-store-copy-')))
  afterEach(async () => cleanup())

  it('copies a keyed file store into PostgreSQL and back: audit verify passes on each, and the records come back byte for byte', async () => {
    const env = {PIPE_AUDIT_KEY: KEY}
    // A finished run and a paused one, made with the key.
    const files = path.join(dir, 'files')
    await copyStore(keyed, files)
    const url = cluster.url(await cluster.createDatabase())
    const copied = await pipe(['store', 'copy', files, url, '--json'], {cwd: dir})
    expect(copied.code, copied.stderr).to.equal(0)
    expect(json<{runs: number; ledger: number}>(copied)).to.include({runs: 2, ledger: 1})
    const audit = await pipeHere(['audit', 'verify', '--json', '--store', url], {cwd: dir, env})
    expect(audit.code, audit.stdout).to.equal(0)
    expect(json<{ok: boolean; runs: number; unverifiable: number}>(audit)).to.include({ok: true, runs: 2, unverifiable: 0})
    // Without the key, the keyed seals of the copy cannot be checked: not a pass.
    expect((await pipeHere(['audit', 'verify', '--store', url], {cwd: dir})).code).to.equal(2)
    // The paused run goes on in the database: its review is given there.
    const runId = pausedId
    const reviewed = await pipeHere(['review', runId, '--decision', 'go', '--store', url, '--json'], {cwd: dir, env})
    expect(reviewed.code, reviewed.stderr).to.equal(0)
    expect(json<{status: string}>(reviewed).status).to.equal('succeeded')
    // And back into a folder, with the run finished in the database.
    const back = path.join(dir, 'back')
    const returned = await pipe(['store', 'copy', url, back], {cwd: dir})
    expect(returned.code, returned.stderr).to.equal(0)
    expect(returned.stdout).to.match(/^copied 2 run\(s\)/)
    const again = await pipeHere(['audit', 'verify', '--json', '--store', back], {cwd: dir, env})
    expect(again.code, again.stdout).to.equal(0)
    const original = await records(files)
    const roundTrip = await records(back)
    // Every record of the original is in the copy unchanged; the copy has the review's records too.
    // The review changed its run's record and, publishing, its ledger entry; the logs it appended to
    // (its timeline, the ledger log) begin with the original's lines.
    const changed = new RegExp(`^(runs/${runId}/run\\.json|ledger/F-[0-9-]+\\+local\\+S-[0-9-]+\\.json)$`)
    const appended = new RegExp(`^(runs/${runId}/events\\.jsonl|audit/ledger\\.jsonl)$`)
    for (const [file, body] of Object.entries(original)) {
      if (appended.test(file)) expect(roundTrip[file]!.startsWith(body), file).to.equal(true)
      else if (!changed.test(file) || !roundTrip[file]) expect(roundTrip[file], file).to.equal(body)
    }
    expect(Object.keys(roundTrip).length).to.be.greaterThan(Object.keys(original).length)
  })

  it('gives a store and its copies the same head digest, so a digest recorded from the database checks a folder backup', async () => {
    const env = {PIPE_AUDIT_KEY: KEY}
    const files = path.join(dir, 'files')
    await copyStore(keyed, files)
    /** The head of `pipe audit verify --json`: in this process, or (the database's) a process. */
    const head = async (store: string, asProcess = false): Promise<string> => {
      const args = ['audit', 'verify', '--json', '--store', store]
      const audit = asProcess ? await pipe(args, {cwd: dir, env}) : await pipeHere(args, {cwd: dir, env})
      expect(audit.code, audit.stdout).to.equal(0)
      return json<{head: string}>(audit).head
    }
    // The copies in this process (the first test's are processes).
    const url = cluster.url(await cluster.createDatabase())
    expect((await pipeHere(['store', 'copy', files, url], {cwd: dir})).code).to.equal(0)
    const back = path.join(dir, 'back')
    expect((await pipeHere(['store', 'copy', url, back], {cwd: dir})).code).to.equal(0)
    const digest = await head(url, true)
    expect(await head(files)).to.equal(digest)
    expect(await head(back)).to.equal(digest)
  })

  it('two copies into one database at once: one copies, the other is refused as a destination that holds records', async () => {
    const files = path.join(dir, 'files')
    await copyStore(plain, files)
    const db = await cluster.createDatabase()
    const url = cluster.url(db)
    // Both copies find the database empty, then wait for this lock to write: they write at once.
    const holder = new pg.Client({connectionString: url})
    await holder.connect()
    try {
      await holder.query('BEGIN')
      await holder.query('LOCK TABLE pipe_features IN EXCLUSIVE MODE')
      const copies = [pipe(['store', 'copy', files, url, '--json'], {cwd: dir}), pipe(['store', 'copy', files, url, '--json'], {cwd: dir})]
      await until('both copies wait', async () => (await cluster.sql(db, 'SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted'))[0]!.n === 2)
      await holder.query('COMMIT')
      const results = await Promise.all(copies)
      expect(results.map((r) => r.code).sort()).to.deep.equal([0, 4])
      const refused = results.find((r) => r.code === 4)!
      expect(json<{error: {code: string; message: string}}>(refused).error).to.deep.include({code: 'E_CONFLICT'})
      expect(json<{error: {message: string}}>(refused).error.message).to.match(/already holds records/)
    } finally {
      await holder.end()
    }
    const audit = await pipeHere(['audit', 'verify', '--json', '--store', url], {cwd: dir})
    expect(audit.code, audit.stdout).to.equal(0)
    expect(json<{runs: number}>(audit).runs).to.equal(1)
  })

  it('refuses a destination that holds records, and leaves it as it was', async () => {
    const files = path.join(dir, 'files')
    await copyStore(plain, files)
    const db = await cluster.createDatabase()
    const url = cluster.url(db)
    expect((await pipeHere(['store', 'copy', files, url], {cwd: dir})).code).to.equal(0)
    const before = await cluster.sql(db, 'SELECT count(*)::int AS n FROM pipe_snapshots')
    const twice = await pipe(['store', 'copy', files, url], {cwd: dir})
    expect(twice.code).to.not.equal(0)
    expect(twice.stderr).to.match(/already holds records/)
    expect(await cluster.sql(db, 'SELECT count(*)::int AS n FROM pipe_snapshots')).to.deep.equal(before)
    // The same refusal for a folder, in this process.
    const intoFolder = await pipeHere(['store', 'copy', url, files], {cwd: dir})
    expect(intoFolder.code).to.not.equal(0)
    expect(intoFolder.stderr).to.match(/already holds records/)
  })
})
