/** The in-memory store's publish ledger (see ./store.ts): entries by key and the chained log of every write, redacted and sealed as the other stores keep them. */
import {PipeError} from '../../errors.js'
import type {LedgerEntry} from '../../types/ledger.js'
import {ledgerLogLine, lineText, recordText, sealedLedgerEntry} from '../trail/records.js'
import type {LedgerRecords} from '../types.js'

/** Where the ledger keeps its records: the store's maps. */
export interface LedgerMaps {
  readonly root: string
  readonly ledgerEntries: Map<string, string>
  readonly ledgerLog: string[]
}

const KEY = /^F-\d{4}-\d{3,}\+[a-z][a-z0-9_-]*\+S-\d{8}-\d{4,}$/

function assertKey(key: string): void {
  if (!KEY.test(key)) throw new PipeError('E_INVALID_ARGS', `"${key}" is not a ledger key (FEATURE+TARGET+VERSION)`)
}

/** The ledger in memory: entries by key and the chained log of every write, as the other stores keep them. */
export class MemoryLedger implements LedgerRecords {
  readonly storeRoot: string
  private readonly keys = new Map<string, Promise<void>>()

  constructor(private readonly store: LedgerMaps) {
    this.storeRoot = store.root
  }

  async read(key: string): Promise<LedgerEntry | null> {
    assertKey(key)
    const text = this.store.ledgerEntries.get(key)
    return text === undefined ? null : (JSON.parse(text) as LedgerEntry)
  }

  async write(raw: LedgerEntry): Promise<void> {
    const sealed = sealedLedgerEntry(raw)
    const entry = sealed
    assertKey(entry.key)
    const entries = [...this.store.ledgerEntries.keys()].filter((k) => k !== entry.key).length + 1
    const line = ledgerLogLine(sealed, entries, this.store.ledgerLog.at(-1) ?? null)
    this.store.ledgerLog.push(lineText(line))
    this.store.ledgerEntries.set(entry.key, recordText(sealed))
  }

  /** One holder of a key at a time: the next waits for the one before. */
  async withKey<T>(key: string, work: () => Promise<T>): Promise<T> {
    assertKey(key)
    const before = this.keys.get(key) ?? Promise.resolve()
    let done!: () => void
    const mine = new Promise<void>((resolve) => (done = resolve))
    this.keys.set(key, mine)
    await before
    try {
      return await work()
    } finally {
      done()
      if (this.keys.get(key) === mine) this.keys.delete(key)
    }
  }

  async list(filter: {feature?: string; run?: string; target?: string} = {}, limit?: number): Promise<LedgerEntry[]> {
    const out = [...this.store.ledgerEntries.values()]
      .map((text) => JSON.parse(text) as LedgerEntry)
      .filter(
        (e) =>
          (!filter.feature || e.feature_id === filter.feature) && (!filter.run || e.run_id === filter.run) && (!filter.target || e.target === filter.target),
      )
      .sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    return limit === undefined ? out : out.slice(0, limit)
  }
}
