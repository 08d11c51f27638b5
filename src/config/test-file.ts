/**
 * Loads a test file (*.pipe-test.yaml) in the stages pipelines go through: YAML with positions,
 * the schema (every error), then the rules a schema cannot express: the files it names exist, the
 * pipeline each test runs is valid, the steps its expectations name are the pipeline's, outcomes
 * are ones those steps can have, and every assertion is a boolean expression that checks against
 * the pipeline's declarations. Every problem is reported at file:line:col, before any test runs.
 */
import {existsSync, statSync} from 'node:fs'
import path from 'node:path'
import {isScalar} from 'yaml'
import type {PipeTestFile, Test} from '../types/pipe-test.js'
import {formatPath, sortDiagnostics, type Diagnostic} from './diagnostics.js'
import {validateDocument} from './document.js'
import {outcomesOf} from './catalog.js'
import {exprDeclarations, loadExpressionChecker} from './expressions.js'
import type {KindCatalog} from './kind-contract.js'
import type {LoadedPipeline} from './loaded.js'
import {loadPipeline} from './pipeline.js'
import {stepDir} from './positions.js'
import {didYouMean} from '../util/suggest.js'
import {findNode, locate, type YamlSource} from './yaml-source.js'
import {scalarOffsetMapper} from '../expr/source-map.js'
import {parseTemplate} from '../expr/template.js'

export const TEST_FILE_SUFFIX = '.pipe-test.yaml'

type Segment = string | number

/** One test, its paths resolved (absolute), ready to run. */
export interface TestCase {
  /** The test file, absolute. */
  file: string
  name: string
  /** Its position in the file's tests list. */
  index: number
  pipeline: LoadedPipeline
  policy?: string
  cassette?: string
  workspace?: string
  /** Commands run in the workspace before the run (argument vectors, no shell). */
  setup?: string[][]
  /** Stand-ins for the pipeline's secrets, the file's with the test's over them. */
  secrets?: Record<string, string>
  input?: string
  inputFile?: string
  inputs?: Record<string, string | number | boolean>
  /** An answers file (absolute), or the answers themselves. */
  answers?: string | Record<string, string>
  decision?: 'go' | 'hold' | 'drop'
  note?: string
  /** A person's answers to the confirmations the run waits for, in order. */
  confirm?: Array<'yes' | 'no'>
  /** What a person grants each time the run pauses at a budget, in order. */
  budget?: NonNullable<Test['budget']>
  expect: Test['expect']
  /** The golden file, absolute. */
  golden?: string
  /** The deepest directory holding the test file and every file it names: masked in goldens so they do not depend on where the checkout lives. */
  root: string
}

export type TestFileResult = {ok: true; tests: TestCase[]} | {ok: false; diagnostics: Diagnostic[]}

function at(source: YamlSource, segments: readonly Segment[], message: string, rule: string, preferKey = false): Diagnostic {
  const pos = locate(source, segments, preferKey)
  return {file: source.file, line: pos.line, col: pos.col, path: formatPath(segments), message, rule}
}

/** A test's own key, else the file's default, with the path of whichever was given. */
function setting(data: PipeTestFile, i: number, key: 'pipeline' | 'policy' | 'cassette' | 'workspace'): {value: string; segments: Segment[]} | undefined {
  const own = data.tests[i]![key]
  if (own !== undefined) return {value: own, segments: ['tests', i, key]}
  const shared = data[key]
  return shared === undefined ? undefined : {value: shared, segments: [key]}
}

function commonDir(paths: readonly string[]): string {
  let root = path.dirname(paths[0]!)
  for (const p of paths.slice(1)) {
    while (root !== path.dirname(root) && p !== root && !p.startsWith(`${root}${path.sep}`)) root = path.dirname(root)
  }
  return root
}

/** The git work tree holding `dir` (the nearest directory up with a .git), else `dir` itself. */
function repositoryOf(dir: string): string {
  for (let d = dir; ; d = path.dirname(d)) {
    if (existsSync(path.join(d, '.git'))) return d
    if (d === path.dirname(d)) return dir
  }
}

function inside(root: string, file: string): boolean {
  const relative = path.relative(root, file)
  return relative !== '' && !relative.startsWith(`..${path.sep}`) && relative !== '..' && !path.isAbsolute(relative)
}

export interface LoadTestOptions {
  /** pipe test --record: a test's cassette may not exist yet (the run writes it). */
  recording?: boolean
}

