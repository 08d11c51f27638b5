import {PipeError} from '../errors.js'
import type {PublishOutcome} from '../publish/deliver.js'
import type {Step} from '../types/pipeline.js'
import {requireSpec} from './model-support.js'
import {outputsOf} from './outputs.js'
import {reviewDecision, reviewedVersion} from './review.js'
import type {KindOutputs, StepHandler} from './types.js'

/**
 * A delivery that fails after the version was approved is not a reason to lose the run: it stops
 * as blocked at this step, and pipe resume tries again once the target is fixed; the ledger keeps
 * what was delivered from being sent twice. Retryable errors are still retried first.
 */
function blocking(error: unknown, signal: AbortSignal, runId: string): unknown {
  if (!(error instanceof PipeError) || error.blocking || signal.aborted) return error
  return new PipeError(error.code, error.message, {
    retryable: error.retryable,
    blocking: true,
    hint: `${error.hint ? `${error.hint} ` : ''}Once the target is fixed, pipe resume ${runId} publishes what is not yet delivered.`,
    ...(error.details ? {details: error.details} : {}),
    cause: error,
  })
}

// Delivery (HTTP, the ledger's sends) is run code: loaded on a publish step's first run, never to validate a pipeline.
const deliver = () => import('../publish/deliver.js')

export type PublishOutputs = {publish_result: PublishOutcome[]}
export const publishResult = outputsOf<PublishOutputs>()('publish_result')

/** Every target the pipeline's publish steps name, in order (pipe publish chooses among them). */
export function publishTargets(steps: readonly Step[]): Array<Extract<Step, {kind: 'publish'}>['targets'][number]> {
  return steps.flatMap((s) => (s.kind === 'publish' ? s.targets : []))
}

export const publish: StepHandler<'publish'> = {
  kind: 'publish',
  summary: 'publish the reviewed spec version to its targets, once per idempotency key',
  outcomes: () => ['success'],
  changesSpec: false,
  needsSpec: true,
  // Safe: the ledger sends each key at most once, so a retry re-sends only what surely did not
  // arrive; an unknown outcome (a timeout) is not retryable and is sent again only on a redrive.
  safeToRetry: true,
  // A file target's copy is the spec version's record byte for byte, so the snapshot's bind of that version is its digest.
  attestSubjects: (snapshot) => {
    const version = typeof snapshot.inputs.canonical_spec_ref === 'string' ? snapshot.inputs.canonical_spec_ref : undefined
    const bound = version ? snapshot.meta.binds?.[version] : undefined
    if (!version || !bound?.startsWith('sha256:')) return []
    const digest = {sha256: bound.slice('sha256:'.length)}
    const delivered = (publishResult.of(snapshot) ?? []).filter((r) => r.status === 'published' || r.status === 'already_published')
    if (delivered.length === 0) return []
    return [{name: `spec/${version}.json`, digest}, ...delivered.filter((r) => r.type === 'file' && r.external_id).map((r) => ({name: r.external_id, digest}))]
  },
  deliveredKeys: (snapshot) => (publishResult.of(snapshot) ?? []).filter((r) => r.status === 'published' || r.status === 'already_published').map((r) => r.key),
  async run(context) {
    const spec = requireSpec(context, 'publish')
    const decision = reviewDecision.latest(context.history)
    const reviewed = reviewedVersion.latest(context.history)
    if ((context.step.require_review ?? true) && (decision !== 'go' || reviewed !== spec.meta.spec_version)) {
      throw new PipeError(
        'E_STATE',
        `spec ${spec.meta.spec_version} has no review decision "go" (latest: ${decision ?? 'none'}${reviewed && reviewed !== spec.meta.spec_version ? ` for ${reviewed}` : ''})`,
        {
          hint: 'Put a review step before publish and approve the version with pipe review RUN --decision go.',
        },
      )
    }
    const results: PublishOutcome[] = []
    for (const target of context.step.targets) {
      try {
        results.push(
          await (
            await deliver()
          ).publishTo({
            ledger: context.ledger,
            target,
            spec,
            runId: context.run.run_id,
            cwd: context.cwd,
            user: context.user,
            signal: context.signal,
            hook: (point) => context.hook(point),
            resendUnknown: context.attempt === 1,
            now: () => context.now(),
          }),
        )
      } catch (error) {
        throw blocking(error, context.signal, context.run.run_id)
      }
    }
    return {
      type: 'done',
      outcome: 'success',
      reason: `published ${spec.meta.spec_version} to ${results.map((r) => `${r.target} (${r.status === 'already_published' ? 'already delivered: ' : ''}${r.external_id})`).join(', ')}`,
      inputs: {canonical_spec_ref: spec.meta.spec_version, review_decision: decision ?? null, idempotency_keys: results.map((r) => r.key)},
      outputs: {publish_result: results} satisfies PublishOutputs & KindOutputs<'publish'>,
    }
  },
}
