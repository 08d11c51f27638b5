/** pipe audit verify of the store-wide logs beside the runs: the publish ledger and the reply cache. */
import path from 'node:path'
import type {LedgerEntry} from '../../types/ledger.js'
import {listDir, parseBytes, parseFile, readBytes, schemaFindings, type Parsed} from './audit-read.js'
import type {Auditor} from './auditor.js'
import {checkRecord} from '../trail/integrity.js'
import {ReplyCache, replyFileProblem, textRefs} from '../replies.js'
import {isObject, ledgerLineProblem, notAnObject} from '../trail/shapes.js'
import {readChain} from './trail.js'

/**
 * The reply cache: each file's format, name and seal (a file that fails would be refused when a
 * run reuses it). Not part of the trail: a removed reply is only asked again.
 */
export function auditReplies(a: Auditor): void {
  const dir = path.join(a.store.root, 'replies')
  const cache = new ReplyCache(a.store.root)
  for (const name of listDir(dir)) {
    if (a.tidyTemp(dir, name)) continue
    if (!/^[0-9a-f]{64}\.json$/.test(name)) continue
    const file = path.join(dir, name)
    const parsed = parseBytes<Record<string, unknown>>(readBytes(file))
    const problem = parsed.ok ? replyFileProblem(parsed.value, `sha256:${name.slice(0, 64)}`) : parsed.message
    if (problem) a.problem({record: `reply ${name.slice(0, 12)}`, file, field: '(file)', message: problem})
    else if (parsed.ok) {
      for (const ref of textRefs(parsed.value['request'])) {
        const text = cache.textProblem(ref)
        if (text) a.problem({record: `reply ${name.slice(0, 12)}`, file, field: 'request.messages', message: `refers to a message text that ${text}`})
      }
    }
  }
  // A shared text no reply refers to any more is harmless; one whose bytes changed is damage wherever it is.
  const texts = path.join(dir, 'texts')
  for (const name of listDir(texts)) {
    if (a.tidyTemp(texts, name) || !/^[0-9a-f]{64}\.txt$/.test(name)) continue
    const text = cache.textProblem(`sha256:${name.slice(0, 64)}`)
    if (text) a.problem({record: `reply text ${name.slice(0, 12)}`, file: path.join(texts, name), field: '(file)', message: `a message text that ${text}`})
  }
}

/**
 * Ledger entries against the ledger log: each entry's seal is the last one the log recorded for its
 * key. With `runIds`, only the records that name those runs: the entries of its publications and the
 * keys its snapshots delivered (`named`), with their log lines.
 */
