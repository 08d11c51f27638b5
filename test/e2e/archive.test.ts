/**
 * pipe store archive and pipe audit verify --archive on the built CLI (issue 37 item 6): ended runs
 * (a parent with its children together) leave the store for one deterministic archive file each,
 * read back here by an independent reader (python3, none of pipe's code); the store keeps an anchor
 * per run, so audit verify proves what stays and what left; a changed byte of any member is named;
 * a SIGKILL between the steps of a move leaves a state the next command finishes.
 *
 * Most commands run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output
 * and exit code). A real `pipe` process stays for a kill or a pause at a fault point, and in each test
 * for the command it is about (each marked).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {verifyArchiveFile} from '../../src/app/archive.js'
import {memberName} from '../../src/store/trail/archive.js'
import {sha256} from '../../src/util/hash.js'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {copyStore} from '../helpers/stores.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {changeIn} from '../helpers/wait.js'

const ITEM = `version: 1
name: item
inputs:
  name: {type: string, required: true}
steps:
  - {id: work, kind: noop, next: done}
  - {id: done, kind: end, status: succeeded, reason: "did \${{ inputs.name }}"}
`
const MAIN = `version: 1
name: main
artifacts: true
steps:
  - id: each
    kind: foreach
    items: "\${{ ['a', 'b'] }}"
    pipeline: ./item.yaml
    with: {name: "\${{ item }}"}
    next: fin
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.succeeded }} of \${{ steps.each.outputs.total }}"}
`

/** The independent reader: the archive's members, each sha256 and the digest checked by python3 alone. */
const READER = `
import hashlib, json, sys
raw = open(sys.argv[1], 'rb').read()
lines = raw.split(b'\\n')
assert lines[-1] == b'', 'ends with a newline'
lines = lines[:-1]
head = json.loads(lines[0])
digest = json.loads(lines[-1])['digest']
assert digest == 'sha256:' + hashlib.sha256(raw[: len(raw) - len(lines[-1]) - 1]).hexdigest(), 'digest'
kinds = {}
for line in lines[1:-1]:
    m = json.loads(line)
    content = m.get('body', m.get('line', m.get('base64')))
    assert m['sha256'] == 'sha256:' + hashlib.sha256(content.encode('utf-8')).hexdigest(), m
    kinds[m['member']] = kinds.get(m['member'], 0) + 1
print(json.dumps({'format': head['format'], 'runs': head['runs'], 'members': head['members'], 'kinds': kinds}))
`

interface Moved {
  archived: Array<{run_id: string; runs: string[]; status: string; archive: string}>
  finished: string[]
  dry_run: boolean
}

