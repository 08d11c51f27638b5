/**
 * Spans leave the process redacted, at the exporter: whatever text a span carries (its name, its
 * attribute values, its status message, its events) passes `redact` once, where it is sent, so an
 * error message or a step's name composed from a resolved secret never reaches a collector.
 */
import type {ReadableSpan} from '@opentelemetry/sdk-trace-base'
import {redactDeep} from '../util/redact.js'

/**
 * The span as sent: a view of it whose text fields are redacted. The span's other fields and its
 * methods (spanContext()) are read through to the span itself.
 */
function redactedSpan(span: ReadableSpan): ReadableSpan {
  const text = redactDeep({
    name: span.name,
    attributes: {...span.attributes},
    status: {...span.status},
    events: span.events.map((e) => ({...e, attributes: e.attributes && {...e.attributes}})),
  })
  return Object.create(span, {
    name: {value: text.name},
    attributes: {value: text.attributes},
    status: {value: text.status},
    events: {value: text.events},
  }) as ReadableSpan
}

export function redactSpans(spans: ReadableSpan[]): ReadableSpan[] {
  return spans.map(redactedSpan)
}
