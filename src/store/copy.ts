/**
 * pipe store copy SRC DST: every record of one store into another, a folder (the file store) or a
 * database (the PostgreSQL store), either way. Records are moved as the text they are kept as (a
 * file's bytes, a row's body), never rebuilt: every seal, chain link and bind stays as it was, so
 * `pipe audit verify` checks the copy exactly as it checked the original, and a keyed store stays
 * keyed (no key is needed to copy). The destination must hold no records; a database is written in
 * one transaction, so a failed copy leaves it empty.
 */
import {readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {FileLayout, within} from './file/files.js'
import {compareIds, ID_PATTERNS} from './file/ids.js'
import {isStoreUrl, safeUrl} from './location.js'
import type {PostgresStore} from './postgres/store.js'
import {Store} from './file/store.js'
import {advanceSequence} from './postgres/ids.js'
import {anchorKey} from './postgres/archive.js'
import {lines, list, text} from './file/as-kept.js'
import {makeDirs} from '../util/fs.js'

export interface StoreDump {
  features: Array<{id: string; body: string}>
  specs: Array<{id: string; body: string}>
  evidence: Array<{id: string; body: string}>
  /** The run index's lines, in order. */
  runIndex: string[]
  runs: Array<{
    run_id: string
    body: string
    events: string[]
    snapshots: Array<{seq: number; body: string}>
    states: Array<{step: string; seq: number; body: string}>
  }>
  ledger: Array<{key: string; body: string}>
  ledgerLog: string[]
}

export interface CopyReport {
  from: string
  to: string
  runs: number
  snapshots: number
  specs: number
  evidence: number
  features: number
  ledger: number
}

const LEDGER_KEY = /^F-\d{4}-\d{3,}\+[a-z][a-z0-9_-]*\+S-\d{8}-\d{4,}$/

function readRecords(dir: string, pattern: RegExp): Array<{id: string; body: string}> {
  return list(dir)
    .filter((n) => n.endsWith('.json') && pattern.test(n.slice(0, -5)))
    .map((n) => n.slice(0, -5))
    .sort(compareIds)
    .map((id) => ({id, body: readFileSync(path.join(dir, `${id}.json`), 'utf8')}))
}

export function readFileDump(layout: FileLayout): StoreDump {
  const runs = list(layout.runsDir)
    .filter((n) => ID_PATTERNS.run.test(n))
    .sort(compareIds)
    .flatMap((runId) => {
      const body = text(within(layout.runDir(runId), 'run.json'))
      if (body === null) return []
      const snapshotsDir = within(layout.runDir(runId), 'snapshots')
      const stateDir = within(layout.runDir(runId), 'state')
      return [
        {
          run_id: runId,
          body,
          events: lines(text(within(layout.runDir(runId), 'events.jsonl'))),
          snapshots: list(snapshotsDir)
            .filter((n) => /^\d{6,}\.json$/.test(n))
            .sort()
            .map((n) => ({seq: Number(n.slice(0, -5)), body: readFileSync(path.join(snapshotsDir, n), 'utf8')})),
          states: list(stateDir)
            .map((n) => /^(\d{6,})-([a-z][a-z0-9_]*)\.json$/.exec(n))
            .filter((m): m is RegExpExecArray => m !== null)
            .map((m) => ({step: m[2]!, seq: Number(m[1]), body: readFileSync(path.join(stateDir, m[0]), 'utf8')})),
        },
      ]
    })
  return {
    features: readRecords(layout.featuresDir, ID_PATTERNS.feature),
    specs: readRecords(layout.specsDir, ID_PATTERNS.spec),
    evidence: readRecords(layout.evidenceDir, ID_PATTERNS.evidence),
    runIndex: lines(text(layout.runIndexFile)),
    runs,
    ledger: list(path.join(layout.root, 'ledger'))
      .filter((n) => n.endsWith('.json') && LEDGER_KEY.test(n.slice(0, -5)))
      .sort()
      .map((n) => ({key: n.slice(0, -5), body: readFileSync(path.join(layout.root, 'ledger', n), 'utf8')})),
    ledgerLog: lines(text(path.join(layout.auditDir, 'ledger.jsonl'))),
  }
}

/** The highest number taken in each id series, as the file store's hints and the database's counters name them. */
function counters(dump: StoreDump): Map<string, number> {
  const out = new Map<string, number>()
  const note = (id: string): void => {
    const cut = id.lastIndexOf('-')
    const series = id.startsWith('E-') ? 'E' : id.slice(0, cut)
    out.set(series, Math.max(out.get(series) ?? 0, Number(id.slice(cut + 1))))
  }
  for (const r of dump.runs) note(r.run_id)
  for (const s of dump.specs) note(s.id)
  for (const e of dump.evidence) note(e.id)
  for (const f of dump.features) note(f.id)
  return out
}

export function writeFileDump(layout: FileLayout, dump: StoreDump): void {
  const write = (file: string, body: string): void => {
    makeDirs(path.dirname(file))
    writeFileSync(file, body, {flag: 'wx'})
  }
  for (const f of dump.features) write(layout.featureFile(f.id), f.body)
  for (const s of dump.specs) write(layout.specFile(s.id), s.body)
  for (const e of dump.evidence) write(layout.evidenceFile(e.id), e.body)
  for (const run of dump.runs) {
    const dir = layout.runDir(run.run_id)
    makeDirs(within(dir, 'snapshots'))
    write(within(dir, 'events.jsonl'), run.events.map((l) => `${l}\n`).join(''))
    for (const s of run.snapshots) write(layout.snapshotFile(run.run_id, s.seq), s.body)
    for (const s of run.states) write(layout.stepStateFile(run.run_id, s.step, s.seq), s.body)
    write(within(dir, 'run.json'), run.body)
  }
  for (const l of dump.ledger) write(path.join(layout.root, 'ledger', `${l.key}.json`), l.body)
  if (dump.ledgerLog.length > 0) write(path.join(layout.auditDir, 'ledger.jsonl'), dump.ledgerLog.map((l) => `${l}\n`).join(''))
  if (dump.runIndex.length > 0) write(layout.runIndexFile, dump.runIndex.map((l) => `${l}\n`).join(''))
  for (const [series, n] of counters(dump)) writeFileSync(path.join(layout.idsDir, series), String(n))
}

export async function readPostgresDump(store: PostgresStore): Promise<StoreDump> {
  const q = <R extends Record<string, unknown>>(sql: string): Promise<R[]> => store.query<R>('cannot read the store to copy', sql)
  const byId = <T extends {id: string}>(rows: T[]): T[] => rows.sort((a, b) => compareIds(a.id, b.id))
  const events = await q<{run_id: string; line: string}>('SELECT run_id, line FROM pipe_events ORDER BY run_id, n')
  const snapshots = await q<{run_id: string; seq: number; body: string}>('SELECT run_id, seq, body FROM pipe_snapshots ORDER BY run_id, seq')
  const states = await q<{run_id: string; step: string; seq: number; body: string}>(
    'SELECT run_id, step, seq, body FROM pipe_step_state ORDER BY run_id, seq, step',
  )
  const group = <T extends {run_id: string}>(rows: T[]): Map<string, T[]> => {
    const map = new Map<string, T[]>()
    for (const row of rows) map.set(row.run_id, [...(map.get(row.run_id) ?? []), row])
    return map
  }
  const eventsOf = group(events)
  const snapshotsOf = group(snapshots)
  const statesOf = group(states)
  const runs = (await q<{run_id: string; body: string}>('SELECT run_id, body FROM pipe_runs')).sort((a, b) => compareIds(a.run_id, b.run_id))
  return {
    features: byId(await q<{id: string; body: string}>('SELECT id, body FROM pipe_features')),
    specs: byId(await q<{id: string; body: string}>('SELECT version AS id, body FROM pipe_specs')),
    evidence: byId(await q<{id: string; body: string}>('SELECT id, body FROM pipe_evidence')),
    runIndex: (await q<{line: string}>('SELECT line FROM pipe_run_index ORDER BY pos')).map((r) => r.line),
    runs: runs.map((r) => ({
      run_id: r.run_id,
      body: r.body,
      events: (eventsOf.get(r.run_id) ?? []).map((e) => e.line),
      snapshots: (snapshotsOf.get(r.run_id) ?? []).map((s) => ({seq: s.seq, body: s.body})),
      states: (statesOf.get(r.run_id) ?? []).map((s) => ({step: s.step, seq: s.seq, body: s.body})),
    })),
    ledger: await q<{key: string; body: string}>('SELECT key, body FROM pipe_ledger ORDER BY key'),
    ledgerLog: (await q<{line: string}>('SELECT line FROM pipe_ledger_log ORDER BY pos')).map((r) => r.line),
  }
}

export async function writePostgresDump(store: PostgresStore, dump: StoreDump): Promise<void> {
  await store.tx(`cannot copy into ${safeUrl(store.url)}`, async (client) => {
    // Two copies at once would both find the database empty; one at a time, the second finds the first's records.
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended('pipe-store-copy', 0))")
    const {rows} = await client.query<{n: string}>(
      'SELECT (SELECT count(*) FROM pipe_runs) + (SELECT count(*) FROM pipe_specs) + (SELECT count(*) FROM pipe_evidence) + (SELECT count(*) FROM pipe_ledger) AS n',
    )
    if (Number(rows[0]!.n) > 0)
      throw new PipeError('E_CONFLICT', `the destination ${safeUrl(store.url)} already holds records`, {
        hint: 'Copy into an empty database (or an empty folder): a copy never merges two trails.',
      })
    for (const f of dump.features) await client.query('INSERT INTO pipe_features (id, body) VALUES ($1, $2)', [f.id, f.body])
    for (const s of dump.specs) await client.query('INSERT INTO pipe_specs (version, body) VALUES ($1, $2)', [s.id, s.body])
    for (const e of dump.evidence) await client.query('INSERT INTO pipe_evidence (id, body) VALUES ($1, $2)', [e.id, e.body])
    for (const run of dump.runs) {
      let parent: string | null = null
      try {
        parent = (JSON.parse(run.body) as {parent?: {run_id?: string}}).parent?.run_id ?? null
      } catch {
        // A damaged record is copied as it is: audit verify names it on both sides.
      }
      await client.query('INSERT INTO pipe_runs (run_id, body, parent_run) VALUES ($1, $2, $3)', [run.run_id, run.body, parent])
      for (const [i, line] of run.events.entries())
        await client.query('INSERT INTO pipe_events (run_id, n, line) VALUES ($1, $2, $3)', [run.run_id, i + 1, line])
      for (const s of run.snapshots) {
        let step = ''
        try {
          step = (JSON.parse(s.body) as {step?: {name?: string}}).step?.name ?? ''
        } catch {
          // As above.
        }
        // A copied step has no commit to compare a redrive with: a second commit of it is refused.
        await client.query('INSERT INTO pipe_snapshots (run_id, seq, step, commit_hash, body) VALUES ($1, $2, $3, $4, $5)', [
          run.run_id,
          s.seq,
          step,
          'copied',
          s.body,
        ])
      }
      for (const s of run.states)
        await client.query('INSERT INTO pipe_step_state (run_id, step, seq, body) VALUES ($1, $2, $3, $4)', [run.run_id, s.step, s.seq, s.body])
    }
    for (const [i, line] of dump.runIndex.entries()) {
      let runId = `line-${i + 1}`
      try {
        const named = JSON.parse(line) as {run_id?: unknown; archived?: unknown}
        if (typeof named.run_id === 'string') runId = named.run_id
        // An archive anchor has a row of its own beside its run's (postgres/archive.ts).
        else if (typeof named.archived === 'string') runId = anchorKey(named.archived)
      } catch {
        // As above.
      }
      await client.query('INSERT INTO pipe_run_index (pos, run_id, line) VALUES ($1, $2, $3)', [i + 1, runId, line])
    }
    for (const l of dump.ledger) await client.query('INSERT INTO pipe_ledger (key, body) VALUES ($1, $2)', [l.key, l.body])
    for (const [i, line] of dump.ledgerLog.entries()) {
      let key = ''
      try {
        const named = (JSON.parse(line) as {key?: unknown}).key
        if (typeof named === 'string') key = named
      } catch {
        // As above.
      }
      await client.query('INSERT INTO pipe_ledger_log (pos, key, line) VALUES ($1, $2, $3)', [i + 1, key, line])
    }
    const series = [...counters(dump), ['run-index', dump.runIndex.length] as const, ['ledger-log', dump.ledgerLog.length] as const]
    for (const [name, n] of series) {
      await client.query('INSERT INTO pipe_counters (series, n) VALUES ($1, $2) ON CONFLICT (series) DO UPDATE SET n = GREATEST(pipe_counters.n, EXCLUDED.n)', [
        name,
        n,
      ])
      // Run, spec and evidence ids are taken from sequences (postgres/ids.ts): they go on after the copied ones.
      await advanceSequence(client, name, n)
    }
  })
}

