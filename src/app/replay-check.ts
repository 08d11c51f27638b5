/**
 * pipe replay --check: recomputes what each snapshot's kind says is a pure function of the spec (a
 * gate's results) and compares it with what was recorded, byte for byte.
 */
import type {LoadedPipeline} from '../config/pipeline.js'
import {PipeError} from '../errors.js'
import type {ExprEvaluator} from '../expr/index.js'
import {defaultPolicy} from '../policy/policy.js'
import {describeDifference, normaliseRequest, requestKey} from '../providers/cassette.js'
import type {ChatReply, ChatRequest, ChatTransport} from '../providers/chat.js'
import {handlerNamed, kindCatalog} from '../steps/registry.js'
import {ReplyCache} from '../store/replies.js'
import type {RunStore} from '../store/types.js'
import type {Step} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import {canonicalJson} from '../util/hash.js'
import {History} from '../engine/history.js'
import {contextFor, deferredFields, policyValues, evaluatorFor, resolveStep, usesExpressions} from '../engine/expressions.js'

export interface GateCheck {
  seq: number
  step: string
  spec_version: string | null
  same: boolean
  recorded: unknown
  replayed?: unknown
  error?: string
}

export async function checkGates(store: RunStore, runId: string, pipeline: LoadedPipeline): Promise<GateCheck[]> {
  const out: GateCheck[] = []
  for (const snapshot of await store.readSnapshots(runId)) {
    const role = handlerNamed(snapshot.step.kind)?.replay
    if (!role) continue
    const recorded = role.recorded(snapshot)
    const step = pipeline.pipeline.steps.find((s) => s.id === snapshot.step.name)
    const base = {seq: snapshot.step.seq, step: snapshot.step.name, spec_version: snapshot.spec_version_in, recorded}
    if (!step || step.kind !== snapshot.step.kind) {
      out.push({...base, same: false, error: `the pipeline has no ${snapshot.step.kind} step "${snapshot.step.name}"`})
      continue
    }
    if (!snapshot.spec_version_in) {
      out.push({...base, same: recorded === undefined, error: 'the step read no spec'})
      continue
    }
    try {
      const spec = await store.readSpec(snapshot.spec_version_in)
      const replayed = role.recompute(step, spec, pipeline.pipeline)
      out.push({...base, same: canonicalJson(replayed) === canonicalJson(recorded), replayed})
    } catch (error) {
      out.push({...base, same: false, error: (error as Error).message})
    }
  }
  return out
}

/** One model step of a run, run again answered only by the store's reply cache. */
export interface ModelCheck {
  seq: number
  step: string
  kind: string
  /** False when its replies are not all in the reply cache (nothing to compare with). */
  checked: boolean
  same: boolean
  /** Model requests the snapshot recorded. */
  calls: number
  recorded?: unknown
  replayed?: unknown
  error?: string
}

/**
 * Every step of a kind that reruns from its replies (kind: model) whose recorded requests are all
 * in the reply cache runs again with a provider that answers only those requests from the cache:
 * a request whose hash is not one the snapshot recorded is a difference (shown as a diff against
 * the nearest recorded one), and so is an output that differs from the recorded output.
 */