export async function loadTestFile(file: string, catalog: KindCatalog, options: LoadTestOptions = {}): Promise<TestFileResult> {
  const read = await validateDocument<PipeTestFile>(file, 'pipe-test', 'test file')
  if (!read.ok) return read
  const {source, data} = read
  // Diagnostics name the file as it was given; everything it names is relative to where it is.
  const absolute = path.resolve(file)
  const dir = path.dirname(absolute)
  const out: Diagnostic[] = []
  const pipelines = new Map<string, Promise<{loaded?: LoadedPipeline; diagnostics: Diagnostic[]}>>()
  const names = new Map<string, number>()
  const tests: TestCase[] = []
  const boundary = repositoryOf(dir)

  const existing = (segments: Segment[], value: string, what: string, kind: 'file' | 'dir' = 'file'): string | undefined => {
    const full = path.resolve(dir, value)
    let ok = false
    try {
      ok = kind === 'dir' ? statSync(full).isDirectory() : statSync(full).isFile()
    } catch {
      ok = false
    }
    if (!ok) {
      out.push(
        at(source, segments, `${what} ${value} ${existsSync(full) ? `is not a ${kind === 'dir' ? 'directory' : 'file'}` : 'not found'} (${full})`, 'file'),
      )
      return undefined
    }
    return full
  }

  for (const [i, test] of data.tests.entries()) {
    const seen = names.get(test.name)
    if (seen !== undefined)
      out.push(at(source, ['tests', i, 'name'], `test name "${test.name}" is used by tests[${seen}] too; names must be unique in a file`, 'unique-name'))
    else names.set(test.name, i)
    if (test.input !== undefined && test.input_file !== undefined)
      out.push(at(source, ['tests', i, 'input_file'], '"input" and "input_file" cannot both be given; give the requirement one way', 'one-input', true))

    const pipelineSetting = setting(data, i, 'pipeline')
    if (!pipelineSetting) {
      out.push(at(source, ['tests', i], `test "${test.name}" names no pipeline: give "pipeline:" in the test or at the top of the file`, 'pipeline'))
      continue
    }
    const pipelineFile = existing(pipelineSetting.segments, pipelineSetting.value, 'pipeline')
    const policy = setting(data, i, 'policy')
    const cassette = setting(data, i, 'cassette')
    const workspace = setting(data, i, 'workspace')
    const resolved = {
      policy: policy && existing(policy.segments, policy.value, 'policy'),
      cassette: cassette && (options.recording ? path.resolve(dir, cassette.value) : existing(cassette.segments, cassette.value, 'cassette')),
      workspace: workspace && existing(workspace.segments, workspace.value, 'workspace', 'dir'),
      inputFile: test.input_file !== undefined ? existing(['tests', i, 'input_file'], test.input_file, 'input file') : undefined,
      answers: typeof test.answers === 'string' ? existing(['tests', i, 'answers'], test.answers, 'answers file') : undefined,
    }
    if (!pipelineFile) continue
    let pending = pipelines.get(pipelineFile)
    if (!pending) {
      pending = loadPipeline(pipelineFile, catalog).then((r) => (r.ok ? {loaded: r.loaded, diagnostics: []} : {diagnostics: r.diagnostics}))
      pipelines.set(pipelineFile, pending)
    }
    const loadedResult = await pending
    if (!loadedResult.loaded) {
      out.push(at(source, pipelineSetting.segments, `pipeline ${pipelineSetting.value} is not valid (its errors follow)`, 'pipeline'))
      // Reported once per pipeline, however many tests run it.
      if (loadedResult.diagnostics.length > 0) {
        out.push(...loadedResult.diagnostics)
        loadedResult.diagnostics = []
      }
      continue
    }
    const loaded = loadedResult.loaded
    out.push(...(await checkExpect(source, i, test, loaded, catalog)))
    // The file's setup is every test's fixture; a test's own adds to it, after it.
    const setup = [...(data.setup ?? []), ...(test.setup ?? [])]
    const secrets = {...data.secrets, ...test.secrets} as Record<string, string>
    const golden = test.expect.golden !== undefined ? path.resolve(dir, test.expect.golden) : undefined
    // pipe test writes goldens (--update) and cassettes (--record): never outside the checkout the test file is in.
    if (golden !== undefined && !inside(boundary, golden))
      out.push(
        at(
          source,
          ['tests', i, 'expect', 'golden'],
          `golden ${test.expect.golden} is outside ${boundary} (${golden}); pipe test --update writes goldens only inside the repository of the test file`,
          'file',
        ),
      )
    if (options.recording && resolved.cassette !== undefined && !inside(boundary, resolved.cassette))
      out.push(
        at(
          source,
          cassette!.segments,
          `cassette ${cassette!.value} is outside ${boundary} (${resolved.cassette}); pipe test --record writes cassettes only inside the repository of the test file`,
          'file',
        ),
      )
    const named = [absolute, pipelineFile, ...Object.values(resolved).filter((v): v is string => typeof v === 'string')]
    tests.push({
      file: absolute,
      name: test.name,
      index: i,
      pipeline: loaded,
      ...(resolved.policy ? {policy: resolved.policy} : {}),
      ...(resolved.cassette ? {cassette: resolved.cassette} : {}),
      ...(resolved.workspace ? {workspace: resolved.workspace} : {}),
      ...(setup && setup.length > 0 ? {setup} : {}),
      ...(Object.keys(secrets).length > 0 ? {secrets} : {}),
      ...(test.input !== undefined ? {input: test.input} : {}),
      ...(resolved.inputFile ? {inputFile: resolved.inputFile} : {}),
      ...(test.inputs ? {inputs: test.inputs as Record<string, string | number | boolean>} : {}),
      ...(resolved.answers ? {answers: resolved.answers} : typeof test.answers === 'object' ? {answers: test.answers as Record<string, string>} : {}),
      ...(test.decision ? {decision: test.decision} : {}),
      ...(test.confirm !== undefined ? {confirm: typeof test.confirm === 'string' ? [test.confirm] : [...test.confirm]} : {}),
      ...(test.budget !== undefined ? {budget: test.budget} : {}),
      ...(test.note !== undefined ? {note: test.note} : {}),
      expect: test.expect,
      ...(golden ? {golden} : {}),
      root: commonDir(named),
    })
  }
  // A file-level setting that is wrong is wrong once, however many tests use it.
  const unique = [...new Map(out.map((d) => [JSON.stringify(d), d])).values()]
  if (unique.length > 0) return {ok: false, diagnostics: sortDiagnostics(unique)}
  return {ok: true, tests}
}

