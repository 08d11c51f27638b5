import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {progressPrinter} from '../cli/progress.js'
import {finishQueued, finishRun, type QueuedResult} from '../cli/run-flow.js'
import type {RunResult} from '../cli/run-result.js'
import {withSignals} from '../cli/signals.js'
import {replyFlags, replyOptions} from '../cli/reply-flags.js'
import {resumeSession} from '../app/sessions/resume.js'
import {unlessDeadlineActed} from '../app/sessions/confirm-deadline.js'
import {DECISION_HELP, decisionFlag} from '../cli/decision.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/file/ids.js'

export default class Resume extends PipeCommand {
  static override summary = 'Continue a paused or interrupted run from its last snapshot, or redrive a failed or blocked one.'
  static override description = `A run paused for answers continues once they are given (--answers); a run paused for review continues with a decision (--decision). An interrupted run, or one left running by a process that no longer exists, continues where its last snapshot left it: nothing recorded is lost and nothing is run twice.

A failed or blocked run is redriven: once the cause is fixed (the model endpoint is back, the webhook accepts, the policy allows the command), the step that stopped it runs again as a new attempt with the next seq. Earlier snapshots stay as they were; the timeline records the redrive and who did it. A run that failed before any step failed (a loop bound) cannot be redriven.

A blocked run whose task (a foreach item's child run) waits for a person can go on without it: --skip KEY --note TEXT records the task skipped (who, when, why) in the run's timeline, ends its child run, and continues the run. The tasks that depend on it are not run (blocked, as for a failure) unless --run-dependents says they run as if it had succeeded. A skipped task never counts as succeeded: the foreach step ends partial (fail when no item succeeded) and its reason says how many were skipped.

The run uses the pipeline and policy it started with; if either file changed since, resume refuses. A redrive may name a changed policy with --policy FILE; its version is recorded on the run and in the timeline.`
  static override examples = [
    {description: 'Answer the clarifying questions of a paused run', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --answers answers.yaml'},
    {description: 'Approve the review', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --decision go --note "ready"'},
    {description: 'Continue after Ctrl-C or a crash', command: '<%= config.bin %> <%= command.id %> R-20261121-0001'},
    {
      description: 'Leave out task T1 of a blocked run, whose dependents are then not run',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0005 --skip T1 --note "done by hand in PR 12"',
    },
    {
      description: 'Leave out T1, and run the tasks that depend on it as if it had succeeded',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0005 --skip T1 --run-dependents --note "not needed after all"',
    },
    {
      description: 'Redrive a run that failed on a command the policy denied, under the corrected policy',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0004 --policy policy.yaml',
    },
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    answers: Flags.string({char: 'a', description: 'Answers to the pending questions (YAML, keyed by question id or spec field).', helpValue: 'FILE'}),
    decision: Flags.string({description: `Review decision: ${DECISION_HELP}.`, helpValue: 'go|hold|drop'}),
    note: Flags.string({
      description: 'Note recorded with --decision; why, with --skip (required there).',
      helpValue: 'TEXT',
      relationships: [{type: 'some', flags: ['decision', 'skip']}],
    }),
    skip: Flags.string({
      description: "A task of the blocked run to leave out: the item's key (its foreach key:, else its index). Repeatable.",
      helpValue: 'KEY',
      multiple: true,
      exclusive: ['decision', 'answers'],
    }),
    'run-dependents': Flags.boolean({description: 'With --skip: the tasks that depend on the skipped one run as if it had succeeded.', dependsOn: ['skip']}),
    policy: Flags.string({description: 'Redrive a failed or blocked run under this policy file instead of the one it ran with.', helpValue: 'FILE'}),
    ...replyFlags,
    'accept-cassette': Flags.boolean({
      description: 'The run replays a cassette that changed since it started: go on with it as it is now (recorded on the timeline).',
    }),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RunResult | QueuedResult> {
    const {args, flags} = await this.parse(Resume)
    assertId('run', args.run)
    if (flags.skip && flags.note === undefined)
      throw new PipeError('E_INVALID_ARGS', 'a skipped task needs a reason: --note TEXT is recorded with it', {
        hint: `pipe resume ${args.run} --skip ${flags.skip[0]} --note "why it can be left out"`,
      })
    const store = this.storeDir(flags.store)
    // A confirmation whose deadline passed is decided by the policy first (confirm.on_timeout).
    const outcome = await withSignals((signal) =>
      unlessDeadlineActed({cwd: process.cwd(), store, runId: args.run, signal, onProgress: progressPrinter()}, () =>
        resumeSession({
          cwd: process.cwd(),
          store,
          runId: args.run,
          signal,
          onProgress: progressPrinter(),
          ...(flags.answers ? {answers: flags.answers} : {}),
          ...(flags.policy ? {policy: flags.policy} : {}),
          ...(flags.decision !== undefined ? {decision: decisionFlag(flags.decision)!} : {}),
          ...(flags.note ? {note: flags.note} : {}),
          ...(flags.skip ? {skip: {keys: flags.skip, note: flags.note ?? '', runDependents: flags['run-dependents'] === true}} : {}),
          ...(flags['accept-cassette'] ? {acceptCassette: true} : {}),
          ...replyOptions(flags, process.cwd()),
        }),
      ),
    )
    const session = {cwd: process.cwd(), store, onProgress: progressPrinter()}
    return finishQueued(outcome, session, this.jsonEnabled()) ?? finishRun(outcome, session, this.jsonEnabled(), flags.store)
  }
}
