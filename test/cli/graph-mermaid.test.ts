/**
 * What `pipe graph` prints in Mermaid is read by Mermaid itself: the real parser (the `mermaid`
 * package, under jsdom) parses the drawing of every pipeline shipped in pipelines/ and examples/, the
 * drawings of real runs with --run, and drawings whose labels hold every character that means
 * something to Mermaid. Parsing is not enough: each label must come back as the text pipe meant, so
 * the test reads the parsed labels and decodes Mermaid's entity codes the way its renderer does.
 */
import {expect} from 'chai'
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {parse as parseYaml} from 'yaml'
import {renderGraph, type PathTaken} from '../../src/config/graph-render.js'
import {allEdges} from '../../src/config/graph.js'
import {loadPipeline} from '../../src/config/pipeline.js'
import type {KindCatalog} from '../../src/config/kind-contract.js'
import {kindCatalog} from '../../src/steps/registry.js'
import type {Pipeline} from '../../src/types/pipeline.js'
import {visible} from '../../src/util/terminal-text.js'
import {defaultPipeline, examples, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

// One `pipe graph` process per drawing that the CLI prints (a pipeline's, a run's path, the hostile
// ids' and labels'); the runs that make those paths, the --json graph and the further drawings run
// in this process (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).

interface Parsed {
  /** Each node's label as Mermaid will show it, by node id. */
  nodes: Map<string, string>
  edges: Array<{from: string; to: string; text: string}>
}

interface MermaidApi {
  initialize(config: {startOnLoad: boolean}): void
  parse(text: string): Promise<unknown>
  mermaidAPI: {getDiagramFromText(text: string): Promise<{db: FlowDb}>}
}
interface FlowDb {
  getVertices(): Map<string, {id: string; text?: string; labelType?: string}>
  getEdges(): Array<{start: string; end: string; text?: string; labelType?: string}>
}

let mermaid: MermaidApi
// Mermaid reads pipe's line break (<br/>) as a line break and gives it back as <br>; a <br/> in a
// label's own text is escaped, so it comes back as the text <br/>.
const BR = '<br>'
let hadWindow: boolean
let savedWindow: unknown

// Mermaid's parser turns `#35;` into a placeholder that its renderer later writes as `&#35;`: this
// is that placeholder read back as the character the browser shows.
const NAMED: Record<string, string> = {quot: '"', lt: '<', gt: '>', amp: '&'}
function shown(text: string): string {
  return text
    .replace(/ﬂ°°(\d+)¶ß/g, (_, code: string) => String.fromCharCode(Number(code)))
    .replace(/ﬂ°(\w+)¶ß/g, (whole, name: string) => NAMED[name] ?? whole)
}

/** Parses with mermaid.parse (which throws on any syntax error), then reads the labels back. */
async function parseMermaid(text: string): Promise<Parsed> {
  await mermaid.parse(text)
  const {db} = await mermaid.mermaidAPI.getDiagramFromText(text)
  const nodes = new Map<string, string>()
  for (const vertex of db.getVertices().values()) {
    // A label Mermaid took for Markdown would be shown differently from what pipe wrote.
    expect(vertex.labelType, `node ${vertex.id}`).to.not.equal('markdown')
    nodes.set(vertex.id, shown(vertex.text ?? ''))
  }
  const edges = db.getEdges().map((e) => ({from: e.start, to: e.end, text: shown(e.text ?? '')}))
  return {nodes, edges}
}

/** Every *.yaml under these folders that is a pipeline (not a policy, an answers file or a pipe-test file). */
async function shippedPipelines(): Promise<string[]> {
  const out: string[] = []
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, {withFileTypes: true})) {
      const file = path.join(dir, entry.name)
      if (entry.isDirectory()) await walk(file)
      else if (/\.ya?ml$/.test(entry.name)) {
        const doc = parseYaml(await readFile(file, 'utf8')) as Record<string, unknown> | null
        if (doc && typeof doc === 'object' && 'name' in doc && ('steps' in doc || 'extends' in doc)) out.push(path.relative(repoRoot, file))
      }
    }
  }
  await walk(path.join(repoRoot, 'pipelines'))
  await walk(examples)
  return out.sort()
}

