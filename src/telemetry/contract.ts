/**
 * What the tracing seam (tracing.ts) and the exporter behind it (otlp.ts) share: the shapes of
 * sessions and spans, where spans go, and the one way tracing speaks up. No OpenTelemetry here.
 */
import {appendLog} from '../log.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import {visible} from '../util/terminal-text.js'

/** What a run's record keeps of its trace: a later session's spans join this trace under this span. */
export type TraceContext = NonNullable<RunRecord['trace']>

/** How a session of a run ended, for its span: the engine's outcome, or what it threw. */
export type SessionEnd = {status: string; reason?: string | undefined; error?: {code: string; message: string} | undefined} | {thrown: unknown}

/** One session of a run: the run created and driven, or resumed, redriven or claimed by a worker. */
export interface RunSession {
  /** The context to keep in the run's record when it has none (undefined while tracing is off). */
  readonly context: TraceContext | undefined
  /** The run's id, once the store has given it one (a new run's session starts before). */
  identify(runId: string): void
  /** Ends the session's span (and any span of it still open); a top-level run's spans are then sent, within a bounded time. */
  close(end: SessionEnd): Promise<void>
}

/** A model request in flight. */
export interface ModelCallSpan {
  end(reply: {model?: string; usage?: {prompt_tokens: number; completion_tokens: number}; finish_reason?: string; source?: string; key?: string}): void
  fail(error: unknown): void
}

/** Whom a model request goes to: the endpoint's host[:port] (null: recorded replies only), and the pipeline's provider.name. */
export interface ModelEndpoint {
  host: string | null
  provider?: string | undefined
}

/** A time a run spent waiting, for Tracing.interval. */
export interface Interval {
  name: string
  start: Date
  end: Date
  attributes: Record<string, string | number | boolean>
}

/** A tool call as the agent's timeline line reports it (tool_call_result). */
export interface ToolCallEnded {
  call_id?: string
  tool?: string
  level?: string
  decision?: string
  ok?: boolean
  duration_ms?: number
}

export interface Tracing {
  readonly enabled: boolean
  /**
   * `continues`: the run's record's trace; `parent`: the step of another run that started this one (a
   * child run). The event `enqueued` is pipe run --detach putting the run on `queue`: its span is
   * the enqueue, not a drive of the run, and the run keeps its context as the trace's root.
   */
  session(run: {
    run_id?: string
    pipeline: string
    event: string
    queue?: string
    continues?: TraceContext
    parent?: {run_id: string; step: string}
  }): RunSession
  /** A time the run spent not driven (queued, waiting for a person), already over: a span from `start` to `end` under `under`. */
  interval(under: TraceContext, span: Interval): void
  /** An attempt of a step starts; the span stays open until the step's snapshot is recorded (stepEnded) or the attempt is retried (attemptFailed). */
  attemptStarted(runId: string, step: {id: string; kind: string}, seq: number, attempt: number): void
  /** The attempt failed and the step is tried again: its span ends with the error. */
  attemptFailed(runId: string, stepId: string, error: {code: string; message: string}): void
  /** The step's last attempt ended: its snapshot (or, for a step that paused the run, how it paused). */
  stepEnded(runId: string, stepId: string, ending: {snapshot: Snapshot} | {awaiting: string}): void
  /** A tool call of an agent step ended (the timeline's tool_call_result). */
  toolCall(runId: string, stepId: string, call: ToolCallEnded): void
  /** A model request starts, for the step (and run) that asks. */
  modelCall(call: {run?: string; step: string}, request: {model: string; temperature?: number; max_tokens?: number}, endpoint: ModelEndpoint): ModelCallSpan
}

/** Where spans go, read from the standard OpenTelemetry variables; null when traces are off. */
export interface ExportSettings {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  url: string
  /** How the spans are encoded (OTEL_EXPORTER_OTLP_PROTOCOL): OTLP's protobuf or its JSON. */
  protocol: 'http/protobuf' | 'http/json'
  /** How long the spans of a run may take to be sent when it ends, and one export request at most. */
  timeoutMs: number
  serviceName: string
  /** OTEL_RESOURCE_ATTRIBUTES, parsed. */
  resource: Record<string, string>
}

/** Warns once on stderr and in the daily log; traces never fail or stop a run. */
export function warnTracing(message: string): void {
  process.stderr.write(`Warning: ${visible(message)}\n`)
  appendLog('WARN', message)
}
