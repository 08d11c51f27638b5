/**
 * What the trail vouches for before a run's next step is executed (issue 35): a worker claims runs
 * from a database that every team member's role can write, so nothing of a run's row is trusted
 * that the sealed, chained, append-only records do not bind:
 *
 * - the run record's seal, keyed when PIPE_AUDIT_KEY is set (a plain seal where a key is in use is
 *   a forger's without the key, and a keyed one is refused by a process that cannot check it);
 * - the timeline: each line sealed and linked to the one before, the record's head naming its last
 *   line, and that line binding the record's state (a row changed after its last line was written);
 * - the facts fixed at creation, field by field, against the run index line (typed inputs, input,
 *   workspace, pipeline and its hash, policy, parent and item), and the workspace a worker is sent to;
 * - every person's decision the run carries (a confirmation, a standing confirmation, a review, a
 *   skipped task, a rollback to a checkpoint): each
 *   must be the line of the person who gave it, so a decision is a sealed record, not a field.
 *
 * Pure: the store reads the parts, this names what does not hold.
 */
import {changedCreationFacts, checkLine, checkRecord, runCreationHash, runStateHash, sealMessage} from './integrity.js'
import type {RunEvent, RunRecord} from '../../types/run.js'

type Plain = Record<string, unknown>

export interface VouchFinding {
  field: string
  message: string
  /** A keyed seal this process cannot check (no PIPE_AUDIT_KEY): not a forgery found, but nothing vouched for either. */
  noKey?: true
}

export interface VouchParts {
  record: RunRecord
  /** The timeline in order. */
  events: Array<RunEvent & {prev?: string | null; hash?: string}>
  /** The run's line of the run index, or null when it has none. */
  indexLine: Plain | null
  /** The workspace the row sends a worker to (its claim columns), when the store has them. */
  workspace?: {id: string; root: string; sub: string} | null
  key: string | undefined
}

export function vouchFindings({record, events, indexLine, workspace, key}: VouchParts): VouchFinding[] {
  const out: VouchFinding[] = []
  const plain = record as unknown as Plain
  const seal = checkRecord(plain, key)
  if (seal !== 'ok') out.push({field: 'seal', message: `the run record: ${sealMessage(seal)}`, ...(seal === 'no-key' ? {noKey: true as const} : {})})
  let prev: string | null = null
  for (const [i, line] of events.entries()) {
    const check = checkLine(line, key)
    if (check !== 'ok') out.push({field: `timeline line ${i + 1}`, message: sealMessage(check)})
    else if ((line.prev ?? null) !== prev) out.push({field: `timeline line ${i + 1}`, message: 'does not link to the line before it'})
    prev = line.hash ?? null
  }
  const last = events.at(-1)
  if (record.head?.events !== events.length || (record.head?.event_hash ?? null) !== (last?.hash ?? null))
    out.push({field: 'head', message: `names ${record.head?.events ?? 0} timeline lines, the timeline holds ${events.length}`})
  else if (last && last.run_state !== runStateHash(plain))
    out.push({field: 'body', message: 'is not the state its last timeline line bound (the row was changed after pipe wrote it)'})
  if (!indexLine) out.push({field: 'run index', message: 'has no line for the run'})
  else {
    const check = checkLine(indexLine, key)
    if (check !== 'ok') out.push({field: 'run index', message: sealMessage(check)})
    const bound = indexLine.created_facts
    const changed = bound && typeof bound === 'object' ? changedCreationFacts(bound as Plain, plain) : []
    for (const field of changed) out.push({field, message: 'changed since the run was created (the run index bound it)'})
    if (changed.length === 0 && indexLine.created_hash !== runCreationHash(plain))
      out.push({field: '(created)', message: 'what the run was created with differs from the run index'})
    const sent = (indexLine.workspace ?? null) as VouchParts['workspace']
    if (workspace !== undefined && JSON.stringify(workspace) !== JSON.stringify(sent && {id: sent.id, root: sent.root, sub: sent.sub}))
      out.push({field: 'workspace_id', message: `the row sends it to workspace ${workspace?.id ?? 'none'}, the run index bound ${sent?.id ?? 'none'}`})
  }
  out.push(...decisionFindings(record, events))
  return out
}

/** Each decision the record carries must be the sealed line of the person who gave it (see the top of this file). */
function decisionFindings(record: RunRecord, events: readonly RunEvent[]): VouchFinding[] {
  const out: VouchFinding[] = []
  const given = (kind: string, d: {at: string; by: string; step?: string}): boolean =>
    events.some((e) => e.event === kind && e.at === d.at && e.by === d.by && (d.step === undefined || e.step === d.step))
  if (record.confirmation && !given('confirm_given', record.confirmation))
    out.push({field: 'confirmation', message: `no timeline line records ${record.confirmation.by} giving it`})
  for (const [i, s] of (record.standing_confirmations ?? []).entries())
    if (!given('confirm_given', {at: s.at, by: s.by, ...(s.scope === 'step' && s.step !== undefined ? {step: s.step} : {})}))
      out.push({field: `standing_confirmations[${i}]`, message: `no timeline line records ${s.by} giving it`})
  const review = record.review
  // A review given with the run's creation (pipe run --decision) is on its creation line.
  if (review && !given('review_given', review) && !events.some((e) => e.event === 'created' && e.at === review.at))
    out.push({field: 'review', message: `no timeline line records ${review.by} giving it`})
  for (const [i, s] of (record.skips ?? []).entries())
    if (!given('task_skipped', s)) out.push({field: `skips[${i}]`, message: `no timeline line records ${s.by} skipping task ${JSON.stringify(s.key)}`})
  for (const [i, g] of (record.budget_grants ?? []).entries())
    if (!given('budget_granted', {at: g.at, by: g.by})) out.push({field: `budget_grants[${i}]`, message: `no timeline line records ${g.by} granting it`})
  for (const [i, r] of (record.rollbacks ?? []).entries())
    if (!given('rolled_back', {at: r.at, by: r.by})) out.push({field: `rollbacks[${i}]`, message: `no timeline line records ${r.by} rolling it back`})
  return out
}
