import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {renderDiagnostics} from '../cli/views.js'
import {outcomeStops, renderGraph, type GraphFormat, type OutcomeStop, type PathTaken} from '../config/graph-render.js'
import {failureOutcomes} from '../config/catalog.js'
import {allEdges} from '../config/graph.js'
import {loadPipeline} from '../config/pipeline.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/file/ids.js'
import {kindCatalog} from '../steps/registry.js'
import {PipeCommand} from '../cli/base-command.js'
import {visible} from '../util/terminal-text.js'

export interface GraphResult {
  pipeline: string
  format: GraphFormat
  steps: Array<{id: string; kind: string; outcomes: string[]; failure_outcomes: string[]; max_iterations?: number | string}>
  edges: Array<{from: string; to: string; label: string}>
  /** Outcomes no edge takes that end the run (failed, cancelled) or make it wait at the step. */
  stops: OutcomeStop[]
  /** With --run: the run, how often each step ran, and the edges it took with their counts. */
  run?: {id: string; status: string; steps: Record<string, number>}
  taken?: PathTaken['taken']
  text: string
}

export default class Graph extends PipeCommand {
  static override summary = "Draw a pipeline's step graph as a Mermaid flowchart or Graphviz dot."
  static override description = `Every step is drawn (gates as diamonds, reviews as parallelograms, loop-bounded steps dashed with their max_iterations), and every transition is labelled with the outcome that takes it. Outcomes that take no transition but stop the run are drawn dotted: a failure outcome with no route to a "failed" node, a review's drop to "cancelled", its hold back to the review (it waits).

With --run RUN (a run of this very pipeline file: same name and content), the steps the run ran are filled and say how often they ran, and the edges it took are drawn thick and coloured with how often it took them (a loop shows its count); an edge it took that the graph does not draw (an unrouted error, a loop bound with no on_exhausted) is added, dotted. --json adds run and taken: [{from, to, label, count}].`
  static override examples = [
    {description: 'Mermaid, for a Markdown file or a GitHub comment', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --format mermaid'},
    {description: 'Graphviz, rendered to SVG', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --format dot | dot -Tsvg > pipeline.svg'},
    {
      description: 'The path a run took, coloured, with loop counts',
      command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml --run R-20261121-0001',
    },
  ]
  static override args = {file: Args.string({description: 'Pipeline file.', required: true})}
  static override flags = {
    format: Flags.string({char: 'f', description: 'Output format.', options: ['mermaid', 'dot'], default: 'mermaid'}),
    run: Flags.string({
      description: 'Colour the path this run of the pipeline took: the steps it ran (with how often) and the edges it took (with counts).',
      helpValue: 'RUN',
    }),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<GraphResult> {
    const {args, flags} = await this.parse(Graph)
    const result = await loadPipeline(args.file, kindCatalog)
    if (!result.ok) {
      process.stderr.write(renderDiagnostics(result.diagnostics))
      throw new PipeError('E_CONFIG', `${args.file} is not a valid pipeline (${result.diagnostics.length} error(s))`, {
        hint: `Run pipe validate ${args.file} and fix the errors first.`,
      })
    }
    const pipeline = result.loaded.pipeline
    const format = flags.format as GraphFormat
    let taken: PathTaken | undefined
    if (flags.run !== undefined) {
      assertId('run', flags.run, '--run')
      const {runPath} = await import('../app/run-path.js')
      taken = await runPath({store: this.storeDir(flags.store), cwd: process.cwd(), runId: flags.run, pipeline: result.loaded})
    }
    const text = renderGraph(pipeline, format, kindCatalog, taken)
    if (!this.jsonEnabled()) process.stdout.write(visible(text))
    return {
      pipeline: pipeline.name,
      format,
      steps: pipeline.steps.map((s) => ({
        id: s.id,
        kind: s.kind,
        outcomes: [...(kindCatalog[s.kind]?.outcomes(s) ?? []), 'error'],
        failure_outcomes: [...failureOutcomes(kindCatalog, s), 'error'],
        ...(s.max_iterations !== undefined ? {max_iterations: s.max_iterations} : {}),
      })),
      edges: allEdges(pipeline, kindCatalog),
      stops: outcomeStops(pipeline, kindCatalog),
      ...(taken ? {run: {id: taken.run_id, status: taken.status, steps: taken.steps}, taken: taken.taken} : {}),
      text,
    }
  }
}