export function auditLedger(
  a: Auditor,
  named: ReadonlyMap<string, string> = new Map(),
  runIds?: ReadonlySet<string>,
): {head: string | null; seals: Array<[string, string | null]>} {
  const dir = path.join(a.store.root, 'ledger')
  const logFile = path.join(a.store.auditDir, 'ledger.jsonl')
  const text = readBytes(logFile)
  const chain = readChain(typeof text === 'string' ? '' : text.toString('utf8'), a.key, ledgerLineProblem)
  const entries: Array<{key: string; file: string; parsed: Parsed<unknown>}> = []
  for (const name of listDir(dir).sort()) {
    if (a.tidyTemp(dir, name) || !name.endsWith('.json')) continue
    const file = path.join(dir, name)
    entries.push({key: name.slice(0, -5), file, parsed: parseFile<unknown>(file)})
  }
  // The keys this check covers: every key, or those of the run's publications.
  const covered = new Set<string>(named.keys())
  if (runIds)
    for (const {key, parsed} of entries)
      if (parsed.ok && isObject(parsed.value) && typeof parsed.value.run_id === 'string' && runIds.has(parsed.value.run_id)) covered.add(key)
  const covers = (key: unknown): boolean => runIds === undefined || (typeof key === 'string' && covered.has(key))
  // A log line is checked with its key's, and so are its neighbours: a line removed or rewritten before it shows at its link, or is where its link goes.
  const lineNumbers = new Set<number>()
  chain.lines.forEach((line, i) => {
    if (covers(line.key)) for (const n of [-1, 0, 1]) lineNumbers.add(chain.at[i]! + n)
  })
  for (const p of chain.problems) {
    if (runIds !== undefined && !lineNumbers.has(p.line)) continue
    if (p.check) a.seal(p.check, 'ledger log', logFile, `line ${p.line}`)
    else a.problem({record: 'ledger log', file: logFile, field: `line ${p.line}`, message: p.message})
  }
  if (chain.torn)
    a.report.notes.push({
      record: 'ledger log',
      file: logFile,
      field: `line ${chain.lines.length + 1}`,
      message: 'torn last line (a crash while appending); earlier lines are intact',
    })
  const logged = new Map<string, string[]>()
  for (const line of chain.lines) {
    // A malformed line is reported above and names no key.
    if (ledgerLineProblem(line) !== null || !covers(line.key)) continue
    const key = line.key as string
    logged.set(key, [...(logged.get(key) ?? []), line.entry_seal as string])
  }
  const seals: Array<[string, string | null]> = []
  const present = new Set<string>()
  for (const {key, file, parsed} of entries) {
    if (!covers(key)) continue
    present.add(key)
    a.report.ledger++
    if (!parsed.ok || !isObject(parsed.value)) {
      a.problem({
        record: key,
        file,
        field: parsed.ok ? '(record)' : '(file)',
        message: !parsed.ok ? parsed.message : parsed.value === null ? 'empty ledger entry' : notAnObject(parsed.value),
      })
      continue
    }
    const entry = parsed.value as Partial<LedgerEntry>
    seals.push([key, typeof entry.seal === 'string' ? entry.seal : null])
    for (const f of schemaFindings('ledger', entry, key, file)) a.problem(f)
    if (entry.key !== key) a.problem({record: key, file, field: 'key', message: `names ${String(entry.key)}, not the file's key`})
    if (entry.seal === undefined) {
      a.problem({record: key, file, field: 'seal', message: 'the ledger entry is not sealed'})
      continue
    }
    a.seal(checkRecord(entry, a.key), key, file, 'seal')
    const history = logged.get(key) ?? []
    if (history.at(-1) === entry.seal) continue
    if (history.length >= 2 && history.at(-2) === entry.seal) {
      a.report.notes.push({
        record: key,
        file,
        field: '(file)',
        message: 'a ledger write was interrupted (the log is one write ahead of the entry); the next publish of this key completes it',
      })
    } else {
      a.problem({
        record: key,
        file,
        field: 'seal',
        message:
          typeof entry.seal === 'string' && history.includes(entry.seal)
            ? 'is an earlier state of the entry than the ledger log records (rolled back)'
            : 'is not an entry the ledger log recorded (changed, re-sealed or the log was cut short)',
      })
    }
  }
  // A publish step's snapshot names each key it delivered: its entry must exist, whatever the log says.
  const delivery = (key: string): string => `ledger entry is missing (snapshot ${named.get(key)} records a delivery under this key)`
  for (const key of named.keys()) {
    if (present.has(key) || logged.has(key)) continue
    a.problem({record: key, file: path.join(dir, `${key}.json`), field: '(file)', message: delivery(key)})
  }
  for (const [key, history] of logged) {
    if (present.has(key)) continue
    const file = path.join(dir, `${key}.json`)
    if (history.length >= 2)
      a.problem({record: key, file, field: '(file)', message: `ledger entry is missing (the ledger log recorded ${history.length} writes of it)`})
    else if (named.has(key)) a.problem({record: key, file, field: '(file)', message: delivery(key)})
    else a.report.notes.push({record: key, file, field: '(file)', message: 'a ledger write was interrupted before the entry was first written'})
  }
  return {head: chain.lines.at(-1)?.hash ?? null, seals}
}
