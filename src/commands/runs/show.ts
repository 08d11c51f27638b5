import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import {PipeCommand} from '../../cli/base-command.js'
import {renderRunShow} from '../../cli/views.js'
import {childTree, effectiveStatus, totalUsage, type RunSummary} from '../../store/queries.js'
import {openStore} from '../../store/open.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import type {Holding} from '../../store/types.js'
import {assertId} from '../../store/file/ids.js'
import {line as t} from '../../util/terminal-text.js'
import {queueWait, type QueueWait} from '../../app/worker/entry.js'
import {applyPassedDeadline} from '../../app/sessions/confirm-deadline.js'
import {gateVotes} from '../../app/sessions/vote.js'

export interface RunShowResult {
  /** The gate the run waits at under an approvals rule: who has voted and who may still. */
  gate?: {rule: string; required: number; votes: unknown[]; may_still: string[]}
  run: RunRecord
  status: RunRecord['status']
  events: RunEvent[]
  steps: Array<{
    seq: number
    step: string
    kind: string
    outcome: string
    next_step: string | null
    attempts: number
    duration_ms: number
    spec_version_out: string | null
    errors: number
    by?: string
  }>
  /** The runs this run started (pipeline and foreach steps), each with its own children. */
  children: RunSummary[]
  /** On a shared (PostgreSQL) store: the worker holding the run under a live lease, its lease and epoch, and the queue. */
  holding?: Holding
  /** On a PostgreSQL store, the worker queue the run is on and what it waits for there (pipe run --detach, pipe worker). */
  queue?: QueueWait
  /** Model usage over all steps. */
  usage: {prompt_tokens: number; completion_tokens: number; total_tokens: number; calls: number; cost?: number; currency?: string}
}

export default class RunsShow extends PipeCommand {
  static override summary = 'Show a run: its state, what it waits for, and its timeline of states, steps, attempts and decisions.'
  static override examples = [
    {description: 'The timeline of a run', command: '<%= config.bin %> <%= command.id %> R-20261121-0001'},
    {description: 'As JSON', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --json'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {store: PipeCommand.storeFlag, verbose: Flags.boolean({hidden: true})}

  async run(): Promise<RunShowResult> {
    const {args, flags} = await this.parse(RunsShow)
    assertId('run', args.run)
    // A gate whose deadline passed acts first (its on_timeout): what is shown is the run after it.
    await applyPassedDeadline({cwd: process.cwd(), store: this.storeDir(flags.store), runId: args.run}).catch((error: unknown) => {
      const e = error as {code?: string; message?: string}
      process.stderr.write(
        t`warning: the confirmation's deadline passed, but what the policy says it does could not be done: [${e.code ?? 'E_INTERNAL'}] ${e.message ?? String(error)}\n`,
      )
    })
    const store = await openStore(this.storeDir(flags.store), 'existing')
    const record = await store.readRun(args.run)
    const [events, snapshots, status] = await Promise.all([store.readEvents(args.run), store.readSnapshots(args.run), effectiveStatus(store, record)])
    const usage = totalUsage(snapshots)
    const children = await childTree(store, args.run)
    const holding = (await store.holding?.(args.run)) ?? undefined
    const queue = await queueWait(this.storeDir(flags.store), store, args.run)
    const gate = await gateVotes(record, process.cwd())
    if (!this.jsonEnabled()) {
      process.stdout.write(renderRunShow(record, status, events, snapshots, children))
      if (holding) process.stdout.write(holdingText(holding, record.status))
      // A run a worker holds waits for none: the queue line is for a run no live worker has.
      if (queue && !holding?.worker) process.stdout.write(t`queue: ${queue.queue}, waits for ${queue.waits_for}\n`)
      if (gate) process.stdout.write(votesText(gate))
      if (usage.calls > 0)
        process.stdout.write(
          t`model usage: ${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion = ${usage.total_tokens} tokens in ${usage.calls} call(s)${usage.cost !== undefined ? `, cost ${usage.cost} ${usage.currency ?? ''}` : ''}\n`,
        )
    }
    return {
      ...(holding ? {holding} : {}),
      ...(queue ? {queue} : {}),
      ...(gate ? {gate} : {}),
      usage,
      children,
      run: record,
      status,
      events,
      steps: snapshots.map((s) => {
        const d = s.decisions.at(-1)
        return {
          seq: s.step.seq,
          step: s.step.name,
          kind: s.step.kind,
          outcome: d?.decision ?? '',
          next_step: d?.next_step ?? null,
          attempts: s.step.attempts ?? 1,
          duration_ms: s.step.duration_ms ?? 0,
          spec_version_out: s.spec_version_out,
          errors: s.errors.length,
          ...(d?.by ? {by: d.by} : {}),
        }
      }),
    }
  }
}

/** Who has voted at the gate the run waits at, and who may still. */
function votesText(gate: NonNullable<Awaited<ReturnType<typeof gateVotes>>>): string {
  const approved = gate.votes.filter((v) => v.decision === 'go' || v.decision === 'yes' || v.decision === 'answered').length
  const voted = gate.votes.length > 0 ? gate.votes.map((v) => `${v.by.id} ${v.decision} at ${v.at}`).join(', ') : 'nobody yet'
  return t`approvals: ${approved} of ${gate.required} under the policy's approvals.${gate.rule}; voted: ${voted}; may still approve: ${gate.may_still.join(', ') || 'nobody'}\n`
}

/** Who drives the run on a shared store: a worker under its lease, or where it waits. */
function holdingText(h: Holding, status: string): string {
  // A run ended for good (not a failed one, which pipe resume redrives) goes back on no queue.
  if (!h.worker && !h.queue && h.detached_queue && (status === 'succeeded' || status === 'cancelled'))
    return t`worker: none, not queued (a detached run of ${h.detached_queue}; it has ended ${status}) (epoch ${h.epoch})\n`
  if (h.worker)
    return t`worker: ${h.worker.name ? `${h.worker.name} ` : ''}(host ${h.worker.host}, pid ${h.worker.pid}), lease until ${h.lease_until ?? '-'}, epoch ${h.epoch}\n`
  if (h.expired)
    return t`worker: none; ${h.expired.worker.name ? `${h.expired.worker.name} ` : ''}(host ${h.expired.worker.host}, pid ${h.expired.worker.pid}) held it until its lease expired at ${h.expired.lease_until}${h.queue ? ', a worker will take it over' : ''} (epoch ${h.epoch})\n`
  if (h.queue) return t`worker: none, queued on ${h.queue}, no worker yet (epoch ${h.epoch})\n`
  return t`worker: none, not queued${h.detached_queue ? ` (a detached run: answers, reviews and pipe resume put it back on ${h.detached_queue})` : ''} (epoch ${h.epoch})\n`
}
