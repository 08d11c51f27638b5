/**
 * Trace ids (seed 000's trace_id): one per occurrence of an error, made where the error is first
 * recorded or rendered, so that the id on stderr finds the same error in the daily log, the failing
 * step's snapshot and the run's events. Random on purpose: it names an occurrence, not a content,
 * and so never enters anything that must be reproducible (model requests, cassette keys; goldens
 * mask it).
 */
import {randomBytes} from 'node:crypto'

export const TRACE_ID = /\btr-[0-9a-f]{16}\b/g

export function newTraceId(): string {
  return `tr-${randomBytes(8).toString('hex')}`
}
