import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {scaffoldPipeline, TEMPLATES, type ScaffoldResult} from '../config/scaffold.js'
import {line as t} from '../util/terminal-text.js'

export default class Init extends PipeCommand {
  static override summary =
    'Scaffold a pipeline from a template (model, command, foreach, agent, coding), with its policy, a pipe test file that passes offline, and a README.'
  static override description = `Writes into DIR (default: the working directory) the files of a template (--template, default model): pipeline.yaml (with a yaml-language-server $schema line pointing at pipe's schemas, so editors complete and check it), what it needs (a prompt and an output schema, a child pipeline, sample data), policy.yaml allowing exactly what it runs, pipeline.pipe-test.yaml that pipe test passes offline, and README.md with the next steps.

The model template's model step runs only with -i use_model=true, which needs a model endpoint (OPENAI_API_KEY, and OPENAI_BASE_URL for another OpenAI-compatible server). By default it is recorded as skipped, so the scaffold validates, dry-runs and runs end to end offline; its test of the model path replays a recorded reply.

Existing files are never overwritten unless --force is given: pipe init lists them and exits with E_CONFLICT.`
  static override examples = [
    {description: 'A new pipeline in ./triage', command: '<%= config.bin %> <%= command.id %> triage'},
    {
      description: 'Then check it and run it offline',
      command: 'cd triage && <%= config.bin %> validate pipeline.yaml && <%= config.bin %> run pipeline.yaml -i title="Login fails"',
    },
    {description: 'Named, in the working directory, the files written as JSON', command: '<%= config.bin %> <%= command.id %> --name issue-triage --json'},
    {
      description: 'A fan-out over files with a child pipeline, and its tests',
      command: '<%= config.bin %> <%= command.id %> csv-totals --template foreach && cd csv-totals && <%= config.bin %> test',
    },
  ]
  static override args = {dir: Args.string({description: 'Directory to scaffold into (created if missing).', default: '.'})}
  static override flags = {
    name: Flags.string({description: "The pipeline's name (default: the directory's name).", helpValue: 'NAME'}),
    force: Flags.boolean({description: 'Overwrite files that already exist.'}),
    template: Flags.string({
      description: `The starting point: ${Object.entries(TEMPLATES)
        .map(([name, what]) => `${name} (${what})`)
        .join('; ')}. Each comes with a policy allowing exactly what it runs and a pipe test file that passes offline.`,
      options: Object.keys(TEMPLATES),
      default: 'model',
      helpValue: 'NAME',
    }),
  }

  async run(): Promise<ScaffoldResult> {
    const {args, flags} = await this.parse(Init)
    const result = await scaffoldPipeline({
      dir: args.dir,
      template: flags.template,
      ...(flags.name !== undefined ? {name: flags.name} : {}),
      ...(flags.force ? {force: true} : {}),
    })
    if (!this.jsonEnabled()) {
      for (const file of result.files) process.stdout.write(t`${result.overwritten.includes(file) ? 'overwrote' : 'wrote'}  ${file}\n`)
      // Line breaks are pipe's own, outside t``: a value's line break would be shown escaped.
      const cd = args.dir === '.' ? '' : `${t`  cd ${args.dir}`}\n`
      process.stdout.write(
        `${t`\nPipeline "${result.name}" in ${result.dir}. Next:`}\n${cd}  pipe validate pipeline.yaml\n  pipe test\nREADME.md there has the rest (how to run it, and make it yours).\n`,
      )
    }
    return result
  }
}
