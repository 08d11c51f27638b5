/** pipe publish: publishing an approved spec version again by hand. */
import {didYouMean} from '../../util/suggest.js'
import {backoffFor} from '../../engine/retry.js'
import {PipeError} from '../../errors.js'
import {defaultPolicy} from '../../policy/policy.js'
import {publishTo, type PublishOutcome} from '../../publish/deliver.js'
import {views} from '../../steps/registry.js'
import {ledgerKey, releaseHeld} from '../../store/file/ledger.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {RunStore} from '../../store/types.js'
import {currentUser} from '../../util/user.js'
import {holdRunPatiently} from './hold-run.js'
import {type SessionOptions, loadPipelineOrThrow, policyOrThrow} from './shared.js'

export interface PublishSession extends SessionOptions {
  runId: string
  target?: string
  resend?: boolean
  markDelivered?: boolean
  env?: NodeJS.ProcessEnv
  /** Told when another process holds the run and this one waits for it. */
  onWait?: (busy: string) => void
}

/** How long pipe publish waits for a process that drives the run (its own publish step, say) to let it go. */
const DRIVER_WAIT_MS = 60000

export async function publishSession(options: PublishSession): Promise<{run_id: string; spec_version: string; results: PublishOutcome[]}> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  // Held for the whole publication: its 'published' line joins the run's timeline, which only the
  // run's holder writes; and a driver publishing meanwhile is done before this reads the ledger.
  const release = await holdRunPatiently(store, options.runId, {
    waitMs: DRIVER_WAIT_MS,
    ...(options.onWait ? {onWait: options.onWait} : {}),
    ...(options.signal ? {signal: options.signal} : {}),
  })
  try {
    return await publishHeld(store, options)
  } finally {
    await release()
  }
}

async function publishHeld(store: RunStore, options: PublishSession): Promise<{run_id: string; spec_version: string; results: PublishOutcome[]}> {
  const record = await store.readRun(options.runId)
  if (!record.spec_version)
    throw new PipeError('E_STATE', `run ${options.runId} has no spec version to publish`, {hint: `pipe runs show ${options.runId} shows how far it got.`})
  const snapshots = await store.readSnapshots(options.runId)
  const approved = snapshots.some((s) => views.review.approves(s, record.spec_version))
  if (!approved) {
    throw new PipeError('E_STATE', `spec ${record.spec_version} of run ${options.runId} has no review decision "go"; only approved versions are published`, {
      hint: `Review it first: pipe review ${options.runId} --decision go`,
    })
  }
  const pipeline = await loadPipelineOrThrow(record.pipeline.path)
  if (pipeline.hash !== record.pipeline.hash)
    throw new PipeError('E_CONFLICT', `the pipeline ${record.pipeline.path} changed since run ${options.runId}`, {
      hint: 'Its targets may have changed too; restore the file to publish this run again.',
    })
  const targets = views.publish.targets(pipeline.pipeline.steps)
  const chosen = options.target ? targets.filter((t) => t.name === options.target) : targets
  if (chosen.length === 0) {
    throw new PipeError(
      'E_INVALID_ARGS',
      options.target
        ? `the pipeline has no publish target "${options.target}"${didYouMean(
            options.target,
            targets.map((t) => t.name),
          )}`
        : 'the pipeline has no publish targets',
      {
        hint: targets.length ? `Its targets: ${targets.map((t) => t.name).join(', ')}.` : 'Add a publish step with targets to the pipeline.',
      },
    )
  }
  const spec = await store.readSpec(record.spec_version)
  const user = currentUser()
  const ledger = store.ledger()
  const policy = record.policy_path ? await policyOrThrow(record.policy_path, options.cwd) : defaultPolicy()
  const attempts = 1 + policy.policy.max_retries_default
  const results = []
  for (const target of chosen) {
    const key = ledgerKey(spec.meta.feature_id, target.name, spec.meta.spec_version)
    if (options.resend || options.markDelivered) await releaseHeld(ledger, key, {delivered: options.markDelivered === true, by: user})
    for (let attempt = 1; ; attempt++) {
      try {
        results.push(
          await publishTo({
            ledger,
            target,
            spec,
            runId: options.runId,
            cwd: record.workspace ?? options.cwd,
            user,
            resendUnknown: attempt === 1,
            ...(options.signal ? {signal: options.signal} : {}),
            ...(options.env ? {env: options.env} : {}),
          }),
        )
        break
      } catch (error) {
        if (!(error instanceof PipeError) || !error.retryable || attempt >= attempts) throw error
        await new Promise((r) => setTimeout(r, backoffFor(attempt - 1, Math.random())))
      }
    }
  }
  await store.appendEvent(options.runId, {
    at: new Date().toISOString(),
    event: 'published',
    by: user,
    reason: results.map((r) => `${r.target}: ${r.status} (${r.external_id})`).join(', '),
  })
  return {run_id: options.runId, spec_version: spec.meta.spec_version, results}
}