interface GraphJson {
  steps: Array<{id: string; kind: string}>
  edges: Array<{from: string; to: string; label: string}>
  taken?: Array<{from: string; to: string; label: string; count: number}>
  text: string
}

let dir: string
let cleanup: () => Promise<void>
const env = () => ({PIPE_HOME: path.join(dir, 'home')})

describe('pipe graph: Mermaid that Mermaid parses', function () {
  this.timeout(120000)

  before(async () => {
    ;({dir, cleanup} = await tempDir('pipe-graph-mermaid-'))
    // Mermaid (DOMPurify in it) needs a DOM window when it loads; loaded once for every test here.
    const {JSDOM} = await import('jsdom')
    hadWindow = 'window' in globalThis
    savedWindow = (globalThis as {window?: unknown}).window
    Object.defineProperty(globalThis, 'window', {value: new JSDOM('<!doctype html><html><body></body></html>').window, configurable: true, writable: true})
    mermaid = (await import('mermaid')).default as unknown as MermaidApi
    mermaid.initialize({startOnLoad: false})
  })
  after(async () => {
    if (hadWindow) Object.defineProperty(globalThis, 'window', {value: savedWindow, configurable: true, writable: true})
    else delete (globalThis as {window?: unknown}).window
    await cleanup()
  })

  it('parses the drawing of every shipped pipeline, every step labelled with its id', async () => {
    const files = await shippedPipelines()
    expect(files).to.include.members([
      'pipelines/default.yaml',
      'pipelines/coding.yaml',
      'examples/triage/pipeline.yaml',
      'examples/release-notes/pipeline.yaml',
    ])
    // Each file drawn in-process as `pipe graph FILE` draws it (loaded, rendered, printed through
    // visible()); the default pipeline also by the CLI itself, which must print exactly that text.
    for (const file of files) {
      const loaded = await loadPipeline(path.join(repoRoot, file), kindCatalog)
      if (!loaded.ok) throw new Error(`${file}: ${loaded.diagnostics.map((d) => d.message).join('\n')}`)
      const pipeline = loaded.loaded.pipeline
      const text = renderGraph(pipeline, 'mermaid', kindCatalog)
      expect(visible(text), `${file}: printed as drawn`).to.equal(text)
      if (file === 'pipelines/default.yaml') {
        const result = await pipe(['graph', file])
        expect(result.code, `${file}: ${result.stderr}`).to.equal(0)
        expect(result.stdout, file).to.equal(text)
        const body = json<GraphJson>(await pipeHere(['graph', file, '--json']))
        expect(body.text, file).to.equal(result.stdout)
        expect(
          body.steps.map((st) => st.id),
          file,
        ).to.deep.equal(pipeline.steps.map((st) => st.id))
        expect(body.edges, file).to.deep.equal(allEdges(pipeline, kindCatalog))
      }
      const parsed = await parseMermaid(text).catch((error: unknown) => {
        throw new Error(`${file}: ${String(error)}\n${text}`)
      })
      const labels = [...parsed.nodes.values()]
      for (const step of pipeline.steps)
        expect(
          labels.some((l) => l === step.id || l.startsWith(`${step.id}${BR}`)),
          `${file}: step ${step.id}`,
        ).to.equal(true)
      // Every transition is drawn, with its outcome as written (next: has none).
      for (const edge of allEdges(pipeline, kindCatalog).filter((e) => e.label !== 'next'))
        expect(
          parsed.edges.map((e) => e.text),
          `${file}: ${edge.from} ${edge.label}`,
        ).to.include(edge.label)
    }
  })

  it("parses the drawing of real runs' paths: a clarify loop, a review's hold then drop, a failed end", async () => {
    const run = async (file: string, args: string[]): Promise<string> =>
      json<{run_id: string}>(await pipeHere(['run', file, ...args, '--store', 'store', '--json'], {cwd: dir, env: env()})).run_id
    const loop = await run(defaultPipeline, [
      '--input',
      path.join(examples, 'one-sentence.txt'),
      '--answers',
      path.join(examples, 'one-sentence.answers.yaml'),
      '--decision',
      'go',
    ])
    const held = await run(defaultPipeline, ['--input', path.join(examples, 'full-prd.md'), '--decision', 'hold'])
    const dropped = await pipeHere(['review', held, '--decision', 'drop', '--store', 'store', '--json'], {cwd: dir, env: env()})
    expect(dropped.code, dropped.stderr).to.equal(5)
    const tiny = path.join(dir, 'tiny.yaml')
    await writeFile(tiny, 'version: 1\nname: tiny\nsteps:\n  - {id: a, kind: noop, next: stop}\n  - {id: stop, kind: end, status: failed, reason: no}\n')
    const failed = await run(tiny, [])
    for (const [file, runId] of [
      [defaultPipeline, loop],
      [defaultPipeline, held],
      [tiny, failed],
    ] as const) {
      // The first run's drawing from a process, the others in this process.
      const result = await (runId === loop ? pipe : pipeHere)(['graph', file, '--run', runId, '--store', 'store'], {cwd: dir, env: env()})
      expect(result.code, result.stderr).to.equal(0)
      const parsed = await parseMermaid(result.stdout).catch((error: unknown) => {
        throw new Error(`${runId}: ${String(error)}\n${result.stdout}`)
      })
      if (runId === loop) {
        expect(parsed.nodes.get('compile')).to.equal(`compile${BR}ran 2×`)
        expect(parsed.edges).to.deep.include({from: 'compile', to: 'validate_gates', text: '2×'})
      }
      if (runId === held) expect(parsed.edges).to.deep.include({from: 'manual_review', to: 'manual_review', text: 'hold (waits)'})
      if (runId === failed) expect(parsed.edges).to.deep.include({from: 'stop', to: '__failed__', text: 'failed'})
    }
  })

  // What a user can put into a label through a pipeline file: a child pipeline's path (any
  // character a file name may have), and step ids that are words of Mermaid's own language.
  const hostileFile = 'sub (v2) "q" | #1; #quot; <b>x<i> & 50%%{init} `tick` 日本 é style:#fff; a\\b.yaml'
  const keywordIds = [
    'end',
    'class',
    'style',
    'graph',
    'subgraph',
    'flowchart',
    'click',
    'call',
    'href',
    'interpolate',
    'default',
    'direction',
    'linkstyle',
    'classdef',
    'v',
    'o',
    'x',
  ]

  it('draws a run of a pipeline whose step ids are Mermaid keywords and whose labels hold its syntax, labels as written', async () => {
    await mkdir(path.join(dir, 'hostile'), {recursive: true})
    await writeFile(path.join(dir, 'hostile', hostileFile), 'version: 1\nname: child\nsteps:\n  - {id: only, kind: noop}\n')
    const ids = keywordIds
    // A chain through every keyword id; `class` runs the child; x and o loop twice, then o's bound ends the loop.
    const steps = ids.map((id, i) => {
      const next = ids[i + 1]
      if (id === 'class') return `  - {id: class, kind: pipeline, file: '${hostileFile.replace(/'/g, "''")}', next: ${next}}`
      if (id === 'o') return `  - {id: o, kind: noop, next: x, max_iterations: 2, on_exhausted: done}`
      if (id === 'x') return `  - {id: x, kind: noop, next: o}`
      return `  - {id: ${id}, kind: noop, next: ${next}}`
    })
    const file = path.join(dir, 'hostile', 'pipeline.yaml')
    await writeFile(file, ['version: 1', 'name: hostile', 'steps:', ...steps, '  - {id: done, kind: end, status: succeeded}', ''].join('\n'))
    const ran = await pipeHere(['run', file, '--store', 'store', '--json'], {cwd: dir, env: env()})
    const runId = json<{run_id: string; status: string}>(ran).run_id
    expect(json<{status: string}>(ran).status, ran.stderr).to.equal('succeeded')

    for (const args of [[file], [file, '--run', runId]]) {
      // The pipeline's drawing from a process, the run's in this process.
      const result = await (args.length === 1 ? pipe : pipeHere)(['graph', ...args, '--store', 'store'], {cwd: dir, env: env()})
      expect(result.code, result.stderr).to.equal(0)
      const parsed = await parseMermaid(result.stdout).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${result.stdout}`)
      })
      const ran = args.length > 1
      const label = (id: string, ...lines: string[]) => [id, ...lines, ...(ran ? [id === 'x' || id === 'o' ? 'ran 2×' : 'ran once'] : [])].join(BR)
      const labels = [...parsed.nodes.values()]
      expect(labels).to.include(label('class', 'kind: pipeline', `pipeline ${hostileFile}`))
      for (const id of ids.filter((i) => i !== 'class' && i !== 'o')) expect(labels).to.include(label(id, 'kind: noop'))
      expect(labels).to.include(label('o', 'kind: noop', 'max 2 iterations'))
      // Every step is its own node: no keyword id merged two steps or vanished into syntax.
      expect([...parsed.nodes.keys()].filter((id) => !id.startsWith('__'))).to.have.length(ids.length + 1)
      expect(parsed.edges.filter((e) => e.text === 'exhausted')).to.have.length(1)
    }
  })

  it('writes any text of a label so that Mermaid shows exactly that text: outcomes, details and a path taken', async () => {
    const hostile = [
      'hold (waits)',
      'a|b',
      "quote \" and 'single'",
      '#quot; #35; #lt;',
      '<b>bold</b> <br/> & &amp;',
      '[x] {y} (z) ((w)) >v /s/ \\b\\',
      '`markdown`',
      '%%{init: {"theme": "dark"}}%%',
      '%% a comment',
      'style a fill:#fff;',
      'classDef x fill:#f00;',
      'line\nbreak\ttab\u0007bell',
      'bidi \u202eevil\u202c',
      '日本語 é × 🚀',
      'end',
      ';',
      '-->',
      'a --> b',
      '-.-> x',
    ]
    const pipeline = {
      version: 1,
      name: 'hostile',
      steps: [
        {id: 'a', kind: 'probe', on: Object.fromEntries(hostile.map((h) => [h, 'b']))},
        {id: 'b', kind: 'probe'},
      ],
    } as unknown as Pipeline
    const catalog: KindCatalog = {
      probe: {
        outcomes: (step) => Object.keys(step.on ?? {}),
        stops: {[hostile[0]!]: 'awaiting_input', [hostile[1]!]: 'cancelled'},
        graph: {details: () => hostile},
      },
    }
    const walk: PathTaken = {
      run_id: 'R-20260101-0001',
      status: 'failed',
      steps: {a: 1, b: 2},
      taken: [
        {from: '__start__', to: 'a', label: 'start', count: 1},
        {from: 'a', to: 'b', label: hostile[2]!, count: 2},
        {from: 'b', to: '__failed__', label: hostile[9]!, count: 1},
        {from: 'b', to: '__blocked__', label: hostile[8]!, count: 3},
      ],
    }
    for (const taken of [undefined, walk]) {
      const text = renderGraph(pipeline, 'mermaid', catalog, taken)
      const parsed = await parseMermaid(text).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${text}`)
      })
      const ran = (n: number) => (taken ? [n === 1 ? 'ran once' : `ran ${n}×`] : [])
      expect(parsed.nodes.get('a')).to.equal(['a', 'kind: probe', ...hostile, ...ran(1)].join(BR))
      expect(parsed.nodes.get('b')).to.equal(['b', 'kind: probe', ...hostile, ...ran(2)].join(BR))
      const fromA = parsed.edges.filter((e) => e.from === 'a' && e.to === 'b').map((e) => e.text)
      expect(fromA).to.include.members(hostile.map((h) => (taken && h === hostile[2] ? `${h} ×2` : h)))
      expect(parsed.edges).to.deep.include({from: 'a', to: 'a', text: `${hostile[0]} (waits)`})
      expect(parsed.edges).to.deep.include({from: 'a', to: '__cancelled__', text: hostile[1]})
      if (taken) {
        expect(parsed.edges).to.deep.include({from: 'b', to: '__failed__', text: hostile[9]})
        expect(parsed.edges).to.deep.include({from: 'b', to: '__blocked__', text: `${hostile[8]} ×3`})
        expect(text).to.match(/^ {2}linkStyle [\d,]+ stroke:/m)
      }
    }
  })
})
