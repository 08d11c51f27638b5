/**
 * The checks of a whole record against its schema: one given to a store complete (a spec version
 * copied or imported: anything else is a bug) and one read back (anything else was changed outside
 * pipe). A record a store builds from its typed draft is not checked again (records.ts).
 */
import {PipeError} from '../../errors.js'
import {check, describeErrors} from '../../schema/registry.js'
import {isObject, notAnObject} from './shapes.js'

export function assertValid(schema: 'snapshot' | 'spec' | 'evidence' | 'run', record: unknown, what: string): void {
  const result = check(schema, record)
  if (!result.valid)
    throw new PipeError('E_INTERNAL', `refusing to store an invalid ${what}: ${describeErrors(result.errors)}`, {
      hint: 'This is a bug in pipe or in a step kind.',
    })
}

/**
 * A record read back from the store, checked against its schema before anything reads a field of it:
 * one of the wrong shape was changed outside pipe (E_INTEGRITY, naming the file), never a crash
 * further on.
 */
export function wellFormed<T>(schema: 'snapshot' | 'spec' | 'evidence' | 'run', value: unknown, what: string, file: string): T {
  const result = isObject(value) ? check(schema, value) : null
  if (result?.valid) return value as T
  const why = result ? describeErrors(result.errors.slice(0, 3)) : notAnObject(value)
  throw new PipeError('E_INTEGRITY', `${what} is malformed (${file}): ${why}`, {
    hint: 'It was changed outside pipe; run pipe audit verify to see all damage, and restore the file from a backup.',
  })
}
