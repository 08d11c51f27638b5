import {Args, Flags} from '@oclif/core'
import {formatDiagnostic} from '../config/diagnostics.js'
import {outcomeStops, renderGraph, type GraphFormat, type OutcomeStop} from '../config/graph-render.js'
import {allEdges} from '../config/graph.js'
import {loadPipeline} from '../config/pipeline.js'
import {PipeError} from '../errors.js'
import {kindCatalog} from '../steps/registry.js'
import {PipeCommand} from '../cli/base-command.js'

export interface GraphResult {
  pipeline: string
  format: GraphFormat
  steps: Array<{id: string; kind: string; outcomes: string[]; failure_outcomes: string[]; max_iterations?: number}>
  edges: Array<{from: string; to: string; label: string}>
  /** Outcomes no edge takes that end the run (failed, cancelled) or make it wait at the step. */
  stops: OutcomeStop[]
  text: string
}

export default class Graph extends PipeCommand {
  static override summary = "Draw a pipeline's step graph as a Mermaid flowchart or Graphviz dot."
  static override description = 'Every step is drawn (gates as diamonds, reviews as parallelograms, loop-bounded steps dashed with their max_iterations), and every transition is labelled with the outcome that takes it. Outcomes that take no transition but stop the run are drawn dotted: a failure outcome with no route to a "failed" node, a review\'s drop to "cancelled", its hold back to the review (it waits).'
  static override examples = [
    {description: 'Mermaid, for a Markdown file or a GitHub comment', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --format mermaid'},
    {description: 'Graphviz, rendered to SVG', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --format dot | dot -Tsvg > pipeline.svg'},
  ]
  static override args = {file: Args.string({description: 'Pipeline file.', required: true})}
  static override flags = {
    format: Flags.string({char: 'f', description: 'Output format.', options: ['mermaid', 'dot'], default: 'mermaid'}),
  }

  async run(): Promise<GraphResult> {
    const {args, flags} = await this.parse(Graph)
    const result = await loadPipeline(args.file, kindCatalog)
    if (!result.ok) {
      for (const d of result.diagnostics) process.stderr.write(`${formatDiagnostic(d)}\n`)
      throw new PipeError('E_CONFIG', `${args.file} is not a valid pipeline (${result.diagnostics.length} error(s))`, {hint: `Run pipe validate ${args.file} and fix the errors first.`})
    }
    const pipeline = result.loaded.pipeline
    const format = flags.format as GraphFormat
    const text = renderGraph(pipeline, format, kindCatalog)
    if (!this.jsonEnabled()) process.stdout.write(text)
    return {
      pipeline: pipeline.name,
      format,
      steps: pipeline.steps.map((s) => ({
        id: s.id,
        kind: s.kind,
        outcomes: [...(kindCatalog[s.kind]?.outcomes(s) ?? []), 'error'],
        failure_outcomes: [...(kindCatalog[s.kind]?.failures ?? []), 'error'],
        ...(s.max_iterations !== undefined ? {max_iterations: s.max_iterations} : {}),
      })),
      edges: allEdges(pipeline),
      stops: outcomeStops(pipeline, kindCatalog),
      text,
    }
  }
}
