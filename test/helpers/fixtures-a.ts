/**
 * Fixtures that spare a test a `pipe` process where the process itself proves nothing: a store made
 * once and copied per test, and a run continued in this process through the same app-layer session
 * the command calls (`pipe resume`, `pipe review`, `pipe cancel` are thin over these), with the exit
 * code the command would give. What only a process shows (a real SIGKILL, what is printed, flag
 * parsing) stays a process in the tests.
 */
import {cp, mkdir} from 'node:fs/promises'
import path from 'node:path'
import {cancelSession} from '../../src/app/sessions/cancel.js'
import {resumeSession} from '../../src/app/sessions/resume.js'
import {reviewSession} from '../../src/app/sessions/review.js'
import type {RunOutcome} from '../../src/engine/engine.js'
import {toPipeError} from '../../src/errors.js'
import {ExitCode} from '../../src/exit-codes.js'
import {exitCodeForStatus} from '../../src/cli/run-result.js'
import {openStore} from '../../src/store/open.js'
import {effectiveStatus} from '../../src/store/queries.js'
import type {RunStore} from '../../src/store/types.js'

export interface InProcess {
  /** The exit code the command gives for this outcome or error. */
  code: number
  outcome?: RunOutcome
  error?: {code: string; message: string}
}

/** What the run-driving commands do with a session's outcome: its status's exit code, or the error's. */
async function settle(session: Promise<RunOutcome>, exitCode: (outcome: RunOutcome) => number): Promise<InProcess> {
  try {
    const outcome = await session
    return {code: exitCode(outcome), outcome}
  } catch (raw) {
    const error = toPipeError(raw)
    return {code: error.exitCode, error: {code: error.code, message: error.message}}
  }
}

const byStatus = (outcome: RunOutcome): number => exitCodeForStatus(outcome.status, outcome.error?.code)

/** The options the command passes (decisions are recorded as the user running the tests, as a `pipe` process would). */
const session = (cwd: string): {cwd: string; store: string} => ({cwd, store: path.join(cwd, '.pipe')})

/** `pipe resume RUN` in this process (the folder store under cwd). */
export function resumeHere(cwd: string, runId: string): Promise<InProcess> {
  return settle(resumeSession({...session(cwd), runId}), byStatus)
}

/** `pipe review RUN --decision D` in this process. */
export function reviewHere(cwd: string, runId: string, decision: 'go' | 'hold' | 'drop'): Promise<InProcess> {
  return settle(reviewSession({...session(cwd), runId, decision}), byStatus)
}

/** `pipe cancel RUN --reason R` in this process: it exits 5 (CANCELLED) once the run is cancelled, as the command does. */
export function cancelHere(cwd: string, runId: string, reason: string): Promise<InProcess> {
  return settle(cancelSession({...session(cwd), runId, reason}), (outcome) => (outcome.status === 'cancelled' ? ExitCode.CANCELLED : byStatus(outcome)))
}

/**
 * A working directory made once (e.g. a finished or a paused run in its store) and copied for each
 * test that starts from it: each test gets its own store, and the run that made it costs one process
 * per file instead of one per test. Ids, dates and paths inside the store stay as they were made.
 */
export class Template {
  private made: Promise<string> | undefined
  constructor(
    /** Where templates are made (read on first use: a folder a mocha `before` makes). */
    private readonly root: () => string,
    private readonly name: string,
    private readonly make: (cwd: string) => Promise<void>,
  ) {}

  /** A fresh copy of the template at `cwd` (made on first use). */
  async copyTo(cwd: string): Promise<void> {
    this.made ??= (async () => {
      const at = path.join(this.root(), this.name)
      await mkdir(at, {recursive: true})
      await this.make(at)
      return at
    })()
    await cp(await this.made, cwd, {recursive: true})
  }
}

/**
 * The status `pipe runs show RUN --json` gives (a running run whose holder is gone is interrupted),
 * read in this process through the same store code: a wait polls it, and a process per check was
 * most of the CPU of the tests that waited on it.
 */
export function statusIn(location: string, runId: string): Promise<string> {
  return readIn(location, async (store) => effectiveStatus(store, await store.readRun(runId)))
}

/** Reads a store (a folder or a PostgreSQL URL) in this process, as the reading commands open it, and closes it. */
export async function readIn<T>(location: string, read: (store: RunStore) => Promise<T>): Promise<T> {
  const store = await openStore(location, 'existing')
  try {
    return await read(store)
  } finally {
    await store.close?.()
  }
}
