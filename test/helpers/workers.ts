/**
 * `pipe worker` processes for the PostgreSQL tests: started from the built CLI on a store, their
 * stderr kept for the test to read, killed whole after each test. Waits are for a condition (each
 * check a query or a read), never a fixed sleep.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {bin, ownEnv, tempDir, testHome} from './cli.js'
import {startCluster, type Cluster} from './postgres.js'

export interface Worker {
  child: ChildProcess
  stderr: () => string
  exited: Promise<number | null>
}

/** The environment of a worker or a command in these tests: a fast poll, no PIPE_STORE of the caller's. */
export function workerEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {...(ownEnv.held ?? process.env), NO_COLOR: '1', PIPE_HOME: testHome, PIPE_WORKER_POLL_MS: '50', ...extra}
  delete out.PIPE_STORE
  return out
}

/** The workers of one test: `start` adds one, `stopAll` kills them (a frozen one woken first) and waits for their exits. */
export class Workers {
  private readonly started: Worker[] = []

  start(store: string, args: readonly string[], options: {cwd: string; env?: Record<string, string>}): Worker {
    const child = spawn(process.execPath, [bin, 'worker', '--store', store, ...args], {
      cwd: options.cwd,
      env: workerEnv(options.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.stdout.resume()
    const worker = {child, stderr: () => stderr, exited: new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))}
    this.started.push(worker)
    return worker
  }

  async stopAll(): Promise<void> {
    for (const w of this.started.splice(0)) {
      w.child.kill('SIGCONT')
      w.child.kill('SIGKILL')
      await w.exited
    }
  }
}

/**
 * Waits until `check` holds; a check that throws (the database restarting) counts as not yet. The
 * test's own timeout says when it failed: the deadline here is only a backstop for a wait left
 * polling after its test has ended, longer than any test's timeout (a shorter one decided tests
 * on a loaded machine before their own timeout could). The checks come 25 ms apart at first, then
 * further apart, up to 100 ms: a check costs the machine the workers it waits for are using (one
 * that opens the store is a PostgreSQL connection, ~50 ms of the server's CPU), and a wait of
 * seconds checked every 50 ms spent much of it on checking.
 */
export async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 600000
  let last: unknown
  for (let pause = 25; ; pause = Math.min(100, pause * 1.5)) {
    try {
      if (await check()) return
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}${last ? ` (last check failed: ${(last as Error).message})` : ''}`)
    await new Promise((r) => setTimeout(r, pause))
  }
}

/**
 * Waits until a worker has said `text` on stderr. A worker says a run's end after recording it and
 * taking it off the queue, so a test that saw either in the store waits for the line too, rather
 * than reading stderr at once (that raced the line on its way through the pipe).
 */
export async function saidBy(worker: Worker, text: string): Promise<void> {
  await until(`the worker says ${JSON.stringify(text)}`, async () => worker.stderr().includes(text)).catch((error: Error) => {
    throw new Error(`${error.message}; it said: ${worker.stderr()}`)
  })
}

/** What each test of a worker suite gets: the cluster, a temp folder and a database of its own. */
export interface WorkerSuite {
  cluster: Cluster
  dir: string
  db: string
  url: string
}

/**
 * The hooks every pipe worker suite has: one cluster for the suite, a temp folder and a fresh
 * database before each test (handed to `set`), and its workers and folder gone after it.
 */
export function useWorkerSuite(prefix: string, set: (suite: WorkerSuite) => void, options: {durable?: boolean; own?: boolean} = {}): Workers {
  const team = new Workers()
  let cluster: Cluster | undefined
  let cleanup: (() => Promise<void>) | undefined
  before(async function () {
    cluster = await startCluster(this, options)
  })
  after(async () => cluster?.stop())
  beforeEach(async () => {
    const made = await tempDir(prefix)
    cleanup = made.cleanup
    const db = await cluster!.createDatabase()
    set({cluster: cluster!, dir: made.dir, db, url: cluster!.url(db)})
  })
  afterEach(async () => {
    await team.stopAll()
    await cleanup?.()
  })
  return team
}
