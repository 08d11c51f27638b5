import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import {PipeCommand} from '../../cli/base-command.js'
import {renderSnapshot} from '../../cli/views.js'
import {PipeError} from '../../errors.js'
import {openStore} from '../../store/open.js'
import type {Snapshot} from '../../types/snapshot.js'
import {assertId} from '../../store/file/ids.js'
import {ReplyCache} from '../../store/replies.js'
import {visible} from '../../util/terminal-text.js'
import {modelCalls, type ModelCallView} from '../../view/run-data.js'

export interface PromptsShown {
  seq: number
  step: string
  kind: string
  calls: ModelCallView[]
}

function contentText(content: unknown): string {
  return typeof content === 'string' ? content : content === null || content === undefined ? '' : JSON.stringify(content, null, 2)
}

/** Whether every message of `earlier` opens `later` (an agent's requests, each the conversation so far). */
function opens(earlier: ModelCallView, later: ModelCallView): boolean {
  const a = earlier.request?.messages ?? []
  const b = later.request?.messages ?? []
  return earlier.missing === undefined && later.missing === undefined && a.length < b.length && a.every((m, i) => JSON.stringify(m) === JSON.stringify(b[i]))
}

function renderPrompts(shown: PromptsShown[]): string {
  const out: string[] = []
  for (const s of shown) {
    const last = s.calls.at(-1)!
    s.calls.forEach((c, i) => {
      out.push(`#${s.seq} ${s.step} (${s.kind})  request ${i + 1} of ${s.calls.length}  ${c.key}  answered from ${c.source}`)
      if (c.missing !== undefined) {
        out.push(`  (the prompt is not shown: ${c.missing})`, '')
        return
      }
      // An agent's every request repeats the conversation so far: printed whole each time, twenty
      // turns were twenty copies. The last request holds it all, each earlier reply in its place.
      if (c !== last && opens(c, last)) {
        const n = c.request?.messages.length ?? 0
        out.push(`  (its ${n} message(s) are the first ${n} of request ${s.calls.length}, below; its reply is the message after them)`, '')
        return
      }
      for (const m of c.request?.messages ?? []) {
        out.push(`--- ${m.role}${typeof m.tool_call_id === 'string' ? ` (result of ${m.tool_call_id})` : ''}`)
        if (contentText(m.content) !== '') out.push(contentText(m.content))
        if (m.tool_calls !== undefined) out.push(`tool calls: ${JSON.stringify(m.tool_calls)}`)
      }
      type Said = {content?: unknown; tool_calls?: unknown}
      const stored = c.reply as {choices?: Array<{message?: Said}>; message?: Said} | null
      const reply = stored?.choices?.[0]?.message ?? stored?.message
      out.push('--- reply')
      if (reply) {
        if (contentText(reply.content) !== '') out.push(contentText(reply.content))
        if (reply.tool_calls !== undefined) out.push(`tool calls: ${JSON.stringify(reply.tool_calls)}`)
      } else out.push(JSON.stringify(c.reply, null, 2))
      out.push('')
    })
  }
  return `${out.join('\n')}\n`
}

export default class SnapshotShow extends PipeCommand {
  static override summary = 'Show what steps of a run took in, gave out and decided, and why.'
  static override description = `Without --step or --seq every snapshot of the run is shown. The human view shows the step, its timings, inputs, outputs, gate results, decisions with their reason and next step, evidence and errors.

With --json the records are printed exactly as stored (valid against schemas/snapshot.schema.json): one object for --seq, else a list.`
  static override examples = [
    {description: 'Why did the gates fail?', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --step validate_gates'},
    {description: 'One snapshot, as stored', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --seq 3 --json'},
    {
      description: 'What a model step was asked, exactly as sent, and what it replied',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --step compile --prompt',
    },
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    step: Flags.string({char: 's', description: 'Only snapshots of this step (every iteration).', exclusive: ['seq'], helpValue: 'NAME'}),
    seq: Flags.integer({description: 'Only the snapshot with this sequence number.', exclusive: ['step'], min: 1}),
    prompt: Flags.boolean({
      description:
        "Instead of the snapshot, the messages each model request of the step sent (from the store's reply cache) and the reply; with --json, [{seq, step, kind, calls: [{key, source, request, reply}]}].",
      default: false,
    }),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<Snapshot | Snapshot[] | PromptsShown[]> {
    const {args, flags} = await this.parse(SnapshotShow)
    assertId('run', args.run)
    if (flags.step !== undefined) assertId('step', flags.step, '--step')
    const store = await openStore(this.storeDir(flags.store), 'existing')
    await store.readRun(args.run)
    const all = await store.readSnapshots(args.run)
    let chosen = all
    if (flags.seq !== undefined) chosen = all.filter((s) => s.step.seq === flags.seq)
    if (flags.step !== undefined) chosen = all.filter((s) => s.step.name === flags.step)
    if (chosen.length === 0) {
      const steps = [...new Set(all.map((s) => s.step.name))]
      const what = flags.seq !== undefined ? `seq ${flags.seq}` : flags.step !== undefined ? `step "${flags.step}"` : 'any step'
      throw new PipeError('E_NOT_FOUND', `run ${args.run} has no snapshot for ${what}`, {
        hint: all.length ? `It has seq 1-${all.length}; steps: ${steps.join(', ')}.` : 'The run has not finished a step yet (pipe runs show shows its state).',
      })
    }
    if (flags.prompt) {
      const cache = new ReplyCache(store.root)
      const shown: PromptsShown[] = []
      for (const s of chosen)
        if ((s.meta.model_calls ?? []).length > 0) shown.push({seq: s.step.seq, step: s.step.name, kind: s.step.kind, calls: await modelCalls(cache, s)})
      if (shown.length === 0) {
        const which = flags.step !== undefined ? `step "${flags.step}"` : flags.seq !== undefined ? `seq ${flags.seq}` : 'any step'
        throw new PipeError('E_NOT_FOUND', `run ${args.run} has no model request recorded for ${which}`, {
          hint: 'Only model and agent steps that asked a model endpoint (live, a cassette or the reply cache) record their requests; the offline provider asks none. pipe snapshot show RUN lists what each step did.',
        })
      }
      if (!this.jsonEnabled()) process.stdout.write(visible(renderPrompts(shown)))
      return shown
    }
    if (!this.jsonEnabled()) process.stdout.write(chosen.map(renderSnapshot).join('\n'))
    return flags.seq !== undefined ? chosen[0]! : chosen
  }
}
