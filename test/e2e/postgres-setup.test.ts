/**
 * A PostgreSQL store URL or role that is wrong reads as E_CONFIG with what to fix, never as a bug in
 * pipe (E_INTERNAL) or as damage (E_INTEGRITY): a URL that does not parse, a port out of range, a %
 * that starts no escape, sslmode=require against a server without SSL, a search_path naming a schema
 * that does not exist, and a role that may INSERT but not UPDATE (which must leave no run stuck
 * `running`). A real cluster (test/helpers/postgres.ts).
 *
 * The first `runs list` (the first URL case) and the first `run` are `pipe` processes, and every
 * sslmode is one: the client library's warning, which the test checks is never said, is said once
 * per process. The further URL cases, the socket folder and search_path refusals, the listings that
 * make or read the tables, the role's refused run and the audit run in this process
 * (test/helpers/pipe-here.ts: the same command from argv and the same PostgreSQL store code).
 */
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'

const prd = path.join(examples, 'full-prd.md')

interface SetUpError {
  code: string
  message: string
  hint: string
}

const setUpError = (result: CliResult): SetUpError => {
  expect(result.code, result.stdout + result.stderr).to.equal(2)
  return json<{error: SetUpError}>(result).error
}

describe('a PostgreSQL store set up wrong: E_CONFIG with what to fix', function () {
  this.timeout(120000)
  let cluster: Cluster
  let dir: string
  let cleanup: () => Promise<void>
  let db: string
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-pg-setup-'))
    db = await cluster.createDatabase()
  })
  afterEach(async () => cleanup())

  /** `pipe runs list --json --store STORE`: a process, or (here) in this process. */
  const list = (store: string, here = false): Promise<CliResult> => (here ? pipeHere : pipe)(['runs', 'list', '--json', '--store', store], {cwd: dir})

  it('a URL that does not parse (an unclosed IPv6 bracket, a port past 65535, a stray %): E_CONFIG naming the part, the password never shown', async () => {
    const cases: Array<[string, RegExp]> = [
      [`postgres://postgres:Se%63ret-1@[::1:${cluster.port}/${db}`, /not a valid URL/],
      [`postgres://postgres:Secret-1@127.0.0.1:99999/${db}`, /port 99999/],
      [`postgres://postgres:Secret-1@127.0.0.1:${cluster.port}/${db}%a`, /%/],
      [`postgres://postgres:Secret-1@127.0.0.1:${cluster.port}/${db}%`, /%/],
    ]
    for (const [url, what] of cases) {
      // The first case from a process, the others in this process.
      const result = await list(url, url !== cases[0]![0])
      const error = setUpError(result)
      expect(error.code, url).to.equal('E_CONFIG')
      expect(error.message, url).to.match(what)
      expect(error.hint, url).to.match(/USER@HOST:PORT\/DATABASE/)
      expect(result.stdout + result.stderr, url).to.not.match(/Secret-1|Se%63ret/)
    }
  })

  it('sslmode=require against a server without SSL: E_CONFIG saying the server does not accept SSL, and no warning of the client library', async () => {
    for (const mode of ['prefer', 'require', 'verify-ca', 'verify-full']) {
      const result = await list(`${cluster.url(db)}?sslmode=${mode}`)
      const error = setUpError(result)
      expect(error.code, mode).to.equal('E_CONFIG')
      expect(error.message).to.match(/SSL/)
      expect(error.hint).to.match(/sslmode/)
      expect(result.stderr, mode).to.not.contain('WARNING')
    }
  })

  it('a socket folder that does not exist (?host=/nowhere): E_IO saying the server could not be reached, with the URL', async () => {
    const result = await list(`postgres://postgres@localhost/${db}?host=/nonexistent-pipe-socket-dir`, true)
    expect(result.code, result.stdout + result.stderr).to.equal(1)
    const error = json<{error: SetUpError}>(result).error
    expect(error.code).to.equal('E_IO')
    expect(error.message).to.contain('cannot open the store at postgres://postgres@localhost/')
    expect(error.hint).to.match(/could not be reached/)
  })

  it('a search_path naming a schema that does not exist: E_CONFIG saying to create it, not damage', async () => {
    const url = `${cluster.url(db)}?options=-c%20search_path%3Dno_such_schema`
    const error = setUpError(await list(url, true))
    expect(error.code).to.equal('E_CONFIG')
    expect(error.hint).to.match(/CREATE SCHEMA/)
    // The hint's fix works.
    await cluster.sql(db, 'CREATE SCHEMA no_such_schema')
    const fixed = await list(url, true)
    expect(fixed.code, fixed.stderr).to.equal(0)
  })

  it("the writer role docs/team.md sets up runs a default run: it numbers runs, specs and evidence through the owner's functions, never creating a sequence itself", async () => {
    // The owner makes the tables (any command), then grants what the docs say, as the docs write it.
    expect((await list(cluster.url(db), true)).code).to.equal(0)
    const role = `writer_${db}`
    const docs = await readFile(path.join(repoRoot, 'docs', 'team.md'), 'utf8')
    const grants = /CREATE ROLE pipe_writer[^\n]*\n([\s\S]*?)```/.exec(docs)![1]!.replaceAll('pipe_writer', role)
    await cluster.sql('postgres', `CREATE ROLE ${role} LOGIN`)
    await cluster.sql(db, grants)
    const asRole = `postgres://${role}@127.0.0.1:${cluster.port}/${db}`
    const result = await pipe(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', asRole, '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(0)
    const run = json<{run_id: string; spec_version: string}>(result)
    expect(run.run_id).to.match(/^R-\d{8}-0001$/)
    expect(run.spec_version).to.match(/^S-\d{8}-\d{4}$/)
    const audit = await pipeHere(['audit', 'verify', '--store', asRole], {cwd: dir})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
  })

  it('a role that may INSERT but not UPDATE: pipe run is E_CONFIG naming the missing privilege, and no run is left running', async () => {
    const role = `inserter_${db}`
    await cluster.sql('postgres', `CREATE ROLE ${role} LOGIN`)
    await cluster.sql(db, `GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO ${role}`)
    const asRole = `postgres://${role}@127.0.0.1:${cluster.port}/${db}`
    const result = await pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--store', asRole, '--json'], {cwd: dir})
    const error = setUpError(result)
    expect(error.code).to.equal('E_CONFIG')
    expect(error.message).to.match(/UPDATE on pipe_runs/)
    expect(error.hint).to.match(/GRANT/)
    expect(await cluster.sql(db, "SELECT run_id FROM pipe_runs WHERE body::jsonb->>'status' = 'running'")).to.deep.equal([])
    expect(await cluster.sql(db, 'SELECT id FROM pipe_features')).to.deep.equal([])
  })
})
