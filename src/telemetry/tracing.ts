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
import {warnTracing, type ExportSettings, type ModelCallSpan, type RunSession, type Tracing} from './contract.js'

export type {ExportSettings, Interval, ModelCallSpan, RunSession, SessionEnd, ToolCallEnded, TraceContext, Tracing} from './contract.js'
export {warnTracing} from './contract.js'

const NO_SESSION: RunSession = {context: undefined, identify: () => undefined, close: async () => undefined}
const NO_CALL: ModelCallSpan = {end: () => undefined, fail: () => undefined}

export const NO_TRACING: Tracing = {
  enabled: false,
  session: () => NO_SESSION,
  interval: () => undefined,
  attemptStarted: () => undefined,
  attemptFailed: () => undefined,
  stepEnded: () => undefined,
  toolCall: () => undefined,
  modelCall: () => NO_CALL,
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
  // The signal's own variable wins, as in the SDKs; unset, JSON, which every OTLP/HTTP receiver takes.
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim() || 'http/json').toLowerCase()
  if (protocol !== 'http/json' && protocol !== 'http/protobuf')
    return {
      problem: `pipe sends traces over OTLP/HTTP, as http/protobuf or http/json, not ${protocol}; set OTEL_EXPORTER_OTLP_PROTOCOL to http/protobuf or http/json and point the endpoint at the collector's OTLP/HTTP port (4318), not its gRPC one`,
    }
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
  return {
    url,
    protocol,
    timeoutMs: positive(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT) ?? positive(env.OTEL_EXPORTER_OTLP_TIMEOUT) ?? DEFAULT_FLUSH_TIMEOUT_MS,
    serviceName,
    resource,
  }
}

let current: Tracing = NO_TRACING
let opening: Promise<Tracing> | undefined

/** The tracing of this process: a no-op until a run opened it with a collector configured. */
export function tracing(): Tracing {
  return current
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