export async function checkModels(store: RunStore, record: RunRecord, pipeline: LoadedPipeline): Promise<ModelCheck[]> {
  const snapshots = await store.readSnapshots(record.run_id)
  const cache = new ReplyCache(store.root)
  const out: ModelCheck[] = []
  let evaluator: ExprEvaluator | null | undefined
  for (const [index, snapshot] of snapshots.entries()) {
    const handler = handlerNamed(snapshot.step.kind)
    const calls = snapshot.meta.model_calls ?? []
    if (!handler?.rerunsFromReplies || calls.length === 0 || snapshot.decisions.at(-1)?.decision === 'error') continue
    const base = {seq: snapshot.step.seq, step: snapshot.step.name, kind: snapshot.step.kind, calls: calls.length}
    const step = pipeline.pipeline.steps.find((s) => s.id === snapshot.step.name)
    if (!step || step.kind !== snapshot.step.kind) {
      out.push({...base, checked: true, same: false, error: `the pipeline has no ${snapshot.step.kind} step "${snapshot.step.name}"`})
      continue
    }
    const cached = new Map<string, {request: ChatRequest; reply: ChatReply}>()
    try {
      for (const {key} of calls) {
        const hit = await cache.read(key)
        if (hit) cached.set(key, hit as {request: ChatRequest; reply: ChatReply})
      }
    } catch (error) {
      out.push({...base, checked: true, same: false, error: (error as Error).message})
      continue
    }
    if (calls.some((c) => !cached.has(c.key))) {
      out.push({
        ...base,
        checked: false,
        same: true,
        error: `${calls.filter((c) => !cached.has(c.key)).length} of ${calls.length} replies are not in the reply cache`,
      })
      continue
    }
    const recorded = withoutSpecRef(snapshot.outputs)
    try {
      const before = snapshots.slice(0, index)
      const spec = snapshot.spec_version_in ? await store.readSpec(snapshot.spec_version_in) : null
      if (evaluator === undefined) evaluator = usesExpressions(pipeline.pipeline) ? await evaluatorFor(pipeline, kindCatalog) : null
      let resolved: Step = step
      if (evaluator) {
        const secrets = Object.fromEntries((pipeline.pipeline.secrets ?? []).map((name) => [name, process.env[name] ?? '[redacted]']))
        resolved = resolveStep(
          step,
          evaluator.bind(contextFor(record, before, spec, {secrets, policy: policyValues(defaultPolicy().policy)})),
          deferredFields(handler, step),
        ).step
      }
      const asked: string[] = []
      const transport: ChatTransport = {
        endpointHost: null,
        complete: async (request) => {
          const key = requestKey(request)
          asked.push(key)
          const hit = cached.get(key)
          if (hit) return hit.reply
          const nearest = [...cached.values()][Math.min(asked.length - 1, cached.size - 1)]!
          throw new PipeError(
            'E_CONFLICT',
            `request ${asked.length} is not one the step made (${key}):\n${await describeDifference(normaliseRequest(nearest.request), normaliseRequest(request))}`,
          )
        },
      }
      const {OpenAIProvider} = await import('../providers/openai/provider.js')
      const provider = new OpenAIProvider({settings: pipeline.pipeline.provider ?? {}, transport})
      const result = await handler.run({
        step: resolved,
        pipeline,
        run: record,
        spec,
        history: new History(before),
        policy: defaultPolicy(),
        provider: () => Promise.resolve(provider),
        cwd: record.workspace ?? process.cwd(),
        signal: new AbortController().signal,
        attempt: 1,
        now: () => new Date(snapshot.step.ended_at),
        user: 'replay-check',
        ledger: undefined as never,
        slotsDir: '',
        hook: () => undefined,
        render: () => {
          throw new PipeError('E_INTERNAL', `step ${snapshot.step.name} evaluated an expression while being re-checked`)
        },
        children: undefined as never,
        // Re-checking runs a model step again from its cached replies; it keeps no working state.
        state: {read: () => Promise.resolve(undefined), write: () => Promise.resolve(), earlier: () => Promise.resolve([])},
        // A re-check writes nothing to the run it checks.
        event: () => Promise.resolve(),
      })
      if (result.type !== 'done') throw new PipeError('E_CONFLICT', `the step ${result.type === 'await' ? 'waited' : 'did not finish'} where it had finished`)
      const replayed = withoutSpecRef(result.outputs)
      const sameRequests = canonicalJson(asked) === canonicalJson(calls.map((c) => c.key))
      const same = sameRequests && canonicalJson(replayed) === canonicalJson(recorded) && result.outcome === snapshot.decisions.at(-1)?.decision
      out.push({
        ...base,
        checked: true,
        same,
        recorded,
        replayed,
        ...(sameRequests ? {} : {error: `it asked ${asked.length} request(s) where the snapshot recorded ${calls.length}`}),
      })
    } catch (error) {
      out.push({...base, checked: true, same: false, recorded, error: (error as Error).message})
    }
  }
  return out
}

/** Outputs as a step produced them: the spec version the engine wrote is a new id each time. */
function withoutSpecRef(outputs: unknown): unknown {
  if (outputs === null || typeof outputs !== 'object') return outputs
  const {spec_version_out: _v, ...rest} = outputs as Record<string, unknown>
  return rest
}
