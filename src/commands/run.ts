import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import type {InferredFlags} from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import type {RunResult} from '../cli/run-result.js'
import {planSession, type RunPlan} from '../app/sessions/plan.js'
import {startSession} from '../app/sessions/start.js'
import type {StartSession} from '../app/sessions/shared.js'
import {replyFlags, replyOptions} from '../cli/reply-flags.js'
import {DECISION_HELP, decisionFlag} from '../cli/decision.js'
import {progressPrinter} from '../cli/progress.js'
import {finishRun} from '../cli/run-flow.js'
import {withSignals} from '../cli/signals.js'
import {renderPlan} from '../cli/views.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/file/ids.js'
import {askInputs, canPrompt} from '../cli/interactive.js'
import {jsonText, visible} from '../util/terminal-text.js'
import {storeDir, type CommandOutput} from '../cli/command-io.js'
import type {Detached} from '../app/sessions/detach.js'
import {writeErr, writeOut} from '../cli/std-streams.js'
import {checkQueue} from '../cli/queue-flag.js'

export default class Run extends PipeCommand {
  static override summary = 'Run a pipeline on a requirement, leaving a snapshot per step and a new spec version per change.'
  static override description = `The run walks the pipeline's graph from its start step. Progress goes to stderr; the result to stdout (one JSON document with --json).

A run that needs answers or a review decision that were not given stops in awaiting_input, exits with code 10, and prints the command that continues it. Ctrl-C marks the run interrupted; pipe resume continues it from its last snapshot.`
  static override examples = [
    {
      description: 'The default pipeline on a document, approving the review up front',
      command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --input examples/full-prd.md --decision go',
    },
    {
      description: 'A one-sentence requirement with its clarifying answers',
      command:
        '<%= config.bin %> <%= command.id %> pipelines/default.yaml --input examples/one-sentence.txt --answers examples/one-sentence.answers.yaml --decision go',
    },
    {
      description: 'From stdin, result as JSON',
      command: 'echo "Users must be able to reset their password" | <%= config.bin %> <%= command.id %> pipelines/default.yaml --input - --json',
    },
    {
      description: 'Inline text, own store',
      command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --text "Build a CSV export" --store /tmp/pipe-store',
    },
    {description: 'A pipeline with typed inputs', command: '<%= config.bin %> <%= command.id %> release-notes.yaml -i since=v1.2 -i max_items=5'},
    {
      description: 'Queue one run per line of a JSONL file of typed inputs for pipe worker, each run id in the JSON array printed',
      command: '<%= config.bin %> <%= command.id %> release-notes.yaml --detach --inputs-file runs.jsonl --store postgres://pipe@db.example:5432/pipe --json',
    },
    {
      description: 'Check everything and show the plan without running',
      command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --input examples/full-prd.md --dry-run',
    },
    {
      description: 'Record the model replies of a run against an endpoint',
      command: 'OPENAI_BASE_URL=http://127.0.0.1:11434/v1 <%= config.bin %> <%= command.id %> release-notes.yaml -i since=v1.2 --record notes.cassette.jsonl',
    },
    {
      description: 'Run it again offline, answered by the recording (no key, no network)',
      command: '<%= config.bin %> <%= command.id %> release-notes.yaml -i since=v1.2 --replay notes.cassette.jsonl',
    },
  ]
  static override args = {pipeline: Args.string({description: 'Pipeline file.', required: true})}
  static override flags = {
    input: Flags.string({description: 'Requirement file, or - to read standard input.', helpValue: 'FILE|-'}),
    set: Flags.string({
      char: 'i',
      description: "A value for one of the pipeline's typed inputs (repeatable): -i since=v1.2 -i max_items=5.",
      helpValue: 'NAME=VALUE',
      multiple: true,
    }),
    inputs: Flags.string({description: "A YAML file of values for the pipeline's typed inputs; -i wins over it.", helpValue: 'FILE'}),
    text: Flags.string({char: 't', description: 'The requirement as an argument.', helpValue: 'TEXT'}),
    feature: Flags.string({description: 'Feature id to attach the run to (F-YYYY-NNN); a new one is allocated when omitted.', helpValue: 'F-YYYY-NNN'}),
    'context-ref': Flags.string({
      description:
        "The project context reference: the project and the version of its context this run works from; recorded in the run and in every snapshot's inputs.context_ref.project.",
      helpValue: 'PROJECT@VERSION',
    }),
    answers: Flags.string({char: 'a', description: 'Answers to clarifying questions (YAML, keyed by question id or spec field).', helpValue: 'FILE'}),
    decision: Flags.string({description: `Review decision for the review step: ${DECISION_HELP}.`, helpValue: 'go|hold|drop'}),
    note: Flags.string({description: 'Note recorded with --decision.', helpValue: 'TEXT', dependsOn: ['decision']}),
    policy: Flags.string({
      description: 'Policy file (default: the nearest policy.yaml from the working directory up to the repository root, else the built-in policy).',
      helpValue: 'FILE',
    }),
    provider: Flags.string({
      description: 'Model provider for model steps: auto picks openai when OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline.',
      options: ['auto', 'offline', 'openai'],
    }),
    ...replyFlags,
    store: PipeCommand.storeFlag,
    'dry-run': Flags.boolean({description: 'Check the pipeline, policy, input and answers and print the plan; run nothing, write nothing.'}),
    detach: Flags.boolean({
      description: 'Check everything, create the run and put it on a queue of the PostgreSQL store for pipe worker; print its id and exit 0.',
    }),
    queue: Flags.string({description: 'The queue --detach puts the run on (default: default).', helpValue: 'NAME', dependsOn: ['detach']}),
    'inputs-file': Flags.string({
      description:
        "With --detach: queue one run per line of FILE, each line a JSON object of the pipeline's typed inputs; every line is checked before anything is queued (a bad line is refused by its number).",
      helpValue: 'FILE',
      dependsOn: ['detach'],
    }),
  }

