/**
 * OpenTelemetry traces of runs, as the engine, the model transport and the agent's tool calls see
 * them: a span per session of a run, per step attempt, per model call and per tool call. This module
 * is the seam, with no OpenTelemetry in it: while no collector is configured every call is a no-op
 * and no OpenTelemetry module is loaded (a run pays for a few empty calls per step). With
 * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, the first run this process
 * drives loads the exporter (otlp.ts, which imports the SDK) and every later call reports to it.
 *
 * The spans are found by what the callers already know: a run by its id, a step attempt by its run
 * and step (a run runs one step at a time), so no context travels through the steps and kinds.
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
  /** `continues`: the run's record's trace; `parent`: the step of another run that started this one (a child run). */
  session(run: {run_id?: string; pipeline: string; event: string; continues?: TraceContext; parent?: {run_id: string; step: string}}): RunSession
  /** An attempt of a step starts; the span stays open until the step's snapshot is recorded (stepEnded) or the attempt is retried (attemptFailed). */
  attemptStarted(runId: string, step: {id: string; kind: string}, seq: number, attempt: number): void
  /** The attempt failed and the step is tried again: its span ends with the error. */
  attemptFailed(runId: string, stepId: string, error: {code: string; message: string}): void
  /** The step's last attempt ended: its snapshot (or, for a step that paused the run, how it paused). */
  stepEnded(runId: string, stepId: string, ending: {snapshot: Snapshot} | {awaiting: string}): void
  /** A tool call of an agent step ended (the timeline's tool_call_result). */
  toolCall(runId: string, stepId: string, call: ToolCallEnded): void
  /** A model request starts, for the step (and run) that asks. */
  modelCall(call: {run?: string; step: string}, request: {model: string; temperature?: number; max_tokens?: number}, host: string | null): ModelCallSpan
}

const NO_SESSION: RunSession = {context: undefined, identify: () => undefined, close: async () => undefined}
const NO_CALL: ModelCallSpan = {end: () => undefined, fail: () => undefined}

export const NO_TRACING: Tracing = {
  enabled: false,
  session: () => NO_SESSION,
  attemptStarted: () => undefined,
  attemptFailed: () => undefined,
  stepEnded: () => undefined,
  toolCall: () => undefined,
  modelCall: () => NO_CALL,
}

/** Where spans go, read from the standard OpenTelemetry variables; null when traces are off. */
export interface ExportSettings {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  url: string
  /** How long the spans of a run may take to be sent when it ends, and one export request at most. */
  timeoutMs: number
  serviceName: string
  /** OTEL_RESOURCE_ATTRIBUTES, parsed. */
  resource: Record<string, string>
}

/** The default bound of a flush: a CLI waits for it, so it is shorter than the SDK's 10 s. */
export const DEFAULT_FLUSH_TIMEOUT_MS = 3000

function positive(value: string | undefined): number | undefined {
  const n = value === undefined || value.trim() === '' ? NaN : Number(value)
  return Number.isFinite(n) && n > 0 ? n : undefined
}

/** The settings of the variables OpenTelemetry's SDKs read, for traces; null when none names a collector or traces are switched off. */
export function exportSettings(env: NodeJS.ProcessEnv): ExportSettings | {problem: string} | null {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || undefined
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || undefined
  if (!traces && !base) return null
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim().toLowerCase())
  if (exporters.includes('none')) return null
  // The signal's own variable is the whole URL; the general one is a base that the signal's path is added to.
  const url = traces ?? `${base!.replace(/\/+$/, '')}/v1/traces`
  const name = traces ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT'
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return {problem: `${name} is not a URL (${traces ?? base}); for example http://127.0.0.1:4318`}
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return {problem: `${name} must be an http or https URL (OTLP/HTTP), not ${parsed.protocol}`}
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? '').trim()
  if (protocol !== '' && protocol !== 'http/json') return {problem: `pipe sends traces as OTLP/HTTP JSON (http/json), not ${protocol}; unset OTEL_EXPORTER_OTLP_PROTOCOL or set it to http/json (an OpenTelemetry Collector's OTLP/HTTP receiver takes both)`}
  const resource: Record<string, string> = {}
  for (const pair of (env.OTEL_RESOURCE_ATTRIBUTES ?? '').split(',')) {
    const at = pair.indexOf('=')
    if (at <= 0) continue
    try {
      resource[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim())
    } catch {
      // A pair that is not percent-encoded properly is left out, as the SDKs do.
    }
  }
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || resource['service.name'] || 'pipe'
  return {url, timeoutMs: positive(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT) ?? positive(env.OTEL_EXPORTER_OTLP_TIMEOUT) ?? DEFAULT_FLUSH_TIMEOUT_MS, serviceName, resource}
}

let current: Tracing = NO_TRACING
let opening: Promise<Tracing> | undefined

/** The tracing of this process: a no-op until a run opened it with a collector configured. */
export function tracing(): Tracing {
  return current
}

/** Warns once on stderr and in the daily log; traces never fail or stop a run. */
export function warnTracing(message: string): void {
  process.stderr.write(`Warning: ${visible(message)}\n`)
  appendLog('WARN', message)
}

/**
 * Opens this process's tracing from the environment, once: with no collector configured it
 * resolves to the no-op at once and imports nothing. A collector that cannot be set up is a
 * warning, never a failed run.
 */
export function openTracing(env: NodeJS.ProcessEnv = process.env): Promise<Tracing> {
  return (opening ??= (async () => {
    const settings = exportSettings(env)
    if (settings === null) return NO_TRACING
    if ('problem' in settings) {
      warnTracing(`no traces are sent: ${settings.problem}`)
      return NO_TRACING
    }
    try {
      const {OtlpTracing} = await import('./otlp.js')
      current = await OtlpTracing.create(settings)
    } catch (error) {
      warnTracing(`no traces are sent: the OpenTelemetry exporter could not be set up (${error instanceof Error ? error.message : String(error)})`)
    }
    return current
  })())
}
