/** The audit walk (audit.ts) over the publish ledger: its entries against the ledger log. */
import type {LedgerEntry} from '../../types/ledger.js'
import {checkChain, parseBody, type Findings, type Loc, type TrailRows} from './audit-walk.js'
import {checkRecord} from './integrity.js'
import {isObject, ledgerLineProblem, type Plain} from './shapes.js'

/** The key a log line names, if it is a line at all. */
function keyOf(line: string): unknown {
  try {
    return (JSON.parse(line) as Plain | null)?.key
  } catch {
    return undefined
  }
}

/**
 * Ledger entries against the ledger log: each entry's seal is the last one the log recorded for its
 * key. `named`: the keys snapshots recorded as delivered, with the snapshot that says so. With
 * `runIds`, only the records that name those runs: the entries of their publications and the keys
 * they delivered, with their log lines.
 */
export async function auditLedger(
  rows: TrailRows,
  out: Findings,
  named: ReadonlyMap<string, string> = new Map(),
  runIds?: ReadonlySet<string>,
): Promise<{head: string | null; seals: Array<[string, string | null]>}> {
  const log = await rows.ledgerLog()
  const entries = (await rows.ledger()).map((e) => ({key: e.key, parsed: parseBody(e.body)}))
  // The keys this check covers: every key, or those of the runs' publications.
  const covered = new Set<string>(named.keys())
  if (runIds)
    for (const {key, parsed} of entries)
      if (parsed.ok && isObject(parsed.value) && typeof parsed.value.run_id === 'string' && runIds.has(parsed.value.run_id)) covered.add(key)
  const covers = (key: unknown): boolean => runIds === undefined || (typeof key === 'string' && covered.has(key))
  // A log line is checked with its key's, and so are its neighbours: a line removed or rewritten before it shows at its link, or is where its link goes.
  const near = new Set<number>()
  if (runIds) for (const {pos, line} of log) if (covers(keyOf(line))) for (const n of [-1, 0, 1]) near.add(pos + n)
  const chain = checkChain(
    log,
    out,
    (pos) => ({kind: 'ledger-log', pos}),
    (pos, line) => (typeof line?.key === 'string' ? line.key : `ledger log line ${pos}`),
    ledgerLineProblem,
    (pos) => runIds === undefined || near.has(pos),
  )
  const logged = new Map<string, string[]>()
  for (const {value} of chain) {
    // A malformed line is reported above and names no key.
    if (ledgerLineProblem(value) !== null || !covers(value.key)) continue
    const key = value.key as string
    logged.set(key, [...(logged.get(key) ?? []), value.entry_seal as string])
  }
  const seals: Array<[string, string | null]> = []
  const present = new Set<string>()
  for (const {key, parsed} of entries) {
    if (!covers(key)) continue
    present.add(key)
    out.report.ledger++
    const loc: Loc = {kind: 'ledger', key}
    const entry = out.object(parsed, key, loc) as Partial<LedgerEntry> | null
    if (!entry) continue
    seals.push([key, typeof entry.seal === 'string' ? entry.seal : null])
    out.schema('ledger', entry, key, loc)
    if (entry.key !== key) out.problem(key, loc, 'key', `names ${String(entry.key)}, not the key it is stored under`)
    if (entry.seal === undefined) {
      out.problem(key, loc, 'seal', 'the ledger entry is not sealed')
      continue
    }
    out.seal(checkRecord(entry, out.key), key, loc, 'seal')
    const history = logged.get(key) ?? []
    if (history.at(-1) === entry.seal) continue
    if (history.length >= 2 && history.at(-2) === entry.seal)
      out.note(key, loc, '(file)', 'a ledger write was interrupted (the log is one write ahead of the entry); the next publish of this key completes it')
    else
      out.problem(
        key,
        loc,
        'seal',
        typeof entry.seal === 'string' && history.includes(entry.seal)
          ? 'is an earlier state of the entry than the ledger log records (rolled back)'
          : 'is not an entry the ledger log recorded (changed, re-sealed or the log was cut short)',
      )
  }
  // A publish step's snapshot names each key it delivered: its entry must exist, whatever the log says.
  const delivery = (key: string): string => `ledger entry is missing (snapshot ${named.get(key)} records a delivery under this key)`
  for (const key of named.keys()) if (!present.has(key) && !logged.has(key)) out.problem(key, {kind: 'ledger', key}, '(file)', delivery(key))
  for (const [key, history] of logged) {
    if (present.has(key)) continue
    const loc: Loc = {kind: 'ledger', key}
    if (history.length >= 2) out.problem(key, loc, '(file)', `ledger entry is missing (the ledger log recorded ${history.length} writes of it)`)
    else if (named.has(key)) out.problem(key, loc, '(file)', delivery(key))
    else out.note(key, loc, '(file)', 'a ledger write was interrupted before the entry was first written')
  }
  return {head: (chain.at(-1)?.value.hash as string | undefined) ?? null, seals}
}
