/**
 * Each kind's knowledge lives in its module (docs/development.md, "Everything pipe knows about a kind"): nothing outside
 * src/steps/ switches on a kind's name, steps read each other's outputs through the producer's
 * typed readers, and the layer direction is enforced by the lint configuration.
 */
import {expect} from 'chai'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {ESLint} from 'eslint'
import tseslint from 'typescript-eslint'
import {renderGraph} from '../../src/config/graph-render.js'
import type {KindCatalog} from '../../src/config/kind-contract.js'
import {loadPipeline} from '../../src/config/pipeline.js'
import {outputsOf} from '../../src/steps/outputs.js'
import {kindCatalog, registry} from '../../src/steps/registry.js'
import type {RunHistory, StepHandler, StepKind} from '../../src/steps/types.js'
import {loadSchema} from '../../src/schema/registry.js'
import type {Pipeline, Step} from '../../src/types/pipeline.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {tempDir} from '../helpers/cli.js'

const root = path.resolve(import.meta.dirname, '..', '..')
const src = path.join(root, 'src')

async function tsFiles(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const entry of await readdir(dir, {withFileTypes: true})) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) out.push(...(await tsFiles(full)))
    else if (entry.name.endsWith('.ts')) out.push(full)
  }
  return out
}

const KINDS = Object.keys(registry).join('|')
const Q = `['"\`]`
/** The shapes a switch on a kind's name takes: a comparison either way round, a case, a list of names. */
const KIND_SWITCHES = [
  new RegExp(`\\bkind\\s*[!=]==?\\s*${Q}(${KINDS})${Q}`),
  new RegExp(`${Q}(${KINDS})${Q}\\s*[!=]==?\\s*[\\w.?!]*\\bkind\\b`),
  new RegExp(`\\bcase\\s+${Q}(${KINDS})${Q}\\s*:`),
  new RegExp(`[[(]\\s*${Q}(${KINDS})${Q}\\s*(,\\s*${Q}(${KINDS})${Q}\\s*)+,?\\s*[\\])]`),
]

/** Names that are kind names too but mean something else there; each with the reason. */
const ALLOWED: Array<{file: RegExp; line: RegExp; why: string}> = [
  {
    file: /^src\/(engine|commands|cli|app|view)\//,
    line: /(pending|due)\??\.kind\s*[!=]==?\s*'review'/,
    why: 'the kind of a pause (answers, review, confirm, budget), not of a step',
  },
]

function kindSwitches(file: string, text: string): string[] {
  return text
    .split('\n')
    .flatMap((line, i) =>
      KIND_SWITCHES.some((p) => p.test(line)) && !ALLOWED.some((a) => a.file.test(file) && a.line.test(line)) ? [`${file}:${i + 1}: ${line.trim()}`] : [],
    )
}