  async run(): Promise<RunResult | RunPlan | Detached | Detached[]> {
    const {args, flags} = await this.parse(Run)
    const output = {json: this.jsonEnabled(), jsonPrinted: false}
    try {
      return await runCommand(args, flags, output)
    } finally {
      this.jsonPrinted = output.jsonPrinted
    }
  }
}

/** The flags of `pipe run`, as parsed from the declarations above. */
type RunFlags = InferredFlags<typeof Run.flags>

async function runCommand(args: {pipeline: string}, flags: RunFlags, output: CommandOutput): Promise<RunResult | RunPlan | Detached | Detached[]> {
  if (flags.feature !== undefined) assertId('feature', flags.feature, '--feature')
  const store = storeDir(flags.store)
  for (const pair of flags.set ?? []) {
    // -i used to name the requirement file; say so rather than report an odd input name.
    if (!pair.includes('=')) {
      throw new PipeError('E_INVALID_ARGS', `-i ${pair}: -i sets a pipeline input and takes NAME=VALUE`, {
        hint: `To run on a requirement file, use --input ${pair}; to set an input, write -i NAME=VALUE.`,
      })
    }
  }
  const options: StartSession = {
    cwd: process.cwd(),
    store,
    pipeline: args.pipeline,
    stdin: readStdin,
    ...(flags.input !== undefined ? {input: flags.input} : {}),
    ...(flags.text !== undefined ? {text: flags.text} : {}),
    ...(flags.feature ? {feature: flags.feature} : {}),
    ...(flags['context-ref'] !== undefined ? {contextRef: flags['context-ref']} : {}),
    ...(flags.answers ? {answers: flags.answers} : {}),
    ...(flags.decision !== undefined ? {decision: decisionFlag(flags.decision)!} : {}),
    ...(flags.note ? {note: flags.note} : {}),
    ...(flags.policy ? {policy: flags.policy} : {}),
    ...(flags.provider ? {provider: flags.provider as 'auto' | 'offline' | 'openai'} : {}),
    ...(flags.set ? {inputValues: flags.set} : {}),
    ...(flags.inputs ? {inputsFile: flags.inputs} : {}),
    ...replyOptions(flags, process.cwd()),
    ...(canPrompt(output.json) ? {askInputs: (missing: Parameters<typeof askInputs>[0]) => askInputs(missing)} : {}),
  }
  if (flags['dry-run']) {
    const plan = await planSession(options)
    if (!output.json) writeOut(renderPlan(plan))
    if (plan.denied.length > 0) {
      if (output.json) {
        writeOut(`${jsonText(plan)}\n`)
        output.jsonPrinted = true
      }
      throw new PipeError('E_POLICY_DENIED', `the policy denies ${plan.denied.length} command(s) of the pipeline; the run would fail at them`, {
        hint: `Add the commands to allowed_commands in ${plan.policy.file ?? 'a policy.yaml (the built-in policy allows no command; pipe policy init writes a starter)'}, or change the steps; the plan lists each at its line.`,
      })
    }
    return plan
  }
  if (flags.detach) {
    const {detachRuns} = await import('../app/sessions/detach.js')
    const batch = flags['inputs-file']
    const runs = await detachRuns({...options, queue: checkQueue(flags.queue ?? 'default'), ...(batch !== undefined ? {batch} : {})})
    if (runs[0]?.warning) writeErr(`warning: ${visible(runs[0].warning)}\n`)
    if (!output.json)
      writeOut(
        runs
          .map(
            (detached) =>
              `${detached.run_id} queued on ${detached.queue} for workspace ${detached.workspace}: a pipe worker --store … serving that workspace drives it; pipe runs show ${detached.run_id} follows it\n`,
          )
          .join(''),
      )
    // A batch answers with every run, in the order of its lines; one run as before.
    return batch !== undefined ? runs : runs[0]!
  }
  const outcome = await withSignals((signal) => startSession({...options, signal, onProgress: progressPrinter()}))
  return finishRun(outcome, {cwd: process.cwd(), store, onProgress: progressPrinter()}, output.json, flags.store)
}

function readStdin(): NodeJS.ReadStream {
  if (process.stdin.isTTY) process.stderr.write('Reading the requirement from standard input; end it with Ctrl-D.\n')
  return process.stdin
}
