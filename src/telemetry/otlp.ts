/**
 * The tracing of tracing.ts on OpenTelemetry's light path: sdk-trace-base's provider with a batch
 * processor and the OTLP/HTTP exporter (protobuf or JSON, as OTEL_EXPORTER_OTLP_PROTOCOL says), imported here only when a collector is configured
 * (the build vendors each package as a file of its own, loaded by these import() calls). No global
 * provider or context manager is registered: each span names its parent explicitly, so pipe's spans
 * never mix with what a host process traces.
 *
 * Names and attributes follow OpenTelemetry's GenAI semantic conventions where they apply, by the
 * names of conventions.ts: a run is `invoke_workflow`, a step that held a conversation with tools (an
 * agent) `invoke_agent`, a model request `chat` (gen_ai.request.model, gen_ai.usage.input_tokens,
 * ...), a tool call `execute_tool` (gen_ai.tool.name, ...); pipe's own attributes are under `pipe.`.
 * Token usage is on the model calls' spans only: a backend that sums gen_ai.usage.* over a trace
 * counts each token once (a step span says how many calls it made, and what they cost). No prompt, reply, argument or result is recorded: a span carries
 * ids, names, counts and verdicts, as the timeline does.
 */
import type {Attributes, Context, Span, SpanStatusCode as StatusCodes, Tracer} from '@opentelemetry/api'
import type {BasicTracerProvider, ReadableSpan, SpanExporter} from '@opentelemetry/sdk-trace-base'
import type {Agent} from 'node:http'
import {isPipeError} from '../errors.js'
import type {Snapshot} from '../types/snapshot.js'
import type {ExportSettings, Interval, ModelCallSpan, ModelEndpoint, RunSession, SessionEnd, ToolCallEnded, TraceContext, Tracing} from './contract.js'
import {warnTracing} from './contract.js'
import {ATTR, OPERATION, providerName} from './conventions.js'
import {redactSpans} from './redact-spans.js'

type Api = typeof import('@opentelemetry/api')

/** The exporter's result (ExportResult of @opentelemetry/core, which pipe does not import). */
interface ExportResult {
  code: number
  error?: Error
}

/** Remembers the first export that failed, so the run's end can say once that traces were lost. */
class WatchedExporter implements SpanExporter {
  failure: string | undefined
  reported = false

  constructor(private readonly inner: SpanExporter) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(redactSpans(spans), (result: ExportResult) => {
      if (result.code !== 0) this.failure ??= result.error?.message ?? 'the export failed'
      done(result)
    })
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown()
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve()
  }
}

/**
 * The exporter's connections, through an agent of pipe's own: once a flush's bound has passed,
 * every socket is destroyed (whatever the collector is still sending) and no new one is opened (a
 * retry the exporter scheduled fails at once), so nothing of the export outlives the bound.
 */
class Connections {
  private made: Agent | undefined
  private closed = false

  async agent(protocol: string): Promise<Agent> {
    // Loaded here, as the exporter's own factory does: a run without a collector never loads them.
    const {Agent} = protocol === 'https:' ? await import('node:https') : await import('node:http')
    const agent = new Agent({keepAlive: true})
    const connect = agent.createConnection.bind(agent)
    agent.createConnection = (options, callback) => {
      if (!this.closed) return connect(options, callback)
      callback?.(new Error('the export was abandoned at its time bound'), undefined as never)
      return undefined
    }
    if (this.closed) agent.destroy()
    return (this.made = agent)
  }

  abandon(): void {
    this.closed = true
    this.made?.destroy()
  }
}

/** server.address and server.port of an endpoint's host[:port]. */
function serverOf(host: string | null): Attributes {
  if (!host) return {}
  const port = /:(\d+)$/.exec(host)?.[1]
  return {[ATTR.serverAddress]: host.replace(/:\d+$/, '').replace(/^\[|\]$/g, ''), ...(port ? {[ATTR.serverPort]: Number(port)} : {})}
}

const key = (runId: string, stepId: string): string => `${runId}\u0000${stepId}`

function errorType(error: unknown): string {
  if (isPipeError(error)) return error.code
  return error instanceof Error ? error.name : 'Error'
}

export class OtlpTracing implements Tracing {
  readonly enabled = true
  /** The open session span of each run this process drives, and its pipeline's name. */
  private readonly runs = new Map<string, {span: Span; pipeline: string}>()
  /** The open span of each step attempt, by run and step. */
  private readonly steps = new Map<string, Span>()

