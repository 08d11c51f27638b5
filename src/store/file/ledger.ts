/**
 * The publish ledger: one lowdb file per idempotency key (feature_id + target + spec_version), so a
 * publish writes only its own entry and two processes publishing different keys never contend.
 * Publishing one key is serialised by a lock file beside its entry.
 *
 * Each entry is sealed, and each write first appends the entry's seal to the store's ledger log
 * (audit/ledger.jsonl, chained), so audit verify can tell a deleted, rolled back or re-sealed entry
 * from the one pipe wrote. A crash between the log line and the entry leaves the log one write
 * ahead, which audit verify reports as an interrupted write, not as tampering.
 */
import {readdir, stat} from '../../util/fs-async.js'
import path from 'node:path'
import {Low} from 'lowdb'
import {PipeError} from '../../errors.js'
import {check, describeErrors} from '../../schema/registry.js'
import type {LedgerEntry} from '../../types/ledger.js'
import {AtomicJsonFile} from './json-file-adapter.js'
import {acquireLock} from '../../util/lock.js'
import {redactDeep} from '../../util/redact.js'
import {ledgerLogFields, sealedLedgerEntry} from '../trail/records.js'
import {isObject, notAnObject} from '../trail/shapes.js'
import type {LedgerRecords} from '../types.js'
import {appendChained, linesFromEnd} from './trail.js'
import {makeDirs} from '../../util/fs.js'

/** Log lines read past a list's limit: entries whose order in the log and in time differ (see listFromTail). */
const PAST_LIMIT = 32

const KEY = /^F-\d{4}-\d{3,}\+[a-z][a-z0-9_-]*\+S-\d{8}-\d{4,}$/

function malformed(key: string, file: string, why: string): PipeError {
  return new PipeError('E_INTEGRITY', `the ledger entry ${key} is malformed (${file}): ${why}`, {
    hint: 'It was changed outside pipe; run pipe audit verify to see all damage, and restore the file from a backup.',
  })
}

export function ledgerKey(featureId: string, target: string, specVersion: string): string {
  return `${featureId}+${target}+${specVersion}`
}

async function nextLine(lines: AsyncGenerator<string>): Promise<string | undefined> {
  const next = await lines.next()
  return next.done ? undefined : next.value
}

export class FileLedger implements LedgerRecords {
  readonly dir: string
  /** The store the ledger belongs to: publications are named per store. */
  readonly storeRoot: string
  readonly logFile: string

  constructor(store: {root: string; auditDir: string}) {
    this.storeRoot = store.root
    this.dir = path.join(store.root, 'ledger')
    this.logFile = path.join(store.auditDir, 'ledger.jsonl')
  }

  private file(key: string): string {
    if (!KEY.test(key)) throw new PipeError('E_INVALID_ARGS', `"${key}" is not a ledger key (FEATURE+TARGET+VERSION)`)
    return path.join(this.dir, `${key}.json`)
  }

  private db(key: string): Low<LedgerEntry | null> {
    return new Low<LedgerEntry | null>(new AtomicJsonFile<LedgerEntry | null>(this.file(key)), null)
  }

  /**
   * The entry of `key`, or null when it has none. One that is not JSON or not a ledger entry was
   * changed outside pipe: E_INTEGRITY naming the file, never a publication treated as unsent.
   */
  async read(key: string): Promise<LedgerEntry | null> {
    const file = this.file(key)
    const db = this.db(key)
    try {
      await db.read()
    } catch (error) {
      if (error instanceof SyntaxError) throw malformed(key, file, 'is not valid JSON')
      throw error
    }
    if (
      db.data === null &&
      !(await stat(file).then(
        () => true,
        () => false,
      ))
    )
      return null
    const result = isObject(db.data) ? check('ledger', db.data) : null
    if (!result?.valid) throw malformed(key, file, result ? describeErrors(result.errors.slice(0, 3)) : notAnObject(db.data))
    if (db.data!.key !== key) throw malformed(key, file, `names ${db.data!.key}`)
    return db.data
  }

  async write(raw: LedgerEntry): Promise<void> {
    const sealed = sealedLedgerEntry(raw)
    const entry = sealed
    makeDirs(this.dir)
    makeDirs(path.dirname(this.logFile))
    const release = await acquireLock(`${this.logFile}.lock`, {
      waitMs: 60000,
      busy: (holder) => `the ledger log is held by another pipe process (pid ${holder.pid})`,
      hint: 'Try again in a moment.',
    })
    try {
      // `entries`: how many entry files there are once this write lands, as pipe counts them. A list
      // that finds as many files knows the log names them all and reads only the log's tail.
      const isNew = !(await stat(this.file(entry.key)).then(
        () => true,
        () => false,
      ))
      await appendChained(this.logFile, async (last) =>
        ledgerLogFields(
          sealed,
          (typeof last?.['entries'] === 'number' ? last['entries'] : last === null ? 0 : (await this.entryFiles()).length) + (isNew ? 1 : 0),
        ),
      )
    } finally {
      await release()
    }
    const db = this.db(entry.key)
    db.data = sealed
    await db.write()
  }

