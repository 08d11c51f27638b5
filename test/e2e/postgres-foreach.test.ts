/**
 * foreach children across pipe worker processes on a real PostgreSQL store, and workspaces: each
 * child is a job of the queue (made once per item whatever dies), the step's concurrency holds over
 * every worker (counted by the children themselves, in a folder they share), fail_fast stops
 * children other workers hold, and a worker serves only the workspaces it was started for. Every
 * wait is for an event (a row, a line, a file), never a sleep.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readdir, readFile, realpath, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {expectAuditPasses, snapshotsIn, statusIn} from '../helpers/stores.js'
import {Workers, until, type Worker} from '../helpers/workers.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'

/** A foreach child's work (written as slot.mjs into each test's folder): it counts the children running at once itself. */
const SLOT = `// A foreach child's work, for the worker tests: it counts the children running at once itself.
//   node slot.mjs DIR ITEM hold      enters (a marker in DIR/running), waits until it has seen the
//                                    count settle, records the most it saw in DIR/seen/ITEM, leaves
//   node slot.mjs DIR ITEM fail-N    waits until N other children are running, then fails (exit 1)
//   node slot.mjs DIR ITEM block     enters and waits until killed (a child fail_fast must cancel)
//   node slot.mjs DIR NAME touch     writes NAME in the current folder (which checkout ran it)
//   node slot.mjs DIR ITEM:MODE item one of the above, named by the item itself
import {mkdirSync, readdirSync, rmSync, watch, writeFileSync} from 'node:fs'
import path from 'node:path'

const [dir, given, named] = process.argv.slice(2)
const [item, mode] = named === 'item' ? given.split(':') : [given, named]
if (mode === 'touch') {
  writeFileSync(path.join(process.cwd(), item), \`\${process.cwd()}\\n\`)
  process.exit(0)
}
const running = path.join(dir, 'running')
mkdirSync(running, {recursive: true})
mkdirSync(path.join(dir, 'seen'), {recursive: true})
const marker = path.join(running, \`\${item}.\${process.pid}\`)
writeFileSync(marker, '')
const count = () => readdirSync(running).length
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
if (mode?.startsWith('fail-')) {
  // Woken by each change of the folder, not by a clock: it fails as soon as the others are in.
  const others = Number(mode.slice(5))
  await new Promise((resolve) => {
    const watcher = watch(running, () => {
      if (count() - 1 >= others) watcher.close(), resolve()
    })
    if (count() - 1 >= others) watcher.close(), resolve()
  })
  rmSync(marker)
  process.exit(1)
}
if (mode === 'block') {
  for (;;) await wait(1000)
}
// hold: look at the others a few times while holding the slot, keeping the most seen.
let most = 0
for (let i = 0; i < 10; i++) {
  most = Math.max(most, count())
  await wait(20)
}
writeFileSync(path.join(dir, 'seen', item), String(most))
rmSync(marker)
`

/**
 * The items of the fan-out test: four times the step's concurrency, so the children come in waves
 * and the bound is held across them, and more than one worker gets to take some. Each item is a
 * child run and a node process, twice (once by the workers, once by the local run the results are
 * compared with): 100 items cost ~3 minutes of a 2-core machine.
 */
const FAN = 16

const POLICY = `version: 1
allowed_commands:
  - [node, "{arg}", "{arg}", "{arg}", "{arg}"]
sandbox: off
max_retries_default: 0
resource_limits: {max_concurrent_commands: 64}
`

/** A parent whose foreach runs item.yaml once per item; `mode` says what item `i`'s command does. */
function fanPipeline(items: number | string[], concurrency: number, extra = ''): string {
  const list = typeof items === 'number' ? Array.from({length: items}, (_, i) => String(i)) : items
  return `version: 1
name: fan
steps:
  - id: each
    kind: foreach
    items: "\${{ [${list.map((i) => `'${i}'`).join(', ')}] }}"
    pipeline: ./item.yaml
    with: {name: "\${{ item }}"}
    concurrency: ${concurrency}${extra}
    on: {success: fin, partial: fin, fail: fin}
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outcome }}: \${{ steps.each.reason }}"}
`
}