/** The expectations that name steps and expressions, checked against the pipeline the test runs. */
async function checkExpect(source: YamlSource, i: number, test: Test, loaded: LoadedPipeline, catalog: KindCatalog): Promise<Diagnostic[]> {
  const out: Diagnostic[] = []
  const steps = new Map(loaded.pipeline.steps.map((s) => [s.id, s]))
  const base: Segment[] = ['tests', i, 'expect']
  const unknownStep = (id: string, segments: Segment[]): void => {
    out.push(at(source, segments, `pipeline ${loaded.pipeline.name} has no step "${id}"${didYouMean(id, steps.keys())}`, 'step', true))
  }
  for (const [id, outcome] of Object.entries(test.expect.outcomes ?? {})) {
    const step = steps.get(id)
    if (!step) {
      unknownStep(id, [...base, 'outcomes', id])
      continue
    }
    if (outcome === null || outcome === undefined) continue
    const possible = outcomesOf(step, catalog, loaded.pipeline)
    if (!possible.includes(outcome)) {
      out.push(
        at(
          source,
          [...base, 'outcomes', id],
          `step "${id}" (${step.kind}) never has the outcome "${outcome}"${didYouMean(outcome, possible)}; its outcomes: ${possible.join(', ')}`,
          'outcome',
        ),
      )
    }
  }
  for (const key of Object.keys(test.expect.outputs ?? {})) {
    const id = /^[a-z][a-z0-9_]*/.exec(key)![0]
    if (!steps.has(id)) unknownStep(id, [...base, 'outputs', key])
  }
  const asserts = test.expect.assert ?? []
  if (asserts.length === 0) return out
  const ExprChecker = await loadExpressionChecker(asserts)
  const checker = new ExprChecker(exprDeclarations(loaded.pipeline, (index) => stepDir(loaded, index), catalog, loaded.aliases))
  for (const [j, text] of asserts.entries()) {
    const segments: Segment[] = [...base, 'assert', j]
    if (parseTemplate(text).whole === undefined) {
      out.push(
        at(
          source,
          segments,
          `an assertion is one \${{ … }} expression that must be true, found ${JSON.stringify(text.length > 60 ? `${text.slice(0, 57)}...` : text)}`,
          'assert',
        ),
      )
      continue
    }
    const result = checker.checkTemplate(text, {expect: 'bool'})
    const mapper = offsetMapper(source, segments, text)
    for (const d of result.diagnostics) {
      const offset = mapper(d.offset)
      const pos = offset === undefined ? locate(source, segments) : source.lineCounter.linePos(offset)
      out.push({file: source.file, line: pos.line, col: pos.col, path: formatPath(segments), message: d.message, rule: 'expression'})
    }
  }
  return out
}

function offsetMapper(source: YamlSource, segments: readonly Segment[], value: string): (offset: number) => number | undefined {
  const found = findNode(source, segments)
  const node = found.node
  if (!found.exact || !isScalar(node) || !node.range) return () => undefined
  const [start, end] = node.range
  const map = scalarOffsetMapper(source.text.slice(start, end), node.type, value)
  return (offset) => start + map(offset)
}
