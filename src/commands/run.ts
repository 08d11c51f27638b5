import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {PipeCommand} from '../cli/base-command.js'
import type {RunResult} from '../cli/run-result.js'
import type {RunPlan} from '../engine/sessions/plan.js'
import {replyFlags} from '../cli/reply-flags.js'
import {DECISION_HELP} from '../cli/decision.js'
import {runCommand} from '../cli/run-command.js'

export default class Run extends PipeCommand {
  static override summary = 'Run a pipeline on a requirement, leaving a snapshot per step and a new spec version per change.'
  static override description = `The run walks the pipeline's graph from its start step. Progress goes to stderr; the result to stdout (one JSON document with --json).

A run that needs answers or a review decision that were not given stops in awaiting_input, exits with code 10, and prints the command that continues it. Ctrl-C marks the run interrupted; pipe resume continues it from its last snapshot.`
  static override examples = [
    {description: 'The default pipeline on a document, approving the review up front', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --input examples/full-prd.md --decision go'},
    {description: 'A one-sentence requirement with its clarifying answers', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --input examples/one-sentence.txt --answers examples/one-sentence.answers.yaml --decision go'},
    {description: 'From stdin, result as JSON', command: 'echo "Users must be able to reset their password" | <%= config.bin %> <%= command.id %> pipelines/default.yaml --input - --json'},
    {description: 'Inline text, own store', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --text "Build a CSV export" --store /tmp/pipe-store'},
    {description: 'A pipeline with typed inputs', command: '<%= config.bin %> <%= command.id %> release-notes.yaml -i since=v1.2 -i max_items=5'},
    {description: 'Check everything and show the plan without running', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --input examples/full-prd.md --dry-run'},
    {description: 'Record the model replies of a run against an endpoint', command: 'OPENAI_BASE_URL=http://127.0.0.1:11434/v1 <%= config.bin %> <%= command.id %> release-notes.yaml -i since=v1.2 --record notes.cassette.jsonl'},
    {description: 'Run it again offline, answered by the recording (no key, no network)', command: '<%= config.bin %> <%= command.id %> release-notes.yaml -i since=v1.2 --replay notes.cassette.jsonl'},
  ]
  static override args = {pipeline: Args.string({description: 'Pipeline file.', required: true})}
  static override flags = {
    input: Flags.string({description: 'Requirement file, or - to read standard input.', helpValue: 'FILE|-'}),
    set: Flags.string({char: 'i', description: "A value for one of the pipeline's typed inputs (repeatable): -i since=v1.2 -i max_items=5.", helpValue: 'NAME=VALUE', multiple: true}),
    inputs: Flags.string({description: "A YAML file of values for the pipeline's typed inputs; -i wins over it.", helpValue: 'FILE'}),
    text: Flags.string({char: 't', description: 'The requirement as an argument.', helpValue: 'TEXT'}),
    feature: Flags.string({description: 'Feature id to attach the run to (F-YYYY-NNN); a new one is allocated when omitted.', helpValue: 'F-YYYY-NNN'}),
    answers: Flags.string({char: 'a', description: 'Answers to clarifying questions (YAML, keyed by question id or spec field).', helpValue: 'FILE'}),
    decision: Flags.string({description: `Review decision for the review step: ${DECISION_HELP}.`, helpValue: 'go|hold|drop'}),
    note: Flags.string({description: 'Note recorded with --decision.', helpValue: 'TEXT', dependsOn: ['decision']}),
    policy: Flags.string({description: 'Policy file (default: the nearest policy.yaml from the working directory up to the repository root, else the built-in policy).', helpValue: 'FILE'}),
    provider: Flags.string({description: 'Model provider for model steps: auto picks openai when OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline.', options: ['auto', 'offline', 'openai']}),
    ...replyFlags,
    store: PipeCommand.storeFlag,
    'dry-run': Flags.boolean({description: 'Check the pipeline, policy, input and answers and print the plan; run nothing, write nothing.'}),
  }

  async run(): Promise<RunResult | RunPlan> {
    const {args, flags} = await this.parse(Run)
    const output = {json: this.jsonEnabled(), jsonPrinted: false}
    try {
      return await runCommand(args, flags, output)
    } finally {
      this.jsonPrinted = output.jsonPrinted
    }
  }
}
