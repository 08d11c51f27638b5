/**
 * Issue 35 items 5-6: a worker runs only what the trail vouches for. A database user who can write
 * pipe_runs forges a queued run's typed input, its workspace, or a person's standing confirmation
 * (with a pipe_queue row to wake a worker), re-sealing the row as well as anyone without the audit
 * key can: the worker refuses before it executes anything, says why on the run's queue entry, and
 * goes on serving other runs; pipe audit verify names the field. Each wait is for an event.
 *
 * The workers, and the first test's first `run` and its `audit verify`, are `pipe` processes; the
 * other commands run in this process (test/helpers/pipe-here.ts: the same command, output and exit
 * code).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {until, useWorkerSuite} from '../helpers/workers.js'
import type {Cluster} from '../helpers/postgres.js'
import {canonicalJson, sha256} from '../../src/util/hash.js'

const KEY = 'test-audit-key-of-the-team'
const POLICY = 'version: 1\nallowed_commands:\n  - [node, -e, "..."]\nsandbox: off\nmax_retries_default: 0\n'
/** A command whose only effect is the file it names, in the folder it runs in. */
const writes = (file: string): string => JSON.stringify(['node', '-e', "require('fs').writeFileSync(process.argv[1], 'ran')", file])
const TYPED = `version: 1
name: typed
inputs:
  word: {type: string, required: true}
steps:
  - id: write
    kind: command
    run: ${writes('${{ inputs.word }}.txt')}
    next: done
  - {id: done, kind: end, status: succeeded, reason: written}
`
const CONFIRMED = `version: 1
name: confirmed
steps:
  - id: touch
    kind: command
    run: ${writes('made.txt')}
    confirm: true
    next: done
  - {id: done, kind: end, status: succeeded, reason: it ran}
`

interface Finding {
  record: string
  field: string
}