  private constructor(
    private readonly api: Api,
    private readonly tracer: Tracer,
    private readonly provider: BasicTracerProvider,
    private readonly exporter: WatchedExporter,
    private readonly settings: ExportSettings,
    private readonly connections: Connections,
  ) {}

  static async create(settings: ExportSettings): Promise<OtlpTracing> {
    const [api, sdk, otlp, resources] = await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/sdk-trace-base'),
      // Only the encoding asked for is loaded: the two exporters differ in it alone.
      settings.protocol === 'http/protobuf' ? import('@opentelemetry/exporter-trace-otlp-proto') : import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
    ])
    const connections = new Connections()
    const exporter = new WatchedExporter(
      new otlp.OTLPTraceExporter({url: settings.url, timeoutMillis: settings.timeoutMs, httpAgentOptions: (protocol) => connections.agent(protocol)}),
    )
    const provider = new sdk.BasicTracerProvider({
      resource: resources.defaultResource().merge(resources.resourceFromAttributes({...settings.resource, [ATTR.serviceName]: settings.serviceName})),
      spanProcessors: [new sdk.BatchSpanProcessor(exporter, {exportTimeoutMillis: settings.timeoutMs})],
    })
    return new OtlpTracing(api, provider.getTracer('pipe'), provider, exporter, settings, connections)
  }

  session(run: Parameters<Tracing['session']>[0]): RunSession {
    const {api} = this
    // A child run started by a step of this process nests under that step; any other run continues the trace its record keeps.
    const under = run.parent ? this.steps.get(key(run.parent.run_id, run.parent.step)) : undefined
    let parent: Context = api.ROOT_CONTEXT
    if (under) parent = api.trace.setSpan(parent, under)
    else if (run.continues)
      parent = api.trace.setSpanContext(parent, {
        traceId: run.continues.trace_id,
        spanId: run.continues.span_id,
        traceFlags: api.TraceFlags.SAMPLED,
        isRemote: true,
      })
    // Putting a run on a queue (pipe run --detach) drives nothing: a producer's span, not a workflow's invocation.
    const enqueue = run.event === 'enqueued'
    const attributes: Attributes = {
      ...(enqueue ? {} : {[ATTR.operation]: OPERATION.invokeWorkflow, [ATTR.workflow]: run.pipeline}),
      'pipe.pipeline': run.pipeline,
      'pipe.session': run.event,
      ...(run.queue !== undefined ? {'pipe.queue': run.queue} : {}),
      ...(run.parent ? {'pipe.parent_run_id': run.parent.run_id, 'pipe.parent_step': run.parent.step} : {}),
    }
    const span = this.tracer.startSpan(
      `${enqueue ? 'enqueue' : 'invoke_workflow'} ${run.pipeline}`,
      {kind: enqueue ? api.SpanKind.PRODUCER : api.SpanKind.INTERNAL, attributes},
      parent,
    )
    const own = span.spanContext()
    let runId: string | undefined
    const identify = (id: string): void => {
      runId = id
      span.setAttribute('pipe.run_id', id)
      this.runs.set(id, {span, pipeline: run.pipeline})
    }
    if (run.run_id !== undefined) identify(run.run_id)
    return {
      context: {trace_id: own.traceId, span_id: own.spanId},
      identify,
      close: async (end: SessionEnd) => {
        if (runId !== undefined) {
          // A step still open (the run was interrupted, or the engine threw) ends with the session.
          for (const [k, step] of this.steps) {
            if (!k.startsWith(`${runId}\u0000`)) continue
            step.setAttribute('pipe.outcome', 'interrupted')
            step.end()
            this.steps.delete(k)
          }
          this.runs.delete(runId)
        }
        if ('thrown' in end) {
          span.setAttributes({
            'pipe.outcome': 'error',
            [ATTR.errorType]: errorType(end.thrown),
            ...(isPipeError(end.thrown) ? {'pipe.error_code': end.thrown.code} : {}),
          })
          span.setStatus({code: this.code('ERROR'), message: end.thrown instanceof Error ? end.thrown.message : String(end.thrown)})
        } else {
          span.setAttributes({
            'pipe.outcome': end.status,
            'pipe.status': end.status,
            ...(end.error ? {[ATTR.errorType]: end.error.code, 'pipe.error_code': end.error.code} : {}),
          })
          if (end.status === 'failed' || end.status === 'blocked')
            span.setStatus({code: this.code('ERROR'), message: end.error?.message ?? end.reason ?? end.status})
        }
        span.end()
        // A child's spans go with its parent's; a top-level run's are sent before its command ends.
        if (!run.parent) await this.flush()
      },
    }
  }

  interval(under: TraceContext, interval: Interval): void {
    const {api} = this
    const parent = api.trace.setSpanContext(api.ROOT_CONTEXT, {
      traceId: under.trace_id,
      spanId: under.span_id,
      traceFlags: api.TraceFlags.SAMPLED,
      isRemote: true,
    })
    const span = this.tracer.startSpan(interval.name, {kind: api.SpanKind.INTERNAL, startTime: interval.start, attributes: interval.attributes}, parent)
    span.end(interval.end)
  }

  attemptStarted(runId: string, step: {id: string; kind: string}, seq: number, attempt: number): void {
    const {api} = this
    const k = key(runId, step.id)
    this.steps.get(k)?.end()
    const session = this.runs.get(runId)
    const parent = session ? api.trace.setSpan(api.ROOT_CONTEXT, session.span) : api.ROOT_CONTEXT
    const attributes: Attributes = {
      'pipe.run_id': runId,
      ...(session ? {'pipe.pipeline': session.pipeline} : {}),
      'pipe.step': step.id,
      'pipe.kind': step.kind,
      'pipe.seq': seq,
      'pipe.attempt': attempt,
    }
    this.steps.set(k, this.tracer.startSpan(`step ${step.id}`, {kind: api.SpanKind.INTERNAL, attributes}, parent))
  }

  attemptFailed(runId: string, stepId: string, error: {code: string; message: string}): void {
    const k = key(runId, stepId)
    const span = this.steps.get(k)
    if (!span) return
    span.setAttributes({'pipe.outcome': 'retried', [ATTR.errorType]: error.code, 'pipe.error_code': error.code})
    span.setStatus({code: this.code('ERROR'), message: error.message})
    span.end()
    this.steps.delete(k)
  }

  stepEnded(runId: string, stepId: string, ending: {snapshot: Snapshot} | {awaiting: string}): void {
    const k = key(runId, stepId)
    const span = this.steps.get(k)
    if (!span) return
    this.steps.delete(k)
    if ('awaiting' in ending) {
      span.setAttributes({'pipe.outcome': 'awaiting_input', 'pipe.awaiting': ending.awaiting})
      span.end()
      return
    }
    const {snapshot} = ending
    const decision = snapshot.decisions.at(-1)
    const usage = snapshot.meta.usage
    const calls = snapshot.meta.model_calls ?? []
    const attributes: Attributes = {
      'pipe.outcome': decision?.decision ?? 'unknown',
      'pipe.attempts': snapshot.step.attempts,
      ...(decision?.next_step ? {'pipe.next_step': decision.next_step} : {}),
      ...(decision?.run_status ? {'pipe.run_status': decision.run_status} : {}),
      ...(snapshot.spec_version_out ? {'pipe.spec_version_out': snapshot.spec_version_out} : {}),
      ...(snapshot.meta.llm_model ? {[ATTR.requestModel]: snapshot.meta.llm_model} : {}),
      // The tokens are on the model calls' own spans: repeated here, a backend summing a trace would count them twice.
      ...(usage ? {'pipe.model_calls': usage.calls} : {}),
      ...(usage?.cost !== undefined ? {'pipe.cost': usage.cost, 'pipe.cost_currency': usage.currency ?? 'USD'} : {}),
      ...(calls.length > 0
        ? {'pipe.reply_sources': [...new Set(calls.map((c) => c.source))].sort(), 'pipe.cache_hit': calls.every((c) => c.source !== 'live')}
        : {}),
      ...(snapshot.tool_calls ? {'pipe.tool_calls': snapshot.tool_calls.length} : {}),
    }
    const failedRun = decision?.run_status === 'failed' || decision?.run_status === 'blocked'
    const error = snapshot.errors.at(-1)
    if (decision?.decision === 'error' || failedRun) {
      const type = error?.code ?? decision?.decision ?? 'error'
      Object.assign(attributes, {[ATTR.errorType]: type, 'pipe.error_code': type, ...(error ? {'pipe.error_trace_id': error.trace_id} : {})})
      span.setStatus({code: this.code('ERROR'), message: error?.message ?? decision?.reason ?? type})
    }
    if (snapshot.tool_calls) {
      // A step that held a conversation with tools is an agent's invocation.
      span.updateName(`invoke_agent ${stepId}`)
      Object.assign(attributes, {[ATTR.operation]: OPERATION.invokeAgent, [ATTR.agent]: stepId})
    }
    span.setAttributes(attributes)
    span.end()
  }

  toolCall(runId: string, stepId: string, call: ToolCallEnded): void {
    const {api} = this
    const step = this.steps.get(key(runId, stepId))
    const parent = step ? api.trace.setSpan(api.ROOT_CONTEXT, step) : api.ROOT_CONTEXT
    const name = call.tool ?? 'unknown'
    // The timeline line comes when the call has ended: the span is laid over the time it took.
    const end = Date.now()
    const span = this.tracer.startSpan(
      `execute_tool ${name}`,
      {
        kind: api.SpanKind.INTERNAL,
        startTime: end - (call.duration_ms ?? 0),
        attributes: {
          [ATTR.operation]: OPERATION.executeTool,
          [ATTR.toolName]: name,
          [ATTR.toolType]: 'function',
          ...(call.call_id ? {[ATTR.toolCallId]: call.call_id} : {}),
          'pipe.run_id': runId,
          'pipe.step': stepId,
          ...(call.level ? {'pipe.tool.level': call.level} : {}),
          ...(call.decision ? {'pipe.tool.decision': call.decision} : {}),
          ...(call.ok !== undefined ? {'pipe.tool.ok': call.ok} : {}),
        },
      },
      parent,
    )
    if (call.ok === false) {
      const type =
        call.decision && call.decision !== 'auto' && call.decision !== 'preapproved' && call.decision !== 'confirmed' ? `tool_${call.decision}` : 'tool_error'
      span.setAttribute(ATTR.errorType, type)
      span.setStatus({code: this.code('ERROR')})
    }
    span.end(end)
  }

  modelCall(call: {run?: string; step: string}, request: {model: string; temperature?: number; max_tokens?: number}, endpoint: ModelEndpoint): ModelCallSpan {
    const {api} = this
    const step = call.run !== undefined ? (this.steps.get(key(call.run, call.step)) ?? this.runs.get(call.run)?.span) : undefined
    const parent = step ? api.trace.setSpan(api.ROOT_CONTEXT, step) : api.ROOT_CONTEXT
    const span = this.tracer.startSpan(
      `chat ${request.model}`,
      {
        kind: api.SpanKind.CLIENT,
        attributes: {
          [ATTR.operation]: OPERATION.chat,
          [ATTR.provider]: providerName(endpoint.provider, endpoint.host),
          [ATTR.requestModel]: request.model,
          ...(request.temperature !== undefined ? {[ATTR.temperature]: request.temperature} : {}),
          ...(request.max_tokens !== undefined ? {[ATTR.maxTokens]: request.max_tokens} : {}),
          ...serverOf(endpoint.host),
          ...(call.run !== undefined ? {'pipe.run_id': call.run} : {}),
          'pipe.step': call.step,
        },
      },
      parent,
    )
    return {
      end: (reply) => {
        span.setAttributes({
          ...(reply.model ? {[ATTR.responseModel]: reply.model} : {}),
          ...(reply.finish_reason ? {[ATTR.finishReasons]: [reply.finish_reason]} : {}),
          ...(reply.usage ? {[ATTR.inputTokens]: reply.usage.prompt_tokens, [ATTR.outputTokens]: reply.usage.completion_tokens} : {}),
          'pipe.reply_source': reply.source ?? 'live',
          'pipe.cache_hit': reply.source !== undefined && reply.source !== 'live',
          ...(reply.key ? {'pipe.request_key': reply.key} : {}),
        })
        span.end()
      },
      fail: (error) => {
        span.setAttributes({[ATTR.errorType]: errorType(error), ...(isPipeError(error) ? {'pipe.error_code': error.code} : {})})
        span.setStatus({code: this.code('ERROR'), message: error instanceof Error ? error.message : String(error)})
        span.end()
      },
    }
  }

  /**
   * Sends what is buffered, waiting at most the export timeout: a collector that is down or does
   * not answer costs a run that much once, never a failure or a hang.
   */
  async flush(): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.settings.timeoutMs)
      timer.unref()
    })
    const flushed = await Promise.race([
      this.provider.forceFlush().then(
        () => true,
        () => true,
      ),
      bound.then(() => false),
    ])
    clearTimeout(timer)
    // The exporter's own timeout is the socket's idle time: a collector that drips its answer a byte
    // at a time renews it for ever, and the open socket would keep pipe alive after the warning.
    if (!flushed) this.connections.abandon()
    const failure = this.exporter.failure ?? (flushed ? undefined : `no answer within ${this.settings.timeoutMs} ms`)
    if (failure !== undefined && !this.exporter.reported) {
      this.exporter.reported = true
      warnTracing(`traces were not delivered to ${this.settings.url} (${failure}); the run itself is not affected`)
    }
  }

  private code(name: keyof typeof StatusCodes): StatusCodes {
    return this.api.SpanStatusCode[name]
  }
}