  /** Holds the key while `work` runs: one publisher per key at a time, across processes. */
  async withKey<T>(key: string, work: () => Promise<T>, waitMs = 60000): Promise<T> {
    makeDirs(this.dir)
    const release = await acquireLock(`${this.file(key)}.lock`, {
      waitMs,
      busy: (holder) => `publication ${key} is being sent by another pipe process (pid ${holder.pid})`,
      hint: 'Try again when it has finished; pipe ledger list shows the outcome.',
    })
    try {
      return await work()
    } finally {
      await release()
    }
  }

  /** Entries for people to read: redacted again, which also covers entries written before a pattern existed. */
  async list(filter: {feature?: string; run?: string; target?: string} = {}, limit?: number): Promise<LedgerEntry[]> {
    const names = await this.entryFiles()
    const keep = (entry: LedgerEntry | null): entry is LedgerEntry =>
      entry !== null &&
      (!filter.feature || entry.feature_id === filter.feature) &&
      (!filter.run || entry.run_id === filter.run) &&
      (!filter.target || entry.target === filter.target)
    // With a limit, the ledger log names the most recently written keys (its last lines), so only
    // those lines and entries are read, when the log's count of entry files matches the folder. An
    // entry the log does not name (a store older than the log, a file put there by hand) makes the
    // counts differ and sends it back to reading every entry; so do a key the log names without an
    // entry, a log that ends before naming every file, and a log that cannot be read.
    const fromTail = limit === undefined ? null : await this.listFromTail(names.length, keep, limit).catch(() => null)
    const out: LedgerEntry[] = fromTail ?? []
    if (fromTail === null) {
      for (const name of names.sort()) {
        // A file not named by a key is no entry (audit verify reports it).
        if (!KEY.test(name.slice(0, -5))) continue
        // A damaged entry is named (E_INTEGRITY), never left out of the list unsaid.
        const entry = await this.read(name.slice(0, -5))
        if (keep(entry)) out.push(redactDeep(entry))
      }
    }
    // Ties by key, so that the tail and the folder give the same order.
    const sorted = out.sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    return limit === undefined ? sorted : sorted.slice(0, limit)
  }

  /**
   * The entries `list` keeps, newest written first, from the ledger log's tail; null when the log
   * cannot answer for every entry file (see list). Lines past the limit are read a little further
   * (PAST_LIMIT), since two publishes can stamp their times in one order and take the log in the other.
   */
  private async listFromTail(files: number, keep: (entry: LedgerEntry | null) => entry is LedgerEntry, limit: number): Promise<LedgerEntry[] | null> {
    const tail = linesFromEnd(this.logFile)
    try {
      const first = await tail.next()
      if (first.done) return null
      let count: unknown
      try {
        count = (JSON.parse(first.value) as {entries?: unknown}).entries
      } catch {
        // A damaged last line: audit verify reports it; this reads every entry.
      }
      if (count !== files) return null
      const out: LedgerEntry[] = []
      const seen = new Set<string>()
      let past = 0
      for (let line: string | undefined = first.value; line !== undefined; line = await nextLine(tail)) {
        if (out.length >= limit && ++past > PAST_LIMIT) return out
        const key = /^\{"key":"([^"]+)"/.exec(line)?.[1]
        if (!key) return null
        if (seen.has(key)) continue
        seen.add(key)
        const entry = await this.read(key).catch(() => null)
        // A key the log names with no readable entry: the log and the folder disagree.
        if (entry === null) return null
        if (keep(entry)) out.push(redactDeep(entry))
      }
      // The whole log was read: it must have named every file.
      return seen.size === files ? out : null
    } finally {
      await tail.return(undefined)
    }
  }

  /** The entry files in the folder (their count is where a log without counts, an older pipe's, starts from). */
  private async entryFiles(): Promise<string[]> {
    return (await readdir(this.dir).catch(() => [] as string[])).filter((n) => n.endsWith('.json'))
  }
}

/** The ledger: the file store's (a value, `new Ledger(store)`), and the interface any store's keeps (a type). */
export const Ledger = FileLedger
export type Ledger = LedgerRecords

/**
 * A person's word on a publication pipe holds (uncertain, or sent with an unknown outcome and
 * waiting for its resend): send it again (`pending`), or take it as delivered after they checked
 * the channel. Any other entry, or none, is left as it is. (pipe publish --resend / --mark-delivered)
 */
export async function releaseHeld(ledger: Ledger, key: string, how: {delivered: boolean; by: string}): Promise<void> {
  await ledger.withKey(key, async () => {
    const entry = await ledger.read(key)
    if (!entry || (entry.status !== 'uncertain' && !(entry.status !== 'delivered' && entry.attempts.at(-1)?.state === 'unknown'))) return
    const at = new Date().toISOString()
    if (how.delivered) {
      entry.status = 'delivered'
      entry.external_id ??= key
      entry.delivered_at = at
      entry.attempts.push({
        n: entry.attempts.length + 1,
        started_at: at,
        finished_at: at,
        state: 'delivered',
        by: how.by,
        error: 'marked delivered by hand after checking the channel',
      })
    } else entry.status = 'pending'
    entry.updated_at = at
    await ledger.write(entry)
  })
}