function itemPipeline(slot: string, slots: string, mode: string): string {
  return `version: 1
name: item
inputs:
  name: {type: string, required: true}
steps:
  - id: work
    kind: command
    run: [node, ${JSON.stringify(slot)}, ${JSON.stringify(slots)}, "\${{ inputs.name }}", ${mode}]
    next: done
  - {id: done, kind: end, status: succeeded, reason: "did \${{ inputs.name }}"}
`
}

const gitEnv = {GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com'}
const git = (cwd: string, ...args: string[]): string => execFileSync('git', args, {cwd, env: {...process.env, ...gitEnv}, encoding: 'utf8'})

describe('foreach children and workspaces across pipe worker processes on a PostgreSQL store', function () {
  this.timeout(300000)
  let cluster: Cluster
  let dir: string
  let cleanup: () => Promise<void>
  let db: string
  let url: string
  let slots: string
  let slot: string
  const team = new Workers()
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-pg-fan-'))
    dir = await realpath(dir)
    slots = path.join(dir, 'slots')
    slot = path.join(dir, 'slot.mjs')
    await writeFile(slot, SLOT)
    db = await cluster.createDatabase()
    url = cluster.url(db)
  })
  afterEach(async () => {
    await team.stopAll()
    await cleanup()
  })

  const untilFor = until

  function startWorker(args: string[], options: {cwd?: string; env?: Record<string, string>} = {}): Worker {
    return team.start(url, args, {cwd: options.cwd ?? dir, ...(options.env ? {env: options.env} : {})})
  }

  async function workspace(mode: string, items: number, concurrency: number, extra = ''): Promise<void> {
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    await writeFile(path.join(dir, 'item.yaml'), itemPipeline(slot, slots, mode))
    await writeFile(path.join(dir, 'fan.yaml'), fanPipeline(items, concurrency, extra))
  }

  const detach = async (cwd = dir, pipeline = path.join(dir, 'fan.yaml')): Promise<string> => {
    const result = await pipe(['run', pipeline, '--policy', path.join(cwd, 'policy.yaml'), '--text', 'x', '--detach', '--store', url, '--json'], {cwd})
    expect(result.code, result.stderr).to.equal(0)
    return json<{run_id: string}>(result).run_id
  }

  const queueEmpty = async (): Promise<boolean> => (await cluster.sql<{n: number}>(db, 'SELECT count(*)::int AS n FROM pipe_queue'))[0]!.n === 0
  /** The leases a killed worker held, run out now: what the clock does once it stops renewing them, without waiting for the clock. */
  const expireLeasesOf = async (gone: Worker): Promise<void> => {
    await cluster.sql(db, `UPDATE pipe_runs SET lease_until = now() WHERE holder::json->>'pid' = $1`, [String(gone.child.pid)])
  }
  const children = async (parent: string): Promise<Array<{run_id: string; index: number; status: string; holder: string | null}>> =>
    (
      await cluster.sql<{run_id: string; body: string; holder: string | null}>(db, 'SELECT run_id, body, holder FROM pipe_runs WHERE parent_run = $1', [parent])
    ).map((r) => {
      const body = JSON.parse(r.body) as {parent: {index: number}; status: string}
      return {run_id: r.run_id, index: body.parent.index, status: body.status, holder: r.holder}
    })
  const show = async (runId: string): Promise<{status: string; queue?: {queue: string; waits_for: string}}> =>
    json(await pipe(['runs', 'show', runId, '--json', '--store', url], {cwd: dir}))
  /** The foreach step's outputs as a run recorded them, without the children's ids (they differ from store to store). */
  const itemsOf = async (runId: string, store: string): Promise<unknown> => {
    // What `pipe snapshot show RUN --json --store STORE` prints, read in this process.
    const snapshots = await snapshotsIn(dir, runId, store)
    const each = snapshots.find((s) => s.step.name === 'each')!
    const outputs = each.outputs as {items: Array<Record<string, unknown>>} & Record<string, unknown>
    return {...outputs, items: outputs.items.map(({run_id: _id, ...rest}) => rest)}
  }
  const endedBy = (w: Worker, status: string): string[] =>
    [...w.stderr().matchAll(new RegExp(`pipe worker: (R-\\d{8}-\\d{4}) ${status}\\n`, 'g'))].map((m) => m[1]!)

  it(`3 workers × concurrency 4 run a ${FAN}-item foreach: one child per item, each a job ended once, never more than 4 at once, the same results as one process`, async () => {
    await workspace('hold', FAN, 4)
    const parent = await detach()
    const team = [startWorker(['--concurrency', '4']), startWorker(['--concurrency', '4']), startWorker(['--concurrency', '4'])]
    await untilFor('the run and its children have stopped', queueEmpty)
    for (const w of team) w.child.kill('SIGTERM')
    expect(await Promise.all(team.map((w) => w.exited))).to.deep.equal([0, 0, 0])
    expect((await show(parent)).status).to.equal('succeeded')

    const made = await children(parent)
    expect(made.map((c) => c.index).sort((a, b) => a - b)).to.deep.equal(Array.from({length: FAN}, (_, i) => i))
    expect(made.every((c) => c.status === 'succeeded')).to.equal(true)
    // Each child was a job of its own: ended once, by one worker; and more than one worker took children.
    const ended = team.map((w) => endedBy(w, 'succeeded'))
    expect(ended.flat().sort()).to.deep.equal([parent, ...made.map((c) => c.run_id)].sort())
    expect(ended.filter((e) => e.some((id) => id !== parent)).length, 'workers that ran children').to.be.greaterThan(1)
    // What the children saw running at once, themselves.
    const seen = await Promise.all((await readdir(path.join(slots, 'seen'))).map(async (f) => Number(await readFile(path.join(slots, 'seen', f), 'utf8'))))
    expect(seen).to.have.length(FAN)
    expect(Math.max(...seen), 'children running at once').to.be.at.most(4)

    const byWorkers = await itemsOf(parent, url)
    const local = await pipe(
      ['run', path.join(dir, 'fan.yaml'), '--policy', path.join(dir, 'policy.yaml'), '--text', 'x', '--json', '--store', path.join(dir, 'files')],
      {
        cwd: dir,
        timeoutMs: 240000,
      },
    )
    expect(local.code, local.stderr).to.equal(0)
    expect(byWorkers).to.deep.equal(await itemsOf(json<{run_id: string}>(local).run_id, path.join(dir, 'files')))
  })

  it('a worker killed (SIGKILL) while it holds children: they finish on another worker, still one child per item', async () => {
    await workspace('hold', 8, 4)
    const parent = await detach()
    const first = startWorker(['--concurrency', '2'])
    await untilFor(
      'the first worker holds the parent',
      async () =>
        (await cluster.sql<{holder: string | null}>(db, 'SELECT holder FROM pipe_runs WHERE run_id = $1', [parent]))[0]!.holder?.includes(
          `"pid":${first.child.pid}`,
        ) === true,
    )
    // Stopped at its first child's step (a synchronous pause until `go`, never written): it is killed
    // inside that child however slow the machine, not after the child's short step has ended.
    const pause = path.join(dir, 'gate-doomed')
    await mkdir(pause)
    const doomed = startWorker(['--concurrency', '4'], {env: {PIPE_FAULT_PAUSE_AT: 'before-step:work', PIPE_FAULT_PAUSE_DIR: pause}})
    // Running, not only claimed: a child killed between its claim and its start was never begun, and is taken over with no interruption to record.
    await untilFor('the second worker runs a child', async () =>
      (await children(parent)).some((c) => c.holder?.includes(`"pid":${doomed.child.pid}`) === true && c.status === 'running'),
    )
    doomed.child.kill('SIGKILL')
    await doomed.exited
    await expireLeasesOf(doomed)
    await untilFor('the run and its children have stopped', queueEmpty)
    first.child.kill('SIGTERM')
    expect(await first.exited).to.equal(0)
    expect((await show(parent)).status, `${JSON.stringify(await children(parent))}\n${first.stderr()}`).to.equal('succeeded')
    const made = await children(parent)
    expect(made.map((c) => c.index).sort((a, b) => a - b)).to.deep.equal(Array.from({length: 8}, (_, i) => i))
    expect(made.every((c) => c.status === 'succeeded')).to.equal(true)
    // Each run ended once; what the killed worker held was found left by a process that is gone and finished by the other.
    const eventsOf = async (runId: string): Promise<string[]> =>
      (await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [runId])).map(
        (e) => (JSON.parse(e.line) as {event: string}).event,
      )
    const taken: string[] = []
    for (const id of [parent, ...made.map((c) => c.run_id)]) {
      const events = await eventsOf(id)
      expect(
        events.filter((e) => e === 'succeeded'),
        id,
      ).to.deep.equal(['succeeded'])
      if (id !== parent && events.includes('interrupted')) taken.push(id)
    }
    expect(taken.length, 'children the killed worker held, finished by the other').to.be.at.least(1)
    for (const id of taken) expect(endedBy(first, 'succeeded')).to.include(id)
    // One snapshot per step of each child: the killed one's step ran again, recorded once.
    for (const c of made) {
      const seqs = await cluster.sql<{seq: number}>(db, 'SELECT seq FROM pipe_snapshots WHERE run_id = $1 ORDER BY seq', [c.run_id])
      expect(
        seqs.map((s) => s.seq),
        c.run_id,
      ).to.deep.equal([1, 2])
    }
    // `pipe audit verify --store URL` exits 0 (its code, in this process: what it prints is audit.test.ts's).
    await expectAuditPasses(dir, undefined, url)
  })

  it('the worker driving the parent killed (SIGKILL) mid-foreach: another takes the parent over and finds its children, one per item', async () => {
    await workspace('hold', 8, 2)
    const parent = await detach()
    const doomed = startWorker(['--concurrency', '1'])
    await untilFor('the parent has children that ended and children to come', async () => {
      const made = await children(parent)
      return made.filter((c) => c.status === 'succeeded').length >= 3 && made.length < 8
    })
    doomed.child.kill('SIGKILL')
    await doomed.exited
    await expireLeasesOf(doomed)
    const heir = startWorker(['--concurrency', '4'])
    await untilFor('the run and its children have stopped', queueEmpty)
    heir.child.kill('SIGTERM')
    expect(await heir.exited).to.equal(0)
    expect(endedBy(heir, 'succeeded')).to.include(parent)
    const made = await children(parent)
    expect(made.map((c) => c.index).sort((a, b) => a - b)).to.deep.equal(Array.from({length: 8}, (_, i) => i))
    expect(made.every((c) => c.status === 'succeeded')).to.equal(true)
    // The heir drove children that were left, each a job of its own; none ended twice.
    const byHeir = endedBy(heir, 'succeeded').filter((id) => id !== parent)
    expect(byHeir.length, 'children the heir ended').to.be.at.least(1)
    expect(made.map((c) => c.run_id)).to.include.members(byHeir)
    expect(endedBy(doomed, 'succeeded').filter((id) => byHeir.includes(id))).to.deep.equal([])
    for (const c of made) {
      const events = await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [c.run_id])
      expect(events.filter((e) => (JSON.parse(e.line) as {event: string}).event === 'succeeded').length, c.run_id).to.equal(1)
    }
    const outputs = (await itemsOf(parent, url)) as {succeeded: number; total: number}
    expect([outputs.succeeded, outputs.total]).to.deep.equal([8, 8])
  })

  it('fail_fast cancels the children other workers hold: they stop at their next heartbeat and end cancelled', async () => {
    // Item 0 fails once the 3 others run; they would block for ever.
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    await writeFile(path.join(dir, 'fan.yaml'), fanPipeline(['0:fail-3', '1:block', '2:block', '3:block', '4:block', '5:block'], 4, '\n    fail_fast: true'))
    await writeFile(path.join(dir, 'item.yaml'), itemPipeline(slot, slots, 'item'))
    const parent = await detach()
    const home = startWorker(['--concurrency', '1'])
    await untilFor(
      'a worker holds the parent',
      async () =>
        (await cluster.sql<{holder: string | null}>(db, 'SELECT holder FROM pipe_runs WHERE run_id = $1', [parent]))[0]!.holder?.includes(
          `"pid":${home.child.pid}`,
        ) === true,
    )
    const others = [startWorker(['--concurrency', '4']), startWorker(['--concurrency', '4'])]
    await untilFor('the run and its children have stopped', queueEmpty)
    expect(endedBy(home, 'succeeded')).to.include(parent)
    const made = await children(parent)
    const byIndex = new Map(made.map((c) => [c.index, c]))
    expect(byIndex.get(0)?.status).to.equal('failed')
    const cancelled = made.filter((c) => c.status === 'cancelled')
    expect(cancelled.length, 'children cancelled').to.be.at.least(3)
    // Cancelled where they ran: on the workers that did not hold the parent (the one that did has one slot).
    const elsewhere = others.flatMap((w) => endedBy(w, 'cancelled'))
    expect(elsewhere.length, 'children cancelled by other workers').to.be.at.least(2)
    for (const id of elsewhere) {
      const events = await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [id])
      const names = events.map((e) => (JSON.parse(e.line) as {event: string}).event)
      expect(names.at(-1), id).to.equal('cancelled')
      expect(events.at(-1)!.line, id).to.match(/fail_fast/)
    }
    const outputs = (await itemsOf(parent, url)) as {items: Array<{index: number; status: string; reason: string}>}
    for (const c of cancelled) expect(outputs.items[c.index]!.status).to.equal('cancelled')
    expect(outputs.items.filter((i) => i.status === 'succeeded')).to.deep.equal([])
  })

  it('refuses a run whose workspace no live worker serves: it waits, and runs show says for what', async () => {
    await workspace('hold', 1, 1)
    const parent = await detach()
    const elsewhere = path.join(dir, 'elsewhere')
    await mkdir(elsewhere)
    const stranger = startWorker([], {cwd: elsewhere})
    await untilFor('the worker noted the run it cannot serve', async () => stranger.stderr().includes(`${parent} waits:`))
    const shown = await show(parent)
    expect(shown.status).to.equal('pending')
    expect(shown.queue?.queue).to.equal('default')
    expect(shown.queue?.waits_for).to.equal(
      `no live worker on queue default serves workspace ${dir} (path:${dir}); live workers there serve ${elsewhere} (path:${elsewhere}) on ${(await import('node:os')).hostname()}. Start one where that repository is checked out: pipe worker --workspace DIR --queue default`,
    )
    const text = await pipe(['runs', 'show', parent, '--store', url], {cwd: dir})
    expect(text.stdout).to.include(`queue: default, waits for no live worker on queue default serves workspace ${dir}`)
    // A worker started for it serves it.
    const right = startWorker(['--workspace', dir], {cwd: elsewhere})
    await untilFor('the run has stopped', queueEmpty)
    expect(endedBy(right, 'succeeded')).to.include(parent)
    expect(endedBy(stranger, 'succeeded')).to.deep.equal([])
  })

  it('pipe run --detach warns when no live worker of its queue serves its workspace (none at all, or only others); the run still waits queued', async () => {
    await workspace('hold', 1, 1)
    const detachWarning = async (): Promise<{warning?: string; stderr: string}> => {
      const result = await pipe(
        ['run', path.join(dir, 'fan.yaml'), '--policy', path.join(dir, 'policy.yaml'), '--text', 'x', '--detach', '--store', url, '--json'],
        {
          cwd: dir,
        },
      )
      expect(result.code, result.stderr).to.equal(0)
      return {...json<{warning?: string}>(result), stderr: result.stderr}
    }
    const registered = async (n: number): Promise<boolean> =>
      (await cluster.sql<{n: number}>(db, 'SELECT count(*)::int AS n FROM pipe_workers WHERE alive_until > now()'))[0]!.n >= n
    const none = await detachWarning()
    expect(none.warning).to.equal(
      'no live worker takes runs from queue default now: the run waits until one does; start one where this repository is checked out: pipe worker --queue default (in the checkout, or with --workspace DIR)',
    )
    expect(none.stderr).to.include(`warning: ${none.warning}`)
    const elsewhere = path.join(dir, 'elsewhere')
    await mkdir(elsewhere)
    startWorker([], {cwd: elsewhere})
    await untilFor('the stranger is registered', () => registered(1))
    const others = await detachWarning()
    expect(others.warning?.startsWith(`no live worker of queue default serves workspace path:${dir} (they serve ${elsewhere} (path:`), others.warning).to.equal(
      true,
    )
    startWorker(['--workspace', dir], {cwd: elsewhere})
    await untilFor('the right worker is registered', () => registered(2))
    const served = await detachWarning()
    expect(served.warning).to.equal(undefined)
    expect(served.stderr).not.to.include('warning:')
    await untilFor('every run has stopped', queueEmpty)
  })

  it('a worker with --workspace serves only that repository, in its own checkout of it, wherever that is', async () => {
    // Two repositories, and a second checkout (a clone) of the first elsewhere.
    const repoA = path.join(dir, 'a')
    const repoB = path.join(dir, 'b')
    const cloneA = path.join(dir, 'machine2', 'a-checkout')
    for (const [repo, name] of [
      [repoA, 'a'],
      [repoB, 'b'],
    ] as const) {
      await mkdir(repo, {recursive: true})
      git(repo, 'init', '-q')
      await writeFile(path.join(repo, 'policy.yaml'), POLICY)
      await writeFile(
        path.join(repo, 'touch.yaml'),
        `version: 1\nname: touch\nsteps:\n  - id: work\n    kind: command\n    run: [node, ${JSON.stringify(slot)}, x, made-${name}, touch]\n    next: done\n  - {id: done, kind: end, status: succeeded, reason: done}\n`,
      )
      git(repo, 'add', '.')
      git(repo, 'commit', '-qm', `repository ${name}`)
    }
    await mkdir(path.dirname(cloneA), {recursive: true})
    git(dir, 'clone', '-q', repoA, cloneA)
    const runA = await detach(repoA, path.join(repoA, 'touch.yaml'))
    const runB = await detach(repoB, path.join(repoB, 'touch.yaml'))
    const worker = startWorker(['--workspace', cloneA], {cwd: dir})
    // Polled in this process (the status runs show gives): a process per check was most of this test's CPU.
    await untilFor('run A has stopped', async () => (await statusIn(url, runA)) === 'succeeded')
    await untilFor('run B is noted as waiting', async () => worker.stderr().includes(`${runB} waits:`))
    // A ran in the worker's checkout, not in the folder it was queued from; B was left alone.
    expect(await readFile(path.join(cloneA, 'made-a'), 'utf8')).to.equal(`${cloneA}\n`)
    expect(await readdir(repoA)).to.not.include('made-a')
    const shownB = await show(runB)
    expect(shownB.status).to.equal('pending')
    expect(shownB.queue?.waits_for).to.match(new RegExp(`^no live worker on queue default serves workspace ${repoB} \\(git:[0-9a-f]{40}\\)`))
    expect(endedBy(worker, 'succeeded')).to.deep.equal([runA])
    worker.child.kill('SIGTERM')
    expect(await worker.exited).to.equal(0)
  })
})