describe('pipe worker runs only what the trail vouches for (PostgreSQL)', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  const team = useWorkerSuite('pipe-pg-vouch-', (suite) => ({cluster, dir, db, url} = suite))

  /** `pipe run PIPELINE --detach`, in this process or (`command` pipe) as a process: the run's id. */
  const detach = async (pipeline: string, env: Record<string, string>, args: string[] = [], command: typeof pipeHere = pipeHere): Promise<string> => {
    const result = await command(['run', pipeline, '--policy', 'policy.yaml', '--detach', '--store', url, '--json', ...args], {cwd: dir, env})
    expect(result.code, result.stderr).to.equal(0)
    return json<{run_id: string}>(result).run_id
  }
  const statusOf = async (runId: string): Promise<string> =>
    (await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_runs WHERE run_id = $1', [runId])).map(
      (r) => (JSON.parse(r.body) as {status: string}).status,
    )[0]!
  const noteOf = async (runId: string): Promise<string> =>
    (await cluster.sql<{note: string | null}>(db, 'SELECT note FROM pipe_queue WHERE run_id = $1', [runId]))[0]?.note ?? ''

  /** A forger with UPDATE on pipe_runs and no audit key: changes the record and seals it again as well as one can without the key. */
  async function forge(runId: string, change: (record: Record<string, unknown>) => void): Promise<void> {
    const [row] = await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_runs WHERE run_id = $1', [runId])
    const record = JSON.parse(row!.body) as Record<string, unknown>
    change(record)
    const {seal: _s, ...body} = record
    const forged = {...body, seal: sha256(canonicalJson(body))}
    await cluster.sql(db, 'UPDATE pipe_runs SET body = $2 WHERE run_id = $1', [runId, `${JSON.stringify(forged, null, 2)}\n`])
  }

  /** `pipe audit verify --json` of the store, in this process or (`command` pipe) as a process: it fails, and what it found. */
  async function auditFindings(env: Record<string, string>, command: typeof pipeHere = pipeHere): Promise<Finding[]> {
    const audit = await command(['audit', 'verify', '--json', '--store', url], {cwd: dir, env})
    expect(audit.code, audit.stdout).to.not.equal(0)
    return json<{problems: Finding[]}>(audit).problems
  }

  /** Waits until a worker refused `runId` (E_INTEGRITY naming `field` on its queue entry) and drove `honest` to its end. */
  async function refusedWhileServing(runId: string, honest: string, field: string): Promise<string> {
    await until(
      'the forged run is refused and the honest one has ended',
      async () => /E_INTEGRITY/.test(await noteOf(runId)) && (await statusOf(honest)) === 'succeeded',
    )
    const note = await noteOf(runId)
    expect(note).to.contain(field)
    return note
  }

  for (const keyed of [true, false]) {
    it(`a forged typed input of a queued run is refused before it runs, and the audit names it (${keyed ? 'with' : 'without'} PIPE_AUDIT_KEY)`, async () => {
      const env: Record<string, string> = keyed ? {PIPE_AUDIT_KEY: KEY} : {}
      await writeFile(path.join(dir, 'policy.yaml'), POLICY)
      await writeFile(path.join(dir, 'typed.yaml'), TYPED)
      // The first test's first run and its audit are processes.
      const forgedRun = await detach('typed.yaml', env, ['-i', 'word=honest'], keyed ? pipe : pipeHere)
      await forge(forgedRun, (r) => (r.inputs = {word: 'forged'}))
      const honest = await detach('typed.yaml', env, ['-i', 'word=other'])
      team.start(url, ['--concurrency', '1'], {cwd: dir, env})
      const note = await refusedWhileServing(forgedRun, honest, 'inputs')
      expect(note).to.contain(keyed ? 'sealed without the audit key' : 'last timeline line bound')
      expect(existsSync(path.join(dir, 'forged.txt')), 'the forged value was written').to.equal(false)
      expect(existsSync(path.join(dir, 'honest.txt')), 'the forged run ran').to.equal(false)
      expect(existsSync(path.join(dir, 'other.txt'))).to.equal(true)
      expect(await statusOf(forgedRun)).to.equal('pending')
      const problems = await auditFindings(env, keyed ? pipe : pipeHere)
      expect(problems.filter((p) => p.record === forgedRun).map((p) => p.field)).to.include('inputs')
      expect(problems.filter((p) => p.record === honest)).to.deep.equal([])
    })
  }

  it('a worker without the audit key does not run (nor seal again without the key) a run the keyed team queued', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    await writeFile(path.join(dir, 'typed.yaml'), TYPED)
    const keyed = await detach('typed.yaml', {PIPE_AUDIT_KEY: KEY}, ['-i', 'word=keyed'])
    team.start(url, ['--concurrency', '1'], {cwd: dir})
    await until('the worker refused it', async () => /E_INTEGRITY.*set PIPE_AUDIT_KEY/.test(await noteOf(keyed)))
    expect(existsSync(path.join(dir, 'keyed.txt'))).to.equal(false)
    expect(await statusOf(keyed)).to.equal('pending')
    const audit = await pipeHere(['audit', 'verify', '--json', '--store', url], {cwd: dir, env: {PIPE_AUDIT_KEY: KEY}})
    expect(json<{problems: Finding[]}>(audit).problems).to.deep.equal([])
  })

  it('a queued run whose workspace was pointed at another folder is refused: nothing is written there', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    await writeFile(path.join(dir, 'confirmed.yaml'), CONFIRMED.replace('    confirm: true\n', ''))
    const elsewhere = path.join(dir, 'elsewhere')
    await mkdir(elsewhere)
    const forgedRun = await detach('confirmed.yaml', {})
    await forge(forgedRun, (r) => (r.workspace = elsewhere))
    await cluster.sql(db, 'UPDATE pipe_runs SET workspace_root = $2 WHERE run_id = $1', [forgedRun, elsewhere])
    const honest = await detach('confirmed.yaml', {})
    team.start(url, ['--concurrency', '1'], {cwd: dir})
    const note = await refusedWhileServing(forgedRun, honest, 'workspace')
    expect(note).to.contain('workspace_id')
    expect(existsSync(path.join(elsewhere, 'made.txt')), 'the worker wrote in the forged workspace').to.equal(false)
    const fields = (await auditFindings({})).filter((p) => p.record === forgedRun).map((p) => p.field)
    expect(fields).to.include.members(['workspace', 'workspace_id'])
  })

  it('a standing confirmation added to a waiting confirm: true run, with a queue row, does not run the step', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    await writeFile(path.join(dir, 'confirmed.yaml'), CONFIRMED)
    await writeFile(path.join(dir, 'typed.yaml'), TYPED)
    const waiting = await detach('confirmed.yaml', {})
    team.start(url, ['--concurrency', '1'], {cwd: dir})
    await until(
      'the run waits for a person, off the queue',
      async () =>
        (await statusOf(waiting)) === 'awaiting_input' && (await cluster.sql(db, 'SELECT 1 FROM pipe_queue WHERE run_id = $1', [waiting])).length === 0,
    )
    await forge(waiting, (r) => (r.standing_confirmations = [{scope: 'run', decision: 'yes', by: 'mallory', at: new Date().toISOString()}]))
    await cluster.sql(db, "INSERT INTO pipe_queue (run_id, queue) VALUES ($1, 'default')", [waiting])
    const honest = await detach('typed.yaml', {}, ['-i', 'word=other'])
    await refusedWhileServing(waiting, honest, 'standing_confirmations[0]')
    expect(existsSync(path.join(dir, 'made.txt')), 'the confirmed step ran with no person').to.equal(false)
    expect(await statusOf(waiting)).to.equal('awaiting_input')
    // The forged record no longer matches the state its timeline line binds (one audit walk for every store names it so).
    const fields = (await auditFindings({})).filter((p) => p.record === waiting).map((p) => p.field)
    expect(fields).to.include('(state)')
  })
})