describe('pipe store archive and audit verify --archive', function () {
  this.timeout(180000)
  let made: {dir: string; cleanup: () => Promise<void>}
  let dir: string
  let cleanup: () => Promise<void>
  let store: string
  let finished: string
  let paused: string
  let parent: string

  before(async () => {
    made = await tempDir('pipe-archive-made-')
    const s = path.join(made.dir, 's')
    const run = (extra: string[]) =>
      pipeHere(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), ...extra, '--store', s, '--json'], {cwd: made.dir})
    const done = await run(['--decision', 'go'])
    expect(done.code, done.stderr).to.equal(0)
    finished = json<{run_id: string}>(done).run_id
    const held = await run([])
    expect(held.code, held.stderr).to.equal(10)
    paused = json<{run_id: string}>(held).run_id
    await writeFile(path.join(made.dir, 'item.yaml'), ITEM)
    await writeFile(path.join(made.dir, 'main.yaml'), MAIN)
    const fan = await pipeHere(['run', path.join(made.dir, 'main.yaml'), '--text', 'x', '--store', s, '--json'], {cwd: made.dir})
    expect(fan.code, fan.stderr).to.equal(0)
    parent = json<{run_id: string}>(fan).run_id
  })
  after(async () => made?.cleanup())
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-archive-'))
    store = path.join(dir, 's')
    await copyStore(path.join(made.dir, 's'), store)
  })
  afterEach(async () => cleanup())

  /** \`pipe store archive --json\` of every ended run: in this process, and as a process. */
  const archiveArgs = (extra: string[]): string[] => ['store', 'archive', '--before', '2999-01-01', '--store', store, '--json', ...extra]
  const archive = (...extra: string[]) => pipeHere(archiveArgs(extra), {cwd: dir})
  const archiveProcess = (...extra: string[]) => pipe(archiveArgs(extra), {cwd: dir})
  const runsIn = async (): Promise<string[]> => (await readdir(path.join(store, 'runs'))).filter((n) => n.startsWith('R-')).sort()
  const fileOf = (runId: string): string => path.join(store, 'archive', `${runId}.pipe-archive.jsonl`)
  /** \`pipe audit verify --store STORE\`: its exit code and everything it says, as a process or in this process. */
  const auditStore = async (asProcess: boolean): Promise<{code: number | null; said: string}> => {
    const r = await (asProcess ? pipe : pipeHere)(['audit', 'verify', '--store', store], {cwd: dir})
    return {code: r.code, said: r.stdout + r.stderr}
  }

  it('moves the ended runs (a parent with its children) into archives an independent reader checks; the paused run stays; audit verify proves both', async () => {
    const all = await runsIn()
    const dry = await archive('--dry-run')
    expect(dry.code, dry.stderr).to.equal(0)
    const planned = json<Moved>(dry)
    expect(planned.dry_run).to.equal(true)
    expect(planned.archived.map((a) => a.run_id)).to.deep.equal([finished, parent])
    expect(planned.archived[1]!.runs).to.have.length(3)
    expect(await runsIn(), 'a dry run moves nothing').to.deep.equal(all)

    // The move, the store's audit, an archive's audit and the refusal of an archived run as processes.
    const moved = await archiveProcess()
    expect(moved.code, moved.stderr).to.equal(0)
    expect(json<Moved>(moved).archived.map((a) => [a.run_id, a.archive])).to.deep.equal([
      [finished, fileOf(finished)],
      [parent, fileOf(parent)],
    ])
    expect(await runsIn()).to.deep.equal([paused])

    const read = (file: string) =>
      JSON.parse(execFileSync('python3', ['-c', READER, file], {encoding: 'utf8'})) as {runs: string[]; kinds: Record<string, number>}
    const one = read(fileOf(finished))
    expect(one.runs).to.deep.equal([finished])
    expect(Object.keys(one.kinds)).to.include.members(['index', 'run', 'event', 'snapshot', 'spec', 'evidence', 'feature', 'ledger', 'ledger-log'])
    const fan = read(fileOf(parent))
    expect(fan.runs).to.have.length(3)
    expect(fan.kinds.artifact, 'the live artifacts').to.be.greaterThan(0)

    const audit = await pipe(['audit', 'verify', '--store', store, '--json'], {cwd: dir})
    expect(audit.code, audit.stdout).to.equal(0)
    const report = json<{ok: boolean; runs: number; archives: Array<{run_id: string; archive: string}>}>(audit)
    expect(report.runs).to.equal(1)
    expect(report.archives.map((a) => a.archive)).to.include(`archive/${finished}.pipe-archive.jsonl`)
    for (const file of [fileOf(finished), fileOf(parent)]) {
      const alone = await (file === fileOf(finished) ? pipe : pipeHere)(['audit', 'verify', '--archive', file], {cwd: dir})
      expect(alone.code, alone.stdout + alone.stderr).to.equal(0)
    }
    const shown = await pipe(['runs', 'show', finished, '--store', store], {cwd: dir})
    expect(shown.code).to.not.equal(0)
    expect(shown.stderr).to.include(`was archived`).and.include(`archive/${finished}.pipe-archive.jsonl`)
  })

  it('the same run archived from two copies of a store gives byte-identical files, with no path of the machine', async () => {
    const other = path.join(dir, 'other')
    await copyStore(path.join(made.dir, 's'), other)
    expect((await archive('--to', path.join(dir, 'a'))).code).to.equal(0)
    // One in this process, the other as a process.
    const second = await pipe(['store', 'archive', '--before', '2999-01-01', '--store', other, '--to', path.join(dir, 'b')], {cwd: dir})
    expect(second.code, second.stderr).to.equal(0)
    for (const id of [finished, parent]) {
      const a = await readFile(path.join(dir, 'a', `${id}.pipe-archive.jsonl`))
      const b = await readFile(path.join(dir, 'b', `${id}.pipe-archive.jsonl`))
      expect(a.equals(b), id).to.equal(true)
      expect(a.toString()).to.not.include(dir)
    }
  })

  it('names a changed byte of every kind of member, and a member changed and re-hashed by its seal or link', async () => {
    expect((await archive()).code).to.equal(0)
    const kinds = ['index', 'run', 'event', 'snapshot', 'spec', 'evidence', 'feature', 'ledger', 'ledger-log', 'artifact']
    const sources = {[finished]: await readFile(fileOf(finished), 'utf8'), [parent]: await readFile(fileOf(parent), 'utf8')}
    for (const kind of kinds) {
      const [id, text] = Object.entries(sources).find(([, t]) => t.includes(`{"member":"${kind}"`))!
      const lines = text.split('\n').slice(0, -1)
      const n = lines.findIndex((l) => l.startsWith(`{"member":"${kind}"`))
      const member = JSON.parse(lines[n]!) as Record<string, string>
      const field = kind === 'artifact' ? 'base64' : 'body' in member ? 'body' : 'line'
      const file = path.join(dir, `${kind}.pipe-archive.jsonl`)

      // One byte changed: the member's sha256 names it, and the digest the archive.
      const flipped = member[field]!.replace(/[0-9a-f]/, (c) => (c === '0' ? '1' : '0'))
      expect(flipped, kind).to.not.equal(member[field])
      await writeFile(file, [...lines.slice(0, n), JSON.stringify({...member, [field]: flipped}), ...lines.slice(n + 1)].join('\n') + '\n')
      const report = await verifyArchiveFile(file)
      expect(report.ok, kind).to.equal(false)
      expect(report.problems, kind).to.deep.include({
        record: memberName(member),
        file: `${file}:${n + 1}`,
        field: 'sha256',
        message: 'does not match the member: its content was changed',
      })
      expect(
        report.problems.map((p) => p.field),
        kind,
      ).to.include('digest')

      if (kind === 'artifact') continue // an artifact has no seal of its own: the store's anchor (the digest) proves it, below
      // Changed and re-hashed (member sha256 and digest made anew, as a forger with this file's format would): the record's own seal or link names it.
      const value = JSON.parse(member[field]!) as Record<string, unknown>
      const forged = {...member, [field]: JSON.stringify({...value, forged: true})}
      forged.sha256 = sha256(forged[field]!)
      const body = [...lines.slice(0, n), JSON.stringify(forged), ...lines.slice(n + 1, -1)].map((l) => `${l}\n`).join('')
      await writeFile(file, `${body}${JSON.stringify({digest: sha256(body)})}\n`)
      const rehashed = await verifyArchiveFile(file)
      expect(rehashed.ok, `${kind} re-hashed in ${id}`).to.equal(false)
      expect(
        rehashed.problems.filter((p) => p.field !== 'sha256' && p.field !== 'digest'),
        kind,
      ).to.not.be.empty
    }
    const cli = await pipe(['audit', 'verify', '--archive', path.join(dir, 'run.pipe-archive.jsonl')], {cwd: dir})
    expect(cli.code).to.equal(4)
    expect(cli.stdout).to.include('run.pipe-archive.jsonl:')
  })

  it('a store whose archive is missing or changed, or whose run left without an anchor, fails audit verify by name', async () => {
    expect((await archive()).code).to.equal(0)
    const text = await readFile(fileOf(parent), 'utf8')
    await rm(fileOf(finished))
    // A member left out and the digest made anew: a whole archive, but not the one the run index anchored.
    const kept = text
      .split('\n')
      .slice(0, -2)
      .filter((l) => !l.startsWith('{"member":"artifact"'))
    const body = kept.map((l) => `${l}\n`).join('')
    await writeFile(fileOf(parent), `${body}${JSON.stringify({digest: sha256(body)})}\n`)
    await rm(path.join(store, 'runs', paused), {recursive: true})
    const audit = await pipe(['audit', 'verify', '--store', store], {cwd: dir})
    expect(audit.code, audit.stdout).to.equal(4)
    expect(audit.stdout).to.include(`${fileOf(finished)}  (file)  ${finished}: the archive is missing`)
    expect(audit.stdout).to.include(`${fileOf(parent)}  (file)  ${parent}: is not the archive the run left for`)
    expect(audit.stdout).to.include(`${paused}: the run is missing (the run index names it, and no archive anchor`)
  })

  // Killed after the first archive is written (no anchor yet), after its anchor (records still here), with its folder renamed aside, and in the middle of removing the parent's tree.
  for (const point of ['archive-written', 'archive-anchored', 'archive-renamed', 'archive-removed#2']) {
    // After the first kill point, audit verify and the archive that finishes the move run as processes; after the others, in this process.
    const asProcess = point === 'archive-written'
    it(`a SIGKILL at ${point} leaves a store audit verify passes, and the next pipe store archive finishes the move`, async () => {
      const killed = await pipe(['store', 'archive', '--before', '2999-01-01', '--store', store], {cwd: dir, env: {PIPE_FAULT_KILL_AT: point}})
      expect(killed.signal).to.equal('SIGKILL')
      const between = await auditStore(asProcess)
      expect(between.code, between.said).to.equal(0)
      expect(between.said.includes('were not removed yet'), between.said).to.equal(point === 'archive-anchored' || point === 'archive-removed#2')
      const written = await readFile(fileOf(finished))
      const again = await (asProcess ? archiveProcess : archive)()
      expect(again.code, again.stderr).to.equal(0)
      const moved = json<Moved>(again)
      const expected = {
        'archive-written': {archived: [finished, parent], finished: 0},
        'archive-anchored': {archived: [parent], finished: 1},
        'archive-renamed': {archived: [parent], finished: 1},
        'archive-removed#2': {archived: [], finished: 2},
      }[point]!
      expect(moved.archived.map((a) => a.run_id)).to.deep.equal(expected.archived)
      expect(moved.finished).to.have.length(expected.finished)
      expect(await runsIn()).to.deep.equal([paused])
      expect(
        (await readdir(path.join(store, 'runs'))).filter((n) => n.startsWith('.archived-')),
        'nothing left aside',
      ).to.deep.equal([])
      expect((await readFile(fileOf(finished))).equals(written)).to.equal(true)
      const after = await auditStore(asProcess)
      expect(after.code, after.said).to.equal(0)
      expect(after.said).to.not.include('were not removed yet')
    })
  }

  it('leaves a run that is running meanwhile alone, and it runs on to its end', async () => {
    const gate = path.join(dir, 'gate')
    await mkdir(gate)
    const running = pipe(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--store', store, '--json'], {
      cwd: dir,
      env: {PIPE_FAULT_PAUSE_AT: 'before-step:compile', PIPE_FAULT_PAUSE_DIR: gate},
    })
    await changeIn(gate, async () => (await readdir(gate)).some((n) => n.startsWith('reached.')), 'the run reaching its compile step', running)
    const moved = await archive()
    expect(moved.code, moved.stderr).to.equal(0)
    expect(json<Moved>(moved).archived.map((a) => a.run_id)).to.deep.equal([finished, parent])
    await writeFile(path.join(gate, 'go'), '')
    const ended = await running
    expect(ended.code, ended.stderr).to.equal(0)
    expect(await runsIn()).to.deep.equal([paused, json<{run_id: string}>(ended).run_id].sort())
    const audit = await auditStore(false)
    expect(audit.code, audit.said).to.equal(0)
  })

  it('two at once: the one that finds a run the other just moved leaves it to that one (no E_IO), and each run is archived once', async () => {
    const gate = path.join(dir, 'gate')
    await mkdir(gate)
    // The first stops with a run read as ready to leave, before it locks it; the second moves them all meanwhile.
    const first = pipe(['store', 'archive', '--before', '2999-01-01', '--store', store, '--json'], {
      cwd: dir,
      env: {PIPE_FAULT_PAUSE_AT: 'archive-locking', PIPE_FAULT_PAUSE_DIR: gate},
    })
    await changeIn(gate, async () => (await readdir(gate)).some((n) => n.startsWith('reached.')), 'the first archive reaching its first lock', first)
    const second = await archive()
    expect(second.code, second.stderr).to.equal(0)
    expect(json<Moved>(second).archived.map((a) => a.run_id)).to.deep.equal([finished, parent])
    await writeFile(path.join(gate, 'go'), '')
    const late = await first
    expect(late.code, late.stderr).to.equal(0)
    expect(json<Moved>(late).archived).to.deep.equal([])
    expect(await runsIn()).to.deep.equal([paused])
    const audit = await auditStore(false)
    expect(audit.code, audit.said).to.equal(0)
  })

  it("a --to it cannot make (under /proc, where Node's recursive mkdir spins for ever) is E_IO at once, and nothing moves", async () => {
    // Both as processes: were the check lost, a command here would spin in the test's own process, not fail.
    const result = await pipe(['store', 'archive', '--before', '2999-01-01', '--store', store, '--to', '/proc/pipe-nowhere/archive'], {cwd: dir})
    expect(result.stderr).to.include('E_IO').and.include("mkdir '/proc/pipe-nowhere'")
    expect(await runsIn()).to.have.length(5)
    const run = await pipe(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--store', '/proc/pipe-nowhere/store'], {cwd: dir})
    expect(run.stderr).to.include('E_IO').and.include('cannot create the store at /proc/pipe-nowhere/store')
  })

  it('refuses a DATE that is not one, quoting it (E_INVALID_ARGS), and moves nothing', async () => {
    // The first as a process, the others in this process.
    for (const bad of ['yesterday', '2026-02-30', '2026-11-21 09:00']) {
      const result = await (bad === 'yesterday' ? pipe : pipeHere)(['store', 'archive', '--before', bad, '--store', store], {cwd: dir})
      expect(result.code, bad).to.equal(2)
      expect(result.stderr, bad)
        .to.include('E_INVALID_ARGS')
        .and.include(`--before ${JSON.stringify(bad)} is not a date`)
    }
    expect(await runsIn()).to.have.length(5)
  })

  describe('on PostgreSQL', () => {
    let cluster: Cluster
    before(async function () {
      cluster = await startCluster(this)
    })
    after(async () => cluster?.stop())

    it('archives into the folder it is told, deletes only what an anchor covers, and audit verify proves it there or in --archives', async () => {
      const database = await cluster.createDatabase()
      const url = cluster.url(database)
      const run = async (extra: string[]): Promise<string> => {
        const r = await pipeHere(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), ...extra, '--store', url, '--json'], {cwd: dir})
        expect([0, 10], r.stderr).to.include(r.code)
        return json<{run_id: string}>(r).run_id
      }
      const ended = await run(['--decision', 'go'])
      const waiting = await run([])
      // A database has no folder of its own: where the archives go is said, not guessed. (The refusal
      // and the move as processes, the rest in this process.)
      const untold = await pipe(['store', 'archive', '--before', '2999-01-01', '--store', url], {cwd: dir})
      expect(untold.code, untold.stderr).to.equal(2)
      expect(untold.stderr).to.include('E_INVALID_ARGS').and.include('--to DIR')
      const to = path.join(dir, 'pg-archive')
      const moved = await pipe(['store', 'archive', '--before', '2999-01-01', '--store', url, '--to', to, '--json'], {cwd: dir})
      expect(moved.code, moved.stderr).to.equal(0)
      expect(json<Moved>(moved).archived.map((a) => a.run_id)).to.deep.equal([ended])
      const gone = await pipeHere(['runs', 'show', ended, '--store', url], {cwd: dir})
      expect(gone.stderr).to.include('E_NOT_FOUND').and.include(`${ended} was archived`)
      expect((await cluster.sql(database, 'SELECT count(*)::int AS n FROM pipe_events WHERE run_id = $1', [ended]))[0]!.n).to.equal(0)
      const file = path.join(to, `${ended}.pipe-archive.jsonl`)
      expect((await pipeHere(['audit', 'verify', '--archive', file], {cwd: dir})).code).to.equal(0)
      const audit = await pipeHere(['audit', 'verify', '--store', url], {cwd: dir})
      expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
      // The archives moved to a backup volume: found by name there, and missing where the anchor says.
      const backup = path.join(dir, 'backup')
      execFileSync('mv', [to, backup])
      const missing = await pipeHere(['audit', 'verify', '--store', url], {cwd: dir})
      expect(missing.code).to.equal(4)
      expect(missing.stdout).to.include('the archive is missing')
      const found = await pipeHere(['audit', 'verify', '--store', url, '--archives', backup], {cwd: dir})
      expect(found.code, found.stdout + found.stderr).to.equal(0)
      // Without an anchor the trail's rows stay append-only, even for a superuser.
      let refused: unknown = null
      await cluster.sql(database, 'DELETE FROM pipe_events WHERE run_id = $1', [waiting]).catch((error: unknown) => (refused = error))
      expect(String(refused)).to.include('append-only')
      let kept: unknown = null
      await cluster.sql(database, 'DELETE FROM pipe_runs WHERE run_id = $1', [waiting]).catch((error: unknown) => (kept = error))
      expect(String(kept)).to.include('append-only')
    })
  })
})