describe("each kind's knowledge lives in its module", () => {
  it('finds a switch on a kind name in every shape it takes (the scan can fail)', () => {
    for (const line of [
      "if (step.kind === 'gate') x()",
      "s.step.kind !== 'edit'",
      "'review' === step.kind",
      "    case 'git':",
      "['edit', 'qa', 'command'].includes(s.kind)",
      "new Set(['ingest', 'compile'])",
    ]) {
      expect(kindSwitches('src/engine/x.ts', line), line).to.have.length(1)
    }
    for (const line of ["record.pending?.kind === 'review'", "input.kind === 'none'", "const kind = 'gate_result'", "case 'questions':"]) {
      expect(kindSwitches('src/engine/x.ts', line), line).to.deep.equal([])
    }
  })

  it('no module outside src/steps/ (and the generated src/types/) compares a step kind with a kind name', async () => {
    const found: string[] = []
    for (const full of await tsFiles(src)) {
      const file = path.relative(root, full).split(path.sep).join('/')
      if (file.startsWith('src/steps/') || file.startsWith('src/types/')) continue
      found.push(...kindSwitches(file, await readFile(full, 'utf8')))
    }
    expect(found, "move this knowledge into the kind's module, behind a StepHandler member (src/steps/types.ts)").to.deep.equal([])
  })

  it("the engine and the graph code name no kind's own fields: which fields route, name steps or stay unresolved, the kind says", async () => {
    // A kind's own fields (not the common step fields) that name steps or hold conditions, from the schema, and those a handler defers.
    const schema = loadSchema('pipeline') as {definitions: Record<string, {allOf?: unknown; properties?: Record<string, unknown>}>}
    const common = new Set(Object.keys(schema.definitions.stepCommon!.properties!))
    const fields = new Set<string>()
    for (const def of Object.values(schema.definitions)) {
      if (def.allOf === undefined) continue
      for (const [key, sub] of Object.entries(def.properties ?? {}))
        if (!common.has(key) && /definitions\/(stepRef|condition)"/.test(JSON.stringify(sub))) fields.add(key)
    }
    for (const handler of Object.values(registry) as Array<StepHandler<StepKind>>) {
      const deferred = handler.deferred?.({id: 'x', kind: handler.kind} as Step)
      // (Its foreign fields, an inline pipeline's steps: and inputs:, are the pipeline's own keys, not the kind's.)
      for (const key of deferred?.fields ?? []) fields.add(key)
    }
    expect([...fields]).to.include.members(['choices', 'default', 'to', 'items', 'with'])
    const F = [...fields].join('|')
    const patterns = [new RegExp(`['"\`](${F})['"\`]`), new RegExp(`\\bstep\\??\\.(${F})\\b`)]
    const found: string[] = []
    const files = [
      ...(await tsFiles(path.join(src, 'engine'))),
      ...['graph.ts', 'compose.ts', 'graph-render.ts', 'step-links.ts', 'expressions.ts'].map((f) => path.join(src, 'config', f)),
    ]
    for (const full of files) {
      const file = path.relative(root, full).split(path.sep).join('/')
      ;(await readFile(full, 'utf8')).split('\n').forEach((line, i) => {
        if (!/^\s*(\*|\/\/|\/\*)/.test(line) && patterns.some((p) => p.test(line))) found.push(`${file}:${i + 1}: ${line.trim()}`)
      })
    }
    expect(found, "declare it in the kind's module (StepHandler.references, .deferred)").to.deep.equal([])
  })

  it("no step or command reads another step's output by a string key: they import the producer's typed reader", async () => {
    const found: string[] = []
    // The reader helper, the interface it calls and the engine's implementation of it.
    const home = new Set(['src/steps/outputs.ts', 'src/steps/types.ts', 'src/engine/history.ts'])
    for (const full of await tsFiles(src)) {
      const file = path.relative(root, full).split(path.sep).join('/')
      if (home.has(file)) continue
      const text = await readFile(full, 'utf8')
      text.split('\n').forEach((line, i) => {
        if (/\blatestOutput\s*[<(]/.test(line) || /outputs as \{/.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`)
      })
    }
    expect(found).to.deep.equal([])
  })
})

describe('typed output readers', () => {
  type Outputs = {answer: {value: number}; note: string}
  const field = outputsOf<Outputs>()
  const answer = field('answer')
  const snap = (outputs: Record<string, unknown>): Pick<Snapshot, 'outputs'> => ({outputs})

  it('reads a field from one snapshot, only when the snapshot recorded it', () => {
    expect(answer.key).to.equal('answer')
    expect(answer.of(snap({answer: {value: 1}}))).to.deep.equal({value: 1})
    expect(answer.of(snap({other: 1}))).to.equal(undefined)
    // An inherited property is not an output.
    expect(answer.of(snap(Object.create({answer: {value: 9}}) as Record<string, unknown>))).to.equal(undefined)
  })

  it('reads the newest value from a list of snapshots or from a run history, skipping snapshots without it', () => {
    const snapshots = [snap({answer: {value: 1}}), snap({answer: {value: 2}}), snap({note: 'x'})]
    expect(answer.latest(snapshots)).to.deep.equal({value: 2})
    expect(field('note').latest([snap({answer: {value: 1}})])).to.equal(undefined)
    const asked: string[] = []
    const history: RunHistory = {
      snapshots: [],
      latestOutput<T>(key: string): T | undefined {
        asked.push(key)
        return {value: 3} as T
      },
      unrecoveredFailure: () => null,
    }
    expect(answer.latest(history)).to.deep.equal({value: 3})
    expect(asked).to.deep.equal(['answer'])
  })
})

describe('kind hooks reach the loader and the graph through the catalog', () => {
  let dir: string
  let cleanup: () => Promise<void>
  before(async () => ({dir, cleanup} = await tempDir('pipe-kinds-')))
  after(async () => cleanup())

  // A catalog of one made-up kind that declares every hook, standing in for a kind another change adds.
  const probe = (checkThrows = false): KindCatalog => ({
    noop: {
      outcomes: () => ['success'],
      check(step) {
        if (checkThrows) throw new TypeError('tripped over a malformed value')
        return step.id === 'bad'
          ? [
              {rule: 'probe-rule', at: ['next'], message: 'the probe kind refuses this next'},
              {rule: 'probe-key', at: ['next'], message: 'pointing at the key', key: true},
            ]
          : []
      },
      references: (step) => (step.id === 'a' ? [{at: ['id'], target: 'nowhere', what: 'probe target'}] : []),
      graph: {shape: 'diamond', details: (step) => [`probe of ${step.id}`]},
    },
  })

  async function write(name: string, text: string): Promise<string> {
    const file = path.join(dir, name)
    await writeFile(file, text)
    return file
  }

  it("reports a kind's findings at positions relative to the step, under the kind's rule names", async () => {
    const file = await write(
      'check.yaml',
      'version: 1\nname: t\nsteps:\n  - id: a\n    kind: noop\n    next: bad\n  - id: bad\n    kind: noop\n    next: c\n  - id: c\n    kind: noop\n',
    )
    const result = await loadPipeline(file, probe())
    expect(result.ok).to.equal(false)
    const diagnostics = result.ok ? [] : result.diagnostics
    expect(diagnostics.map((d) => [d.rule, d.path, d.line, d.col, d.message])).to.deep.equal([
      ['unknown-step', 'steps[0].id', 4, 9, 'unknown step "nowhere" in probe target'],
      ['probe-key', 'steps[1].next', 9, 5, 'pointing at the key'],
      ['probe-rule', 'steps[1].next', 9, 11, 'the probe kind refuses this next'],
    ])
  })

  it('lets a check throw only when the structure is already wrong (then it skips it), never on a valid structure', async () => {
    const valid = await write('valid.yaml', 'version: 1\nname: t\nsteps:\n  - id: a\n    kind: noop\n')
    let thrown: unknown
    await loadPipeline(valid, probe(true)).catch((error: unknown) => (thrown = error))
    expect(thrown).to.be.instanceOf(TypeError)
    const broken = await write('broken.yaml', 'version: 1\nname: t\nsteps:\n  - id: a\n    kind: noop\n    colour: red\n    next: missing\n')
    const result = await loadPipeline(broken, probe(true))
    expect(result.ok).to.equal(false)
    const rules = result.ok ? [] : result.diagnostics.map((d) => d.rule)
    expect(rules).to.include('schema')
    expect(rules).to.include('unknown-step')
  })

  it('draws the shape and details a kind declares, in both formats', () => {
    const pipeline = {version: 1, name: 't', steps: [{id: 'a', kind: 'noop'}]} as unknown as Pipeline
    expect(renderGraph(pipeline, 'mermaid', probe())).to.include('  a{"a<br/>kind: noop<br/>probe of a"}')
    expect(renderGraph(pipeline, 'dot', probe())).to.include('"a" [shape=diamond, label="a\\nkind: noop\\nprobe of a"];')
    expect(renderGraph(pipeline, 'mermaid', {})).to.include('  a["a<br/>kind: noop"]')
  })

  it("the shipped kinds declare their checks: a gate step's unknown gate and a rollback's target", async () => {
    const file = await write(
      'shipped.yaml',
      'version: 1\nname: t\ngates:\n  g: {rules: [{path: goal, required: true}]}\nsteps:\n  - {id: c, kind: compile}\n  - {id: check, kind: gate, gates: [gg]}\n  - {id: save, kind: git, action: checkpoint}\n  - {id: back, kind: git, action: rollback, to: c}\n  - {id: back2, kind: git, action: rollback, to: nope}\n',
    )
    const result = await loadPipeline(file, kindCatalog)
    const found = result.ok ? [] : result.diagnostics.map((d) => `${d.rule} ${d.path}: ${d.message}`)
    expect(found).to.include.members([
      'unknown-gate steps[1].gates[0]: gate "gg" is used but not defined — did you mean "g"? (defined: g)',
      'rollback-target steps[3].to: rollback target "c" is not a git checkpoint step',
      'unknown-step steps[4].to: unknown step "nope" in rollback target',
    ])
  })
})

describe('layer direction (eslint no-restricted-imports)', function () {
  this.timeout(120_000)
  // The project's own configuration; only type-aware parsing is off, so that a snippet with a made-up path can be linted.
  const eslint = new ESLint({cwd: root, overrideConfig: tseslint.configs.disableTypeChecked})

  async function problems(file: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, {filePath: path.join(root, file)})
    return result!.messages
      .filter((m) => m.ruleId === 'no-restricted-imports' || m.ruleId === '@typescript-eslint/no-restricted-imports' || m.ruleId === 'no-restricted-syntax')
      .map((m) => m.message)
  }

  it('rejects an import against the direction, static, re-exported, type-only or dynamic, from any depth', async () => {
    expect(await problems('src/steps/probe.ts', "import {Engine} from '../engine/engine.js'\nexport const e = Engine\n")).to.have.length(1)
    expect(await problems('src/store/probe.ts', "export {registry} from '../steps/registry.js'\n")).to.have.length(1)
    expect(await problems('src/providers/offline/probe.ts', "import type {Step} from '../../steps/types.js'\nexport type S = Step\n")).to.have.length(1)
    expect(await problems('src/config/probe.ts', "export async function f(): Promise<unknown> {\n  return import('../steps/registry.js')\n}\n")).to.have.length(
      1,
    )
    expect(await problems('src/engine/probe.ts', "import {x} from '../commands/run.js'\nexport const y = x\n")).to.have.length(1)
    expect(await problems('src/probe.ts', "import {Store} from './store/store.js'\nexport const s = Store\n")).to.have.length(1)
    expect((await problems('src/config/probe.ts', "import {Store} from '../store/store.js'\nexport const s = Store\n"))[0]).to.match(
      /src\/config\/ must not import from .*src\/store\//,
    )
    expect(await problems('src/engine/probe.ts', "import {startSession} from '../app/sessions/start.js'\nexport const s = startSession\n")).to.have.length(1)
    expect(
      await problems('src/steps/probe.ts', "export async function f(): Promise<unknown> {\n  return import('../app/sessions/start.js')\n}\n"),
    ).to.have.length(1)
    expect(await problems('src/app/sessions/probe.ts', "import {x} from '../../cli/views.js'\nexport const y = x\n")).to.have.length(1)
  })

  it('rejects a value import of the engine from commands and cli: they call a use case in src/app/', async () => {
    expect((await problems('src/commands/probe.ts', "import {Engine} from '../engine/engine.js'\nexport const e = Engine\n"))[0]).to.match(
      /src\/commands\/ must call the engine through a use case in src\/app\//,
    )
    expect(await problems('src/cli/probe.ts', "export async function f(): Promise<unknown> {\n  return import('../engine/run-path.js')\n}\n")).to.have.length(1)
  })

  it("rejects an import of a step kind's module from above steps, at any depth, static or dynamic", async () => {
    expect((await problems('src/app/sessions/probe.ts', "import {approves} from '../../steps/review.js'\nexport const a = approves\n"))[0]).to.match(
      /must not import a step kind's module/,
    )
    expect(
      await problems('src/app/sessions/probe.ts', "export async function f(): Promise<unknown> {\n  return import('../../steps/gate.js')\n}\n"),
    ).to.have.length(1)
    expect(await problems('src/engine/probe.ts', "import {toolNamed} from '../steps/agent/tools.js'\nexport const t = toolNamed\n")).to.have.length(1)
    expect(
      await problems('src/commands/probe.ts', "import {questionsAsked} from '../steps/clarify-questions.js'\nexport const q = questionsAsked\n"),
    ).to.have.length(1)
    expect(await problems('src/cli/probe.ts', "export {gateResult} from '../steps/gate.js'\n")).to.have.length(1)
    // The steps layer's shared modules are no kind's: the engine checks outputs with them.
    expect(
      await problems('src/engine/probe.ts', "import {kindOutputsSchema} from '../steps/output-schemas.js'\nexport const k = kindOutputsSchema\n"),
    ).to.deep.equal([])
    // Inside steps, kinds and their helpers import each other.
    expect(await problems('src/steps/probe.ts', "import {gateResult} from './gate.js'\nexport const g = gateResult\n")).to.deep.equal([])
  })

  it('allows imports along the direction', async () => {
    expect(await problems('src/engine/probe.ts', "import {registry} from '../steps/registry.js'\nexport const r = registry\n")).to.deep.equal([])
    expect(
      await problems(
        'src/steps/probe.ts',
        "import {Store} from '../store/store.js'\nimport type {Pipeline} from '../types/pipeline.js'\nexport const s: [unknown, Pipeline?] = [Store]\n",
      ),
    ).to.deep.equal([])
    expect(
      await problems(
        'src/commands/probe.ts',
        "import type {RunOutcome} from '../engine/engine.js'\nimport {startSession} from '../app/sessions/start.js'\nexport const e: [unknown, RunOutcome?] = [startSession]\n",
      ),
    ).to.deep.equal([])
    expect(
      await problems(
        'src/app/sessions/probe.ts',
        "import {Engine} from '../../engine/engine.js'\nimport {views, registry} from '../../steps/registry.js'\nimport type {StepKind} from '../../steps/types.js'\nexport const e: [unknown, unknown, unknown, StepKind?] = [Engine, views, registry]\n",
      ),
    ).to.deep.equal([])
  })
})
