import * as Args from '../../cli/args.js'
import {PipeCommand} from '../../cli/base-command.js'
import {renderDiagnostics} from '../../cli/views.js'
import {resolvePipeline, type StepSource} from '../../config/resolve.js'
import {kindCatalog} from '../../steps/registry.js'
import {PipeError} from '../../errors.js'
import {visible} from '../../util/terminal-text.js'

export interface PipelineResolveResult {
  pipeline: Record<string, unknown>
  sources: Record<string, StepSource>
  files: string[]
}

export default class PipelineResolve extends PipeCommand {
  static override summary = 'Print a pipeline as composed from the pipelines it extends and its overlay, each step with the file:line it comes from.'
  static override description = `The output is the pipeline pipe validates and runs: the base's steps and settings, this file's overrides and steps, the overlay applied. A comment above each step names the file and line that wrote it (an overlay entry's line for inserted and replacing steps). The composition is checked (each file's schema, the overlay's step ids, extends cycles), not the graph: pipe validate FILE checks that too.`
  static override examples = [
    {description: 'The composed pipeline as YAML', command: '<%= config.bin %> <%= command.id %> examples/triage/pipeline.yaml'},
    {
      description: 'As JSON: {pipeline, sources: {stepId: {file, line}}, files}',
      command: '<%= config.bin %> <%= command.id %> examples/triage/pipeline.yaml --json',
    },
  ]
  static override args = {file: Args.string({description: 'Pipeline file.', required: true})}

  async run(): Promise<PipelineResolveResult> {
    const {args} = await this.parse(PipelineResolve)
    const result = await resolvePipeline(args.file, kindCatalog)
    if (!result.ok) {
      process.stderr.write(renderDiagnostics(result.diagnostics))
      throw new PipeError('E_CONFIG', `${args.file} does not compose into a pipeline (${result.diagnostics.length} error(s))`, {
        hint: `Fix the errors listed above; pipe validate ${args.file} checks the rest.`,
      })
    }
    const {pipeline, sources, files, yaml} = result.resolved
    if (!this.jsonEnabled()) process.stdout.write(visible(yaml))
    return {pipeline, sources, files}
  }
}