/** Copies the store at `from` into the (empty) store at `to`; both are a folder or a postgres:// URL. */
export async function copyStore(from: string, to: string): Promise<CopyReport> {
  let dump: StoreDump
  const opened: PostgresStore[] = []
  const database = async (url: string): Promise<PostgresStore> => {
    const {PostgresStore} = await import('./postgres/store.js')
    const store = await PostgresStore.connect(url)
    opened.push(store)
    return store
  }
  try {
    if (isStoreUrl(from)) dump = await readPostgresDump(await database(from))
    else dump = readFileDump(await Store.existing(from))
    if (isStoreUrl(to)) await writePostgresDump(await database(to), dump)
    else {
      const layout = new FileLayout(to)
      if (list(layout.runsDir).length > 0 || list(layout.specsDir).length > 0 || list(layout.evidenceDir).length > 0) {
        throw new PipeError('E_CONFLICT', `the destination ${layout.root} already holds records`, {
          hint: 'Copy into an empty folder (or an empty database): a copy never merges two trails.',
        })
      }
      writeFileDump(await Store.open(to), dump)
    }
  } finally {
    for (const store of opened) await store.close().catch(() => undefined)
  }
  return {
    from: isStoreUrl(from) ? safeUrl(from) : path.resolve(from),
    to: isStoreUrl(to) ? safeUrl(to) : path.resolve(to),
    runs: dump.runs.length,
    snapshots: dump.runs.reduce((n, r) => n + r.snapshots.length, 0),
    specs: dump.specs.length,
    evidence: dump.evidence.length,
    features: dump.features.length,
    ledger: dump.ledger.length,
  }
}
