/**
 * The audit walk (audit.ts) over one run's records: the run record against the run index, the
 * timeline against the record's head, the snapshot chain and the spec versions and evidence it
 * binds; and the checks of those records, also of the ones no snapshot names.
 */
import type {AuditKinds, SignedLine} from '../types.js'
import type {RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import {timeBackwards} from './audit-notes.js'
import {checkChain, Findings, parseBody, type ChainLine, type Loc, type TrailRows} from './audit-walk.js'
import {ID_PATTERNS} from './ids.js'
import {creationFindings, fileHash, RunRecordTexts, verifyEvidence, verifySnapshot, verifySpec} from './integrity.js'
import type {CanonicalSpec} from '../../types/spec.js'
import type {Evidence} from '../../types/evidence.js'
import {eventLineProblem, isObject, type Plain} from './shapes.js'
import {decisionSignatureProblem, describeDecision} from '../../util/decision-signature.js'

/** Statuses in which no step can be in flight: the run record was sealed after its last snapshot. */
export const SETTLED = new Set(['succeeded', 'failed', 'blocked', 'cancelled', 'awaiting_input'])

/** The records a run refers to (spec versions, evidence), each checked once, and the seals of the runs. */
export class RecordChecks {
  /** Spec versions and evidence already read, with the sha256 of their text (null: missing or unreadable). */
  private readonly hashes = new Map<string, string | null>()
  private readonly fullyChecked = new Set<string>()
  /** run id -> the run's seal, for the head digest. */
  readonly runSeals = new Map<string, string | null>()

  constructor(
    private readonly rows: TrailRows,
    private readonly out: Findings,
  ) {}

  private async hashOf(id: string): Promise<string | null> {
    if (!this.hashes.has(id)) {
      if (this.rows.recordHash) this.hashes.set(id, await this.rows.recordHash(id))
      else {
        const body = await this.rows.record(id)
        this.hashes.set(id, body === null || (typeof body === 'object' && 'unreadable' in body) ? null : fileHash(body))
      }
    }
    return this.hashes.get(id)!
  }

  /** Checks a spec version or evidence record fully: parse, seals, schema, its id. */
  async check(id: string, referencedBy: string): Promise<Plain | null> {
    if (this.fullyChecked.has(id)) return null
    this.fullyChecked.add(id)
    const spec = ID_PATTERNS.spec.test(id)
    const loc: Loc = {kind: spec ? 'spec' : 'evidence', id}
    const parsed = parseBody(await this.rows.record(id))
    const value = this.out.object(
      parsed.ok ? parsed : {ok: false, message: `${parsed.message}${referencedBy ? ` (referenced by ${referencedBy})` : ''}`},
      id,
      loc,
    )
    if (!value) return null
    this.out.integrity(spec ? verifySpec(value as unknown as CanonicalSpec) : verifyEvidence(value as unknown as Evidence), id, loc)
    const malformed = this.out.schema(spec ? 'spec' : 'evidence', value, id, loc)
    const named = spec ? (isObject(value.meta) ? value.meta.spec_version : undefined) : value.evidence_id
    if (named !== id) this.out.problem(id, loc, spec ? 'meta.spec_version' : 'evidence_id', `names ${String(named)}, not the id it is stored under`)
    // A malformed record is reported; nothing further is read from it.
    return malformed ? null : value
  }

  /**
   * A spec version or evidence record a snapshot names: when its text is byte for byte the one the
   * snapshot bound, it is exactly what pipe wrote (and checked) and needs no further work.
   */
  async bound(id: string, snapshot: Snapshot, record: string, at: Loc): Promise<void> {
    const first = !this.hashes.has(id)
    const actual = await this.hashOf(id)
    if (first && ID_PATTERNS.spec.test(id)) this.out.report.specs++
    else if (first) this.out.report.evidence++
    const expected = snapshot.meta?.binds?.[id]
    if (actual !== null && expected === actual) return
    // Name the field that changed, if the record says which.
    await this.check(id, record)
    if (expected === undefined) this.out.problem(record, at, 'meta.binds', `does not bind ${id}, which the snapshot names`)
    else if (actual !== null)
      this.out.problem(
        id,
        {kind: ID_PATTERNS.spec.test(id) ? 'spec' : 'evidence', id},
        '(file)',
        `is not the file snapshot ${record} bound (changed or re-sealed after the fact)`,
      )
  }

  /** Records no snapshot refers to: left by a step whose commit was never finished. */
  /** `archived`: runs moved out to archives, whose spec versions and evidence stay in the store unreferenced. */
  async unreferenced(archived: ReadonlySet<string> = new Set()): Promise<void> {
    for (const version of await this.rows.specIds()) {
      if (this.hashes.has(version)) continue
      this.hashes.set(version, null)
      this.out.report.specs++
      const spec = await this.check(version, '')
      const meta = isObject(spec?.meta) ? spec.meta : undefined
      if (meta && !archived.has(String(meta.run_id)))
        this.out.note(
          version,
          {kind: 'spec', id: version},
          '(file)',
          `no snapshot refers to it (written by ${String(meta.run_id)} step ${String(meta.created_by_step)}, whose commit did not finish)`,
        )
    }
    for (const id of await this.rows.evidenceIds()) {
      if (this.hashes.has(id)) continue
      this.hashes.set(id, null)
      this.out.report.evidence++
      const evidence = await this.check(id, '')
      const runs = Array.isArray(evidence?.linked_to) ? evidence.linked_to.map((l: unknown) => (isObject(l) ? String(l.run_id) : '')) : []
      if (!runs.some((run) => archived.has(run))) this.out.note(id, {kind: 'evidence', id}, '(file)', 'no snapshot refers to it')
    }
  }
}

type Head = {events: number; event_hash?: string | null; seq: number; snapshot_hash?: string | null}

/** The run record against the run index: its seal, shape, and the facts fixed at its creation. */
async function auditRecord(
  rows: TrailRows,
  out: Findings,
  runId: string,
  indexLine: Plain | undefined,
): Promise<{run: RunRecord & Plain; texts: RunRecordTexts; malformed: boolean} | null> {
  const loc: Loc = {kind: 'run', id: runId}
  const row = await rows.run(runId)
  const run = out.object(parseBody(row?.body ?? null), runId, loc) as (RunRecord & Plain) | null
  if (!run) return null
  const texts = new RunRecordTexts(run)
  const malformed = out.schema('run', run, runId, loc)
  if (run.run_id !== runId) out.problem(runId, loc, 'run_id', `names ${String(run.run_id)}, not the run it is stored as`)
  if (run.seal === undefined) out.problem(runId, loc, 'seal', 'the run record is not sealed')
  else out.seal(texts.checkSeal(out.key), runId, loc, 'seal')
  if (!indexLine) return {run, texts, malformed}
  if (indexLine.created_hash !== texts.creationHash())
    out.problem(runId, loc, '(created)', 'what the run was created with (pipeline, input, feature, policy, times) differs from the run index')
  for (const f of creationFindings(indexLine, texts)) {
    const finding = out.at(runId, loc, f.finding.field, f.finding.message)
    if (f.note) out.report.notes.push(finding)
    else out.add(finding)
  }
  // The workspace a team store's row sends a worker to: the row's columns pick the workers, the run index binds it.
  const bound: Plain = isObject(indexLine.workspace) ? indexLine.workspace : {}
  const ws = row?.workspace
  if (ws && (ws.id !== (bound.id ?? null) || ws.root !== (bound.root ?? null) || ws.sub !== (bound.sub ?? null)))
    out.problem(runId, loc, 'workspace_id', 'the workspace its row sends a worker to is not the one the run index bound')
  return {run, texts, malformed}
}

/** The timeline: its chain, and against the run record's head. Its lines, and whether each was an object of a line's shape. */
async function auditTimeline(
  rows: TrailRows,
  out: Findings,
  runId: string,
  run: RunRecordTexts | null,
  head: Head | undefined,
): Promise<{chain: ChainLine[]; whole: boolean}> {
  const events = await rows.events(runId)
  const at = (n: number): Loc => ({kind: 'events', run: runId, n})
  let malformed = false
  const chain = checkChain(
    events,
    out,
    at,
    () => runId,
    (line) => {
      const problem = eventLineProblem(line)
      if (problem) malformed = true
      return problem
    },
  )
  const timeline = {chain, whole: !malformed && chain.length === events.length}
  out.report.events += chain.length
  const stamped = chain.map((l) => ({record: `${runId} ${String(l.value.event)} (line ${l.pos})`, field: `line ${l.pos}`, at: l.value.at}))
  for (const n of timeBackwards(stamped, '', `the timeline of ${runId}`)) out.report.notes.push({...n, ...rows.locate(at(Number(n.field.slice(5))), n.field)})
  // A person's signed decision must still be what they signed: a line edited and re-sealed keeps its chain, not its signature.
  for (const l of chain) {
    if (l.value.signed === undefined) continue
    const bad = decisionSignatureProblem(l.value.signed)
    const what = `${runId}: ${describeDecision(l.value.signed)} (${String(l.value.event)})`
    if (bad) out.problem(what, at(l.pos), 'signed', `the signed decision ${bad}`)
    else if ((l.value.signed as {run_id?: unknown}).run_id !== runId)
      out.problem(
        what,
        at(l.pos),
        'signed.run_id',
        `was signed for run ${String((l.value.signed as {run_id?: unknown}).run_id)}, not this one (copied from another run)`,
      )
  }
  if (!head || !run) return timeline
  const count = events.at(-1)?.pos ?? 0
  const anchored = chain.find((l) => l.pos === head.events)?.value
  if (count < head.events)
    out.problem(runId, at(count + 1), 'head.events', `the timeline has ${count} line(s), the run record's head names ${head.events} (lines were removed)`)
  else if (head.events > 0 && anchored?.hash !== head.event_hash)
    out.problem(runId, at(head.events), 'head.event_hash', "is not the line the run record's head names (rewritten or re-sealed)")
  else if (anchored && anchored.run_state !== run.stateHash())
    out.problem(
      runId,
      {kind: 'run', id: runId},
      '(state)',
      `the run record is not the state its timeline line ${head.events} recorded (status, owner, answers or decisions changed)`,
    )
  if (count > head.events)
    out.note(
      runId,
      at(head.events + 1),
      'head.events',
      'a change to the run record was interrupted (the timeline is ahead of the record); the next change completes it',
    )
  return timeline
}

/**
 * One run's records. Returns the ledger keys its snapshots record as delivered, with the snapshot
 * that says so; `created` gets when the run record says it was created.
 */
export async function auditRun(
  rows: TrailRows,
  out: Findings,
  checks: RecordChecks,
  runId: string,
  indexLine: Plain | undefined,
  kinds: AuditKinds,
  created?: Map<string, unknown>,
): Promise<Array<[string, string]>> {
  out.report.runs++
  const audited = await auditRecord(rows, out, runId, indexLine)
  const run = audited?.run ?? null
  checks.runSeals.set(runId, run && typeof run.seal === 'string' ? run.seal : null)
  if (run) created?.set(runId, run.created_at)
  // Only a head of the right shape anchors the checks below (a malformed one is reported above).
  const head = isObject(run?.head) && Number.isInteger(run.head.events) && Number.isInteger(run.head.seq) ? (run.head as Head) : undefined
  const timeline = await auditTimeline(rows, out, runId, audited?.texts ?? null, head)
  // What the store's own reads would give (a record of its schema, every line of a line's shape): the
  // signed decisions of a run that does not read are checked once it does.
  if (kinds.signedDecision && run && !audited?.malformed && timeline.whole)
    for (const {pos, value} of timeline.chain)
      if (value.signed)
        kinds.signedDecision({
          run_id: runId,
          line: pos,
          event: value.event as SignedLine['event'],
          signed: value.signed as SignedLine['signed'],
          policy_path: run.policy_path,
        })
  const problemsBefore = out.report.problems.length

  const snapshots: Snapshot[] = []
  let expectedPrev: string | null | undefined = null
  const replayOf: unknown = run?.replay_of
  if (replayOf !== undefined) {
    if (isObject(replayOf) && typeof replayOf.run_id === 'string' && ID_PATTERNS.run.test(replayOf.run_id) && Number.isInteger(replayOf.seq)) {
      const seq = replayOf.seq as number
      const origin = seq > 1 ? parseBody(await rows.snapshot(replayOf.run_id, seq - 1)) : null
      const meta = origin?.ok && isObject(origin.value) && isObject(origin.value.meta) ? origin.value.meta : undefined
      expectedPrev = origin === null ? null : meta ? (meta.record_hash as string | null) : undefined
    } else expectedPrev = undefined
  }
  const rowsOf = await rows.snapshots(runId)
  let expectedSeq = 1
  let headSeen = false
  for (const {seq, body} of rowsOf) {
    const record = `${runId}#${seq}`
    const loc: Loc = {kind: 'snapshot', run: runId, seq}
    for (; expectedSeq < seq; expectedSeq++) {
      out.problem(`${runId}#${expectedSeq}`, {kind: 'snapshot', run: runId, seq: expectedSeq}, '(file)', 'snapshot is missing (a gap in seq)')
      expectedPrev = undefined
    }
    expectedSeq = seq + 1
    out.report.snapshots++
    const s = out.object(parseBody(body), record, loc) as (Snapshot & Plain) | null
    if (!s) {
      expectedPrev = undefined
      continue
    }
    out.integrity(verifySnapshot(s, out.key), record, loc)
    // Even a snapshot whose seal holds is checked: without a key, anyone can seal anything. Only a
    // well-formed snapshot is handed on (to the step kinds, for the keys it delivered).
    if (!out.schema('snapshot', s, record, loc)) snapshots.push(s)
    if (s.run_id !== runId) out.problem(record, loc, 'run_id', `names run ${String(s.run_id)}`)
    if (s.step?.seq !== seq) out.problem(record, loc, 'step.seq', `is ${String(s.step?.seq)}, but the file is seq ${seq}`)
    if (expectedPrev !== undefined && s.meta?.prev_hash !== expectedPrev)
      out.problem(record, loc, 'meta.prev_hash', 'does not match the record hash of the snapshot before it (the chain is broken)')
    expectedPrev = s.meta?.record_hash
    if (head && seq === head.seq) {
      headSeen = true
      if (s.meta?.record_hash !== head.snapshot_hash)
        out.problem(record, loc, 'meta.record_hash', "is not the snapshot the run record's head names (rewritten or re-sealed)")
    }
    if (head && run && seq > head.seq && SETTLED.has(run.status))
      out.problem(record, loc, '(file)', `was written after the run record was sealed, yet the run is ${run.status} (added after the fact)`)
    const links: unknown = s.evidence_links
    const named = [s.spec_version_in, s.spec_version_out].filter((v): v is string => typeof v === 'string' && ID_PATTERNS.spec.test(v))
    for (const link of Array.isArray(links) ? links : [])
      if (isObject(link) && typeof link.evidence_id === 'string' && ID_PATTERNS.evidence.test(link.evidence_id)) named.push(link.evidence_id)
    for (const id of named) await checks.bound(id, s, record, loc)
  }
  if (head && head.seq > 0 && !headSeen) {
    const last = snapshots.at(-1)?.step.seq ?? 0
    out.problem(
      `${runId}#${head.seq}`,
      {kind: 'snapshot', run: runId, seq: head.seq},
      '(file)',
      `the run record's head names snapshot #${head.seq}, but ${last ? `the last is #${last}` : 'there are none'} (snapshots were removed)`,
    )
  }
  rows.afterRun?.(
    runId,
    {
      damaged: out.report.problems.length > problemsBefore,
      status: run && typeof run.status === 'string' ? run.status : null,
      head: head ? {seq: head.seq, events: head.events} : null,
      seqs: new Set(rowsOf.map((r) => r.seq)),
    },
    out,
  )
  return snapshots.flatMap((s) => kinds.deliveredKeys(s).map((key): [string, string] => [key, `${s.run_id}#${s.step.seq}`]))
}
