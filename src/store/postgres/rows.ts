/** Records read back from rows: parsed and checked, so a row changed outside pipe is named, never used. */
import {PipeError} from '../../errors.js'
import type {RunRecord} from '../../types/run.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {wellFormed} from '../trail/checks.js'
import {verifySpec} from '../trail/integrity.js'

/** A record read from a row, parsed and checked against its schema (a row changed outside pipe: E_INTEGRITY naming it). */
export function parseRow<T>(schema: 'snapshot' | 'spec' | 'evidence' | 'run', body: string, what: string, where: string): T {
  let value: unknown
  try {
    value = JSON.parse(body)
  } catch {
    throw new PipeError('E_INTEGRITY', `${what} is not valid JSON (${where})`, {hint: 'It was changed outside pipe; run pipe audit verify to see all damage.'})
  }
  return wellFormed<T>(schema, value, what, where)
}

export function checkedSpec(version: string, body: string): CanonicalSpec {
  let spec: CanonicalSpec
  try {
    spec = JSON.parse(body) as CanonicalSpec
  } catch {
    throw new PipeError('E_INTEGRITY', `spec version ${version} is not valid JSON (pipe_specs)`, {hint: 'It was changed outside pipe; run pipe audit verify.'})
  }
  const problems = verifySpec(spec)
  if (problems.length > 0)
    throw new PipeError(
      'E_INTEGRITY',
      `spec version ${version} does not match its content hash (pipe_specs(${version}): ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')})`,
      {hint: 'The row was changed after it was written; run pipe audit verify to see all damage.'},
    )
  wellFormed('spec', spec, `spec version ${version}`, `pipe_specs(${version})`)
  return spec
}

/** A child run's key in the database: one child per parent run, step, seq and item. */
export const childKey = (link: NonNullable<RunRecord['parent']>): string => `${link.run_id}/${link.step}/${link.seq}/${link.index ?? 0}`
