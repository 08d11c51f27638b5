import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {DECISION_HELP, decisionFlag} from '../cli/decision.js'
import {progressPrinter} from '../cli/progress.js'
import {finishRun} from '../cli/run-flow.js'
import type {RunResult} from '../cli/run-result.js'
import {withSignals} from '../cli/signals.js'
import {replyFlags, replyOptions} from '../cli/reply-flags.js'
import {checkGates, checkModels, type GateCheck, type ModelCheck} from '../app/replay-check.js'
import {loadPipelineOrThrow} from '../app/sessions/shared.js'
import {replaySession} from '../app/sessions/replay.js'
import {PipeError} from '../errors.js'
import {openStore} from '../store/open.js'
import {assertId} from '../store/file/ids.js'
import {jsonText, line as t, visible} from '../util/terminal-text.js'

export default class Replay extends PipeCommand {
  static override summary = 'Re-run a run from one of its steps, or re-check every gate result it recorded.'
  static override description = `--from STEP starts a new run, linked to the original (replay_of), that forks from the original's history just before STEP's first snapshot (or the snapshot --seq names): the same input, the same spec version in, the same answers. Its snapshots chain on from the original's. A review decision is not carried over: give --decision or review it when it pauses.

--check re-evaluates every gate step of the run from the spec version it read and compares the result with the recorded one, byte for byte (gate results are pure functions of the spec and the gate configuration). It also runs every model step (kind: model) whose replies are in the store's reply cache again, answered only from the cache: each request must hash as the recorded one did (a changed prompt shows as a diff) and the output must be the recorded one. Exit code 4 on any difference.

--record, --replay, --replay-missing and --cache say where the replayed run's model replies come from, as for pipe run; a replay reuses the store's reply cache unless --cache off.`
  static override examples = [
    {description: 'Replay from the gates', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --from validate_gates --decision go'},
    {description: 'Check that every recorded gate result is reproducible', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --check'},
  ]
  static override args = {run: Args.string({description: 'The original run (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    from: Flags.string({description: 'Replay from the first snapshot of this step.', helpValue: 'STEP', exclusive: ['seq', 'check']}),
    seq: Flags.integer({description: 'Replay from the snapshot with this seq.', min: 1, exclusive: ['from', 'check']}),
    check: Flags.boolean({description: 'Re-evaluate every gate and compare with the recorded results; runs nothing.', exclusive: ['from', 'seq']}),
    answers: Flags.string({char: 'a', description: 'Answers to add to the original ones.', helpValue: 'FILE'}),
    decision: Flags.string({description: `Review decision for the replayed run: ${DECISION_HELP}.`, helpValue: 'go|hold|drop'}),
    note: Flags.string({description: 'Note recorded with --decision.', helpValue: 'TEXT', dependsOn: ['decision']}),
    ...replyFlags,
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RunResult | CheckResult> {
    const {args, flags} = await this.parse(Replay)
    assertId('run', args.run)
    if (flags.from !== undefined) assertId('step', flags.from, '--from')
    const store = this.storeDir(flags.store)
    if (flags.check) return this.check(args.run, store)
    if (flags.from === undefined && flags.seq === undefined)
      throw new PipeError('E_INVALID_ARGS', 'say where to replay from, or ask for a check', {
        hint: `pipe replay ${args.run} --from STEP, or --seq N, or --check`,
      })
    const session = {cwd: process.cwd(), store, onProgress: progressPrinter()}
    const outcome = await withSignals((signal) =>
      replaySession({
        ...session,
        signal,
        runId: args.run,
        ...(flags.from !== undefined ? {from: flags.from} : {}),
        ...(flags.seq !== undefined ? {seq: flags.seq} : {}),
        ...(flags.answers ? {answers: flags.answers} : {}),
        ...(flags.decision !== undefined ? {decision: decisionFlag(flags.decision)!} : {}),
        ...(flags.note ? {note: flags.note} : {}),
        ...replyOptions(flags, process.cwd()),
      }),
    )
    return finishRun(outcome, session, this.jsonEnabled(), flags.store)
  }

  private async check(runId: string, storeDir: string): Promise<CheckResult> {
    const store = await openStore(storeDir, 'existing')
    const record = await store.readRun(runId)
    const pipeline = await loadPipelineOrThrow(record.pipeline.path)
    if (pipeline.hash !== record.pipeline.hash)
      throw new PipeError('E_CONFLICT', `the pipeline ${record.pipeline.path} changed since run ${runId}`, {
        hint: 'The check needs the gate configuration as it was; restore the pipeline file.',
      })
    const gates = await checkGates(store, runId, pipeline)
    const models = await checkModels(store, record, pipeline)
    const same = gates.every((g) => g.same) && models.every((m) => m.same)
    const result = {run_id: runId, same, gates, models}
    if (!this.jsonEnabled()) {
      for (const g of gates)
        process.stdout.write(t`#${g.seq} ${g.step} on ${g.spec_version ?? '-'}: ${g.same ? 'same' : `DIFFERENT${g.error ? ` (${g.error})` : ''}`}\n`)
      process.stdout.write(
        gates.length === 0 ? 'the run has no gate steps\n' : gates.every((g) => g.same) ? `all ${gates.length} gate result(s) reproduced exactly\n` : '',
      )
      for (const m of models) {
        const what = t`#${m.seq} ${m.step} (${m.kind}, ${m.calls} model call(s))`
        // A difference is several lines of a request or a reply: its line breaks stay, other controls are escaped.
        process.stdout.write(
          visible(
            `${what}: ${!m.checked ? `not checked: ${m.error}` : m.same ? 'same output from the same requests' : `DIFFERENT${m.error ? `\n${m.error.replace(/^/gm, '    ')}` : ' (the output differs)'}`}\n`,
          ),
        )
      }
      const checked = models.filter((m) => m.checked)
      if (checked.length > 0 && checked.every((m) => m.same)) process.stdout.write(`all ${checked.length} model step(s) reproduced from the reply cache\n`)
    }
    if (!same) {
      if (this.jsonEnabled()) {
        process.stdout.write(`${jsonText(result)}\n`)
        this.jsonPrinted = true
      }
      const parts = [
        ...(gates.some((g) => !g.same) ? [`${gates.filter((g) => !g.same).length} gate result(s)`] : []),
        ...(models.some((m) => !m.same) ? [`${models.filter((m) => !m.same).length} model step(s)`] : []),
      ]
      throw new PipeError('E_CONFLICT', `${parts.join(' and ')} of ${runId} differ from a fresh evaluation`, {
        hint: 'The spec version, the gate configuration, a prompt file or an output schema changed; pipe audit verify checks the records.',
      })
    }
    return result
  }
}

interface CheckResult {
  run_id: string
  same: boolean
  gates: GateCheck[]
  /** Model steps run again from the store's reply cache. */
  models: ModelCheck[]
}
