/**
 * The PostgreSQL store through the built CLI: --store postgres://… and PIPE_STORE=postgres://… on
 * the commands, a URL never taken as a folder, pg loaded only for a database, the append-only
 * tables, and pipe audit verify naming tampering with rows. A real cluster (test/helpers/postgres.ts).
 *
 * The first `run` (on --store postgres://…), the first `runs list` process (an unreachable
 * database), the modules each process loads and audit verify naming a changed row are `pipe`
 * processes; the runs that set a test up, the other reads, the wrong password, the role that may
 * only read and the run it refuses, and the further refusals and audits run in this process
 * (test/helpers/pipe-here.ts: the same command from argv and the same PostgreSQL store code; its
 * pool idles out on its own).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {sealOf} from '../../src/store/trail/integrity.js'

interface RunJson {
  run_id: string
  status: string
}

const prd = path.join(examples, 'full-prd.md')
const KEY = 'the-team-audit-key-3f9c'

describe('the PostgreSQL store through the CLI', function () {
  this.timeout(120000)
  let cluster: Cluster
  let dir: string
  let cleanup: () => Promise<void>
  let db: string
  let url: string
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-pg-cli-'))
    db = await cluster.createDatabase()
    url = cluster.url(db)
  })
  afterEach(async () => cleanup())

  it('takes --store postgres://… as a database, never as a folder: the run is in the database and no folder postgres: is made', async () => {
    const run = await pipe(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', url, '--json'], {cwd: dir})
    expect(run.code, run.stderr).to.equal(0)
    const done = json<RunJson>(run)
    expect(done.status).to.equal('succeeded')
    // Only what the pipeline publishes to a folder of its own: no store folder, .pipe or postgres:.
    expect(await readdir(dir), 'no store is made in the working directory').to.deep.equal(['published'])
    expect(existsSync(path.join(dir, 'postgres:'))).to.equal(false)
    const rows = await cluster.sql<{run_id: string}>(db, 'SELECT run_id FROM pipe_runs')
    expect(rows.map((r) => r.run_id)).to.deep.equal([done.run_id])
    // The same store through PIPE_STORE, for the commands that read it.
    const env = {PIPE_STORE: url}
    const list = json<{runs: Array<{run_id: string; status: string}>}>(await pipeHere(['runs', 'list', '--json'], {cwd: dir, env}))
    expect(list.runs.map((r) => [r.run_id, r.status])).to.deep.equal([[done.run_id, 'succeeded']])
    const snapshots = await pipeHere(['snapshot', 'list', done.run_id, '--json'], {cwd: dir, env})
    expect(snapshots.code, snapshots.stderr).to.equal(0)
    expect(json<{snapshots: unknown[]}>(snapshots).snapshots.length).to.be.greaterThan(3)
    const audit = await pipeHere(['audit', 'verify', '--json'], {cwd: dir, env})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
    expect(json<{ok: boolean; runs: number}>(audit)).to.include({ok: true, runs: 1})
    const spec = await pipeHere(['spec', 'list', '--json', '--store', url], {cwd: dir})
    expect(spec.code, spec.stderr).to.equal(0)
    expect(await readdir(dir)).to.deep.equal(['published'])
  })

  it('names an unreachable database as an error, and still makes no folder', async () => {
    const result = await pipe(['runs', 'list', '--store', `postgres://postgres@127.0.0.1:${cluster.port}/no_such_db`], {cwd: dir})
    expect(result.code).to.not.equal(0)
    expect(result.stderr).to.match(/no_such_db/)
    expect(result.stdout).to.equal('')
    expect(await readdir(dir)).to.deep.equal([])
  })

  describe('a store set up wrong is said as such, never as damage', () => {
    const setUpError = (result: CliResult): {code: string; message: string; hint: string} => {
      expect(result.code, result.stdout).to.equal(2)
      return json<{error: {code: string; message: string; hint: string}}>(result).error
    }

    it('a wrong password: E_CONFIG with what to check, the password masked on stderr, in --json and in the daily log', async () => {
      await cluster.sql('postgres', "CREATE ROLE pw_user LOGIN PASSWORD 'right-Pa55'")
      // The test cluster trusts everyone; this role alone must give its password.
      const hba = path.join(cluster.dir, 'data', 'pg_hba.conf')
      await writeFile(hba, `host all pw_user 127.0.0.1/32 scram-sha-256\n${await readFile(hba, 'utf8')}`)
      cluster.ctl('reload')
      const home = path.join(dir, 'home')
      const wrong = `postgres://pw_user:Wr0ng-Secret@127.0.0.1:${cluster.port}/${db}`
      const result = await pipeHere(['runs', 'list', '--store', wrong, '--json'], {cwd: dir, env: {PIPE_HOME: home}})
      const error = setUpError(result)
      expect(error.code).to.equal('E_CONFIG')
      expect(error.message).to.match(/password authentication failed/)
      expect(error.hint).to.match(/password/)
      const plain = await pipeHere(['runs', 'list', '--store', wrong], {cwd: dir, env: {PIPE_HOME: home}})
      expect(plain.stderr).to.match(/^Error \[E_CONFIG\]/)
      const logs = await readdir(path.join(home, 'logs'))
      const logged = (await Promise.all(logs.map((f) => readFile(path.join(home, 'logs', f), 'utf8')))).join('')
      expect(logged).to.match(/password authentication failed/)
      for (const text of [result.stdout, result.stderr, plain.stderr, logged]) expect(text).to.not.include('Wr0ng-Secret')
      // The right password opens it.
      await cluster.sql(db, 'GRANT ALL ON ALL TABLES IN SCHEMA public TO pw_user')
      const right = await pipeHere(['runs', 'list', '--store', `postgres://pw_user:right-Pa55@127.0.0.1:${cluster.port}/${db}`], {cwd: dir})
      expect(right.code, right.stderr).to.equal(0)
    })

    it('a database that does not exist: E_CONFIG saying to create it', async () => {
      const error = setUpError(await pipeHere(['runs', 'list', '--json', '--store', cluster.url('no_such_db')], {cwd: dir}))
      expect(error).to.include({code: 'E_CONFIG'})
      expect(error.hint).to.match(/createdb/)
    })

    it("another application's database with a table named as pipe's: E_CONFIG naming a database or schema of pipe's own, its table untouched", async () => {
      const other = `other_${process.pid}`
      await cluster.sql('postgres', `CREATE DATABASE ${other}`)
      await cluster.sql(other, 'CREATE TABLE pipe_runs (id serial PRIMARY KEY, status text); INSERT INTO pipe_runs (status) VALUES ($$theirs$$)')
      const error = setUpError(await pipeHere(['runs', 'list', '--json', '--store', cluster.url(other)], {cwd: dir}))
      expect(error.code).to.equal('E_CONFIG')
      expect(error.hint).to.match(/search_path/)
      expect(await cluster.sql(other, 'SELECT status FROM pipe_runs')).to.deep.equal([{status: 'theirs'}])
      // The schema the hint names is one that works.
      await cluster.sql(other, 'CREATE SCHEMA pipe')
      const inSchema = `${cluster.url(other)}?options=-c%20search_path%3Dpipe`
      const run = await pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', inSchema], {cwd: dir})
      expect(run.code, run.stderr).to.equal(0)
      expect(await cluster.sql(other, 'SELECT count(*)::int AS n FROM pipe.pipe_runs')).to.deep.equal([{n: 1}])
    })

    it('a role that may only read: runs list, runs show and audit verify work; a run is refused as E_CONFIG and records nothing', async () => {
      const run = await pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', url, '--json'], {cwd: dir})
      expect(run.code, run.stderr).to.equal(0)
      const runId = json<RunJson>(run).run_id
      const reader = `reader_${db}`
      await cluster.sql('postgres', `CREATE ROLE ${reader} LOGIN`)
      await cluster.sql(db, `GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${reader}`)
      const asReader = `postgres://${reader}@127.0.0.1:${cluster.port}/${db}`
      for (const args of [
        ['runs', 'list'],
        ['runs', 'show', runId],
        ['audit', 'verify'],
      ]) {
        const read = await pipeHere([...args, '--store', asReader], {cwd: dir})
        expect(read.code, `${args.join(' ')}: ${read.stderr}`).to.equal(0)
      }
      const write = await pipeHere(['run', defaultPipeline, '--input', prd, '--store', asReader, '--json'], {cwd: dir})
      expect(setUpError(write).code).to.equal('E_CONFIG')
      expect(await cluster.sql(db, 'SELECT count(*)::int AS n FROM pipe_runs')).to.deep.equal([{n: 1}])
    })
  })

  it("loads pg only for a postgres:// store, from the commands' script: a file-store run never does, and no command loads an ES module for it", async () => {
    // pg is bundled into the commands' scripts and initialised on first use; at its load it requires
    // Node's DNS resolver (pg/lib/connection-parameters.js), which nothing else a run or a listing
    // of a file store loads. A probe preloaded into each process writes down Node's modules at exit:
    // an ES module loaded (a vendored package, dist/vendor/) is translated by Node's ES loader.
    const probe = path.join(dir, 'probe.cjs')
    await writeFile(probe, `process.on('exit', () => require('node:fs').writeFileSync(process.env.PIPE_TEST_PROBE, process.moduleLoadList.join('\\n')))\n`)
    const modulesOf = async (args: string[]): Promise<string[]> => {
      const out = path.join(dir, `probe-${args[0]}-${args.length}.txt`)
      const result = await pipe(args, {cwd: dir, env: {NODE_OPTIONS: `--require ${probe}`, PIPE_TEST_PROBE: out}})
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0)
      const modules = (await readFile(out, 'utf8')).split('\n')
      expect(modules, 'the probe saw the modules of the process').to.include('NativeModule fs')
      return modules
    }
    const pgLoaded = (modules: string[]): boolean => modules.includes('NativeModule dns')
    expect(pgLoaded(await modulesOf(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', path.join(dir, 'files'), '--json']))).to.equal(
      false,
    )
    expect(pgLoaded(await modulesOf(['runs', 'list', '--store', path.join(dir, 'files')]))).to.equal(false)
    const onDatabase = await modulesOf(['runs', 'list', '--store', url])
    expect(pgLoaded(onDatabase), 'a postgres:// store loads pg').to.equal(true)
    expect(onDatabase, 'pg comes from the script, not an ES module').to.not.include('NativeModule internal/modules/esm/translators')
  })

  describe('tampering with rows', () => {
    let runId: string
    const env = (): Record<string, string> => ({PIPE_STORE: url, PIPE_AUDIT_KEY: KEY})
    /** `pipe audit verify --json`'s report: in this process, or (asProcess) a process. */
    const audit = async (asProcess = false): Promise<{ok: boolean; problems: Array<{record: string; file: string; field: string; message: string}>}> => {
      const result = await (asProcess ? pipe : pipeHere)(['audit', 'verify', '--json'], {cwd: dir, env: env()})
      return json(result)
    }
    beforeEach(async () => {
      const run = await pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir, env: env()})
      expect(run.code, run.stderr).to.equal(0)
      runId = json<RunJson>(run).run_id
      // The store passes its audit before it is tampered with: `pipe audit verify` exits 0.
      const before = await pipeHere(['audit', 'verify'], {cwd: dir, env: env()})
      expect(before.code, before.stdout + before.stderr).to.equal(0)
    })

    it('refuses UPDATE and DELETE of the trail, even from the owner, by privilege and by trigger', async () => {
      for (const statement of [
        'UPDATE pipe_snapshots SET body = body',
        'DELETE FROM pipe_events',
        'DELETE FROM pipe_run_index',
        'TRUNCATE pipe_specs',
        'DELETE FROM pipe_runs',
        'UPDATE pipe_counters SET n = 0',
      ]) {
        let refused: string | null = null
        await cluster.sql(db, statement).catch((error: Error) => (refused = error.message))
        expect(refused, statement).to.match(/append-only|only moves forward/)
      }
      const privileges = await cluster.sql<{privilege_type: string}>(
        db,
        "SELECT privilege_type FROM information_schema.role_table_grants WHERE table_name = 'pipe_snapshots' AND privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')",
      )
      expect(privileges).to.deep.equal([])
      expect((await audit()).ok).to.equal(true)
    })

    it('names an UPDATE of a snapshot row (the trigger disabled by a superuser)', async () => {
      await cluster.sql(
        db,
        `SET session_replication_role = replica; UPDATE pipe_snapshots SET body = replace(body, '"decision": "success"', '"decision": "failure"') WHERE run_id = '${runId}' AND seq = 2`,
      )
      // (A changed row named by a process; the other tamperings' audits in this process.)
      const report = await audit(true)
      expect(report.ok).to.equal(false)
      expect(report.problems.map((p) => [p.record, p.file])).to.deep.include([`${runId}#2`, `pipe_snapshots(${runId}, 2)`])
      expect(report.problems.find((p) => p.file === `pipe_snapshots(${runId}, 2)`)!.field).to.equal('decisions')
    })

    it('names a deleted line of a chain (a timeline line, a run index line)', async () => {
      await cluster.sql(db, `SET session_replication_role = replica; DELETE FROM pipe_events WHERE run_id = '${runId}' AND n = 2`)
      const report = await audit()
      expect(
        report.problems.some((p) => p.file === 'pipe_events(3)' && p.field === 'pos' && /line 2 .*missing/.test(p.message)),
        JSON.stringify(report.problems),
      ).to.equal(true)
      expect(report.problems.some((p) => p.file === 'pipe_events(3)' && p.field === 'prev')).to.equal(true)
      const second = json<RunJson>(await pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir, env: env()}))
      await cluster.sql(db, `SET session_replication_role = replica; DELETE FROM pipe_run_index WHERE run_id = '${runId}'`)
      const again = await audit()
      expect(again.problems.some((p) => p.record === runId && /not in the run index/.test(p.message))).to.equal(true)
      expect(again.problems.some((p) => p.record === second.run_id && p.file === 'pipe_run_index(2)' && /missing/.test(p.message))).to.equal(true)
    })

    it('names a row re-sealed without the key', async () => {
      const [row] = await cluster.sql<{body: string}>(db, `SELECT body FROM pipe_runs WHERE run_id = '${runId}'`)
      const {seal: _s, ...record} = JSON.parse(row!.body) as Record<string, unknown>
      const body = {...record, status: 'failed'}
      // Sealed as pipe would without the key: a plain SHA-256 where the team's seals are keyed.
      const resealed = {...body, seal: sealOf(body, undefined)}
      await cluster.sql(db, `UPDATE pipe_runs SET body = $1 WHERE run_id = $2`, [JSON.stringify(resealed, null, 2), runId])
      const report = await audit()
      const found = report.problems.find((p) => p.file === `pipe_runs(${runId})` && p.field === 'seal')
      expect(found?.message).to.match(/sealed without the audit key/)
    })

    it('never puts PIPE_AUDIT_KEY in the database', async () => {
      const tables = await cluster.sql<{table_name: string}>(db, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
      expect(tables.length).to.be.greaterThan(8)
      for (const {table_name: table} of tables) {
        const rows = await cluster.sql<{text: string}>(db, `SELECT t::text AS text FROM ${table} t`)
        for (const row of rows) expect(row.text, table).to.not.include(KEY)
      }
      const seals = await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_snapshots')
      expect(seals[0]!.body).to.include('hmac-sha256:')
    })
  })
})
