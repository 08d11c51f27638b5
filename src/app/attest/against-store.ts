/**
 * `pipe attest verify FILE --store`: the statements a bundle signs must be the ones the store's
 * records give today, and those records must pass the audit. A store altered after the
 * attestation (a record edited and re-sealed, a snapshot removed) then fails one or the other.
 */
import {PipeError} from '../../errors.js'
import {deliveredKeys} from '../../steps/registry.js'
import type {RunStore} from '../../store/types.js'
import {buildStatements, type Statement} from './statement.js'

const hint = (runId: string): string =>
  `The store's records of the run are not what was attested: pipe audit verify ${runId} names what changed; trust neither until that is explained.`

/** Where two JSON values first part, as a path (predicate.steps[3].record_hash). */
function firstDifference(a: unknown, b: unknown, at: string): string | null {
  if (JSON.stringify(a) === JSON.stringify(b)) return null
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return at
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${at}[${i}]`)
      if (d) return d
    }
    return at
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  for (const k of keys) {
    const d = firstDifference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], at ? `${at}.${k}` : k)
    if (d) return d
  }
  return at
}

/** The builder's pipe version is the one that attested; a later pipe rebuilding the statement must not count it as a change. */
function withoutPipeVersion(s: unknown): unknown {
  const copy = structuredClone(s) as {predicate?: {runDetails?: {builder?: {version?: unknown}}}}
  if (copy.predicate?.runDetails?.builder) delete copy.predicate.runDetails.builder.version
  return copy
}

export async function checkAgainstStore(store: RunStore, runId: string, signed: unknown[], pipeVersion: string): Promise<{audited: number}> {
  await store.assertRunExists(runId)
  const audit = await store.audit(runId, {deliveredKeys})
  if (!audit.ok) {
    const first = audit.problems[0]!
    throw new PipeError(
      'E_INTEGRITY',
      `the store's records of ${runId} fail the audit (${audit.problems.length} problem(s)), first: ${first.file} ${first.field} ${first.record}: ${first.message}`,
      {hint: hint(runId)},
    )
  }
  if (audit.unverifiable > 0)
    throw new PipeError('E_INVALID_ARGS', `${audit.unverifiable} seal(s) of ${runId} are keyed and cannot be checked without the audit key`, {
      hint: 'Set PIPE_AUDIT_KEY to the key the store was written with, and verify again.',
    })
  const rebuilt: Statement[] = Object.values(
    await buildStatements(store, runId, pipeVersion).catch((error: unknown) => {
      // A run the store holds as unfinished, or as having made nothing, is not the run that was attested.
      if (error instanceof PipeError && error.code === 'E_STATE')
        throw new PipeError('E_INTEGRITY', `the store does not hold the attested run: ${error.message}`, {hint: hint(runId)})
      throw error
    }),
  )
  for (const statement of signed) {
    const type = (statement as {predicateType?: string}).predicateType
    const mine = rebuilt.find((r) => r.predicateType === type)
    if (!mine) continue
    const where = firstDifference(withoutPipeVersion(statement), withoutPipeVersion(mine), '')
    if (where !== null)
      throw new PipeError('E_INTEGRITY', `the ${type} statement does not match the store's records of ${runId}: they differ at ${where || 'the top'}`, {
        hint: hint(runId),
      })
  }
  return {audited: audit.snapshots}
}
