import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {formatDiagnostic} from '../../src/config/diagnostics.js'
import type {LoadedPipeline} from '../../src/config/loaded.js'
import {loadPipeline} from '../../src/config/pipeline.js'
import {stepDir} from '../../src/config/positions.js'
import {kindCatalog} from '../../src/steps/registry.js'
import {tempDir} from '../helpers/cli.js'

let root: string
let cleanup: () => Promise<void>
let n = 0
/** A fresh directory per test, so the files of one test never meet another's. */
let dir: string

before(async () => ({dir: root, cleanup} = await tempDir('pipe-compose-')))
after(async () => cleanup())
beforeEach(async () => {
  dir = path.join(root, `t${++n}`)
  await mkdir(dir, {recursive: true})
})

// a -> b -> c, all noop; line numbers matter for the located errors below.
const BASE = `version: 1
name: base
gates:
  g1: {rules: [{path: goal, required: true}]}
steps:
  - id: a
    kind: noop
    next: b
  - id: b
    kind: noop
    next: c
  - id: c
    kind: noop
`

async function write(name: string, text: string): Promise<string> {
  const file = path.join(dir, name)
  await mkdir(path.dirname(file), {recursive: true})
  await writeFile(file, text)
  return file
}

async function load(child: string, base = BASE): Promise<LoadedPipeline> {
  await write('base.yaml', base)
  const result = await loadPipeline(await write('child.yaml', child), kindCatalog)
  if (!result.ok) throw new Error(result.diagnostics.map(formatDiagnostic).join('\n'))
  return result.loaded
}

async function errors(child: string, base = BASE): Promise<string[]> {
  await write('base.yaml', base)
  const result = await loadPipeline(await write('child.yaml', child), kindCatalog)
  expect(result.ok, 'the pipeline should not load').to.equal(false)
  return result.ok ? [] : result.diagnostics.map((d) => formatDiagnostic(d).replaceAll(`${dir}/`, ''))
}

/** Each step as id>next (routes by on: in braces). */
function graph(loaded: LoadedPipeline): string[] {
  return loaded.pipeline.steps.map((s) => `${s.id}>${s.next ?? ''}${s.on ? JSON.stringify(s.on) : ''}`)
}

const child = (overlay: string, extra = ''): string => `version: 1\nname: child\nextends: ./base.yaml\n${extra}overlay:\n${overlay}`

describe('composition: extends + overlay', () => {
  it('a child without an overlay is its base, named as the child', async () => {
    const loaded = await load('version: 1\nname: child\nextends: base.yaml\n')
    expect(graph(loaded)).to.deep.equal(['a>b', 'b>c', 'c>'])
    expect(loaded.pipeline.name).to.equal('child')
    expect(loaded.pipeline).to.not.have.property('extends')
  })

  it('insert_after X: X goes to the new step, which goes where X went', async () => {
    const loaded = await load(child('  - {insert_after: b, step: {id: n, kind: noop}}\n'))
    expect(graph(loaded)).to.deep.equal(['a>b', 'b>n', 'n>c', 'c>'])
  })

  it("insert_after with steps: chains them in order, the last to X's old next", async () => {
    const loaded = await load(child('  - insert_after: a\n    steps:\n      - {id: n1, kind: noop}\n      - {id: n2, kind: noop}\n'))
    expect(graph(loaded)).to.deep.equal(['a>n1', 'n1>n2', 'n2>b', 'b>c', 'c>'])
  })

  it('insert_after the last step appends; a new step keeps a next of its own', async () => {
    expect(graph(await load(child('  - {insert_after: c, step: {id: n, kind: noop}}\n')))).to.deep.equal(['a>b', 'b>c', 'c>n', 'n>'])
    expect(graph(await load(child('  - {insert_after: c, step: {id: n, kind: noop, next: a, max_iterations: 2}}\n')))).to.deep.equal([
      'a>b',
      'b>c',
      'c>n',
      'n>a',
    ])
  })

  it('insert_after a step that routes only by on: is ambiguous, reported at the operation', async () => {
    const base = BASE.replace('  - id: b\n    kind: noop\n    next: c\n', '  - id: b\n    kind: noop\n    on: {success: c}\n')
    expect(await errors(child('  - {insert_after: b, step: {id: n, kind: noop}}\n'), base)).to.deep.equal([
      'child.yaml:5:20  overlay[0].insert_after  step "b" routes by on: and has no next, so "after b" is ambiguous; insert before the step a route leads to, or replace "b"',
    ])
  })

  it('insert_before X: every transition into X (next, on:, on_exhausted, start) goes to the new step, which goes to X', async () => {
    const base = `version: 1\nname: base\nstart: b\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, next: c, max_iterations: 2, on_exhausted: c}\n  - {id: c, kind: noop, on: {error: b}, next: a}\n`
    const loaded = await load(child('  - {insert_before: b, step: {id: n, kind: noop}}\n'), base)
    expect(graph(loaded)).to.deep.equal(['a>n', 'n>b', 'b>c', 'c>a{"error":"n"}'])
    expect(loaded.pipeline.start).to.equal('n')
  })

  it('insert_before with steps ending in a choice: the choice routes by its choices (no default next), the steps it names keep their routes', async () => {
    const loaded = await load(
      child(
        [
          '  - insert_before: c',
          '    steps:',
          '      - {id: m, kind: noop}',
          '      - {id: route, kind: choice, choices: [{when: "${{ true }}", next: extra}], default: c}',
          '      - {id: extra, kind: noop, next: c}',
          '',
        ].join('\n'),
      ),
    )
    expect(graph(loaded)).to.deep.equal(['a>b', 'b>m', 'm>route', 'route>', 'extra>c', 'c>'])
    const route = loaded.pipeline.steps.find((s) => s.id === 'route') as unknown as {next?: string; default: string}
    expect(route.next).to.equal(undefined)
    expect(route.default).to.equal('c')
  })

  it('an end step inserted gets no default next: it ends the run', async () => {
    const ended = await load(child('  - {insert_after: c, steps: [{id: n, kind: noop}, {id: stop, kind: end, status: succeeded}]}\n'))
    expect(graph(ended)).to.deep.equal(['a>b', 'b>c', 'c>n', 'n>stop', 'stop>'])
  })

  it('insert_before the first step makes the new step the start', async () => {
    const loaded = await load(child('  - {insert_before: a, step: {id: n, kind: noop}}\n'))
    expect(graph(loaded)).to.deep.equal(['n>a', 'a>b', 'b>c', 'c>'])
    expect(loaded.pipeline.start).to.equal(undefined)
  })

  it("replace X: the new step takes X's place and its routes when it sets none; transitions follow a new id", async () => {
    expect(graph(await load(child('  - {replace: b, step: {id: x, kind: noop}}\n')))).to.deep.equal(['a>x', 'x>c', 'c>'])
    // A replacement that routes by itself keeps its own routes only.
    expect(graph(await load(child('  - {replace: b, step: {id: b, kind: noop, on: {success: c}}}\n')))).to.deep.equal(['a>b', 'b>{"success":"c"}', 'c>'])
  })

  it('replace X with a new id re-points every step that names X (a rollback target, a choice branch), not only next/on', async () => {
    const base = `version: 1
name: base
steps:
  - id: route
    kind: choice
    choices: [{when: "\${{ true }}", next: cp}]
    default: undo
  - {id: cp, kind: git, action: checkpoint, next: undo}
  - {id: undo, kind: git, action: rollback, to: cp}
`
    const loaded = await load(child('  - {replace: cp, step: {id: cp2, kind: git, action: checkpoint}}\n'), base)
    const steps = loaded.pipeline.steps as unknown as Array<Record<string, unknown>>
    expect(steps.map((s) => s.id)).to.deep.equal(['route', 'cp2', 'undo'])
    expect(steps[0]!.choices).to.deep.equal([{when: '${{ true }}', next: 'cp2'}])
    expect(steps[1]!.next).to.equal('undo')
    expect(steps[2]!.to).to.equal('cp2')
    // insert_before moves the routes into cp, not the rollback's target: the new step is not a checkpoint.
    const before = await load(child('  - {insert_before: cp, step: {id: prep, kind: noop}}\n'), base)
    const routed = before.pipeline.steps as unknown as Array<Record<string, unknown>>
    expect(routed.map((s) => s.id)).to.deep.equal(['route', 'prep', 'cp', 'undo'])
    expect(routed[0]!.choices).to.deep.equal([{when: '${{ true }}', next: 'prep'}])
    expect(routed[3]!.to).to.equal('cp')
    // remove leaves the rollback naming a step that is gone: an error where the rollback names it, which says what to do.
    expect(await errors(child('  - {remove: cp}\n'), base)).to.deep.equal([
      'base.yaml:9:49  steps[2].to  rollback target is step "cp", which the overlay removes (child.yaml:5); re-point it: name another step, or replace "cp" instead of removing it',
    ])
  })

  it("remove X: transitions into X go to X's next, or to the next the operation gives", async () => {
    expect(graph(await load(child('  - {remove: b}\n')))).to.deep.equal(['a>c', 'c>'])
    const four = `${BASE}    next: d\n  - id: d\n    kind: noop\n`
    expect(graph(await load(child('  - {remove: b, next: d}\n  - {remove: c}\n'), four))).to.deep.equal(['a>d', 'd>'])
  })

  it('remove the first step: the start moves to its next', async () => {
    const loaded = await load(child('  - {remove: a}\n'))
    expect(graph(loaded)).to.deep.equal(['b>c', 'c>'])
    expect(loaded.pipeline.start).to.equal('b')
  })

  it('remove a step with no next: each transition into it is an error in the file that holds it, unless the remove re-points them', async () => {
    const base = BASE.replace('  - id: b\n    kind: noop\n    next: c\n', '  - id: b\n    kind: noop\n    on: {success: c}\n')
    expect(await errors(child('  - {remove: b}\n'), base)).to.deep.equal([
      'base.yaml:8:11  steps[0].next  transition into step "b", which the overlay removes (child.yaml:5); re-point it: give the remove a next ({remove: b, next: STEP}), or replace this step',
    ])
    expect(graph(await load(child('  - {remove: b, next: c}\n'), base))).to.deep.equal(['a>c', 'c>'])
    // Re-pointed by a later operation: the transition no longer names the removed step.
    expect(graph(await load(child('  - {remove: b}\n  - {replace: a, step: {id: a, kind: noop, next: c}}\n'), base))).to.deep.equal(['a>c', 'c>'])
  })

  it('reports an unknown step id of an operation at its line with a suggestion, and a removed one as removed', async () => {
    expect(await errors(child('  - {insert_after: bb, step: {id: n, kind: noop}}\n'))).to.deep.equal([
      'child.yaml:5:20  overlay[0].insert_after  unknown step "bb" in overlay insert_after — did you mean "b"?',
    ])
    expect(await errors(child('  - {remove: b}\n  - {replace: b, step: {id: b, kind: noop}}\n'))).to.deep.equal([
      'child.yaml:6:15  overlay[1].replace  unknown step "b" in overlay replace (an earlier overlay operation removes it, at child.yaml:5)',
    ])
  })

  it('reports a step id that composition duplicates in the child, naming the base line', async () => {
    expect(await errors(child('  - {insert_after: a, step: {id: c, kind: noop}}\n'))).to.deep.equal([
      'base.yaml:9:9  steps[1].id  step "b" is unreachable from the start step "a"',
      'child.yaml:5:34  overlay[0].step.id  duplicate step id "c" (first defined on line 12 of base.yaml); to put a step in the place of one of the base, use an overlay replace',
    ])
  })

  it("checks each operation's shape: one operation, a step to insert, no next outside remove", async () => {
    expect(await errors(child('  - {insert_after: a, remove: b}\n'))).to.deep.equal([
      'child.yaml:5:5  overlay[0]  an overlay operation names exactly one of insert_before, insert_after, replace, remove (this one names insert_after and remove)',
    ])
    expect(await errors(child('  - {insert_before: a}\n'))).to.deep.equal([
      'child.yaml:5:6  overlay[0].insert_before  insert_before needs exactly one of step or steps (the steps to insert)',
    ])
    expect(await errors(child('  - {replace: a, step: {id: a, kind: noop}, next: b}\n'))).to.deep.equal([
      'child.yaml:5:45  overlay[0].next  next applies to remove; give the new step its own next',
    ])
    // The schema checks an inserted step where it is written.
    expect(await errors(child('  - {insert_after: a, step: {id: n, kind: noop, colour: red}}\n'))).to.deep.equal([
      'child.yaml:5:49  overlay[0].step.colour  unknown key "colour" in overlay[0].step',
    ])
  })

  it('reports an extends cycle naming the chain, and a missing base at the extends line', async () => {
    await write('x.yaml', 'version: 1\nname: x\nextends: ./y.yaml\n')
    await write('y.yaml', 'version: 1\nname: y\nextends: x.yaml\n')
    const result = await loadPipeline(path.join(dir, 'x.yaml'), kindCatalog)
    expect(result.ok).to.equal(false)
    const lines = result.ok ? [] : result.diagnostics.map((d) => formatDiagnostic(d).replaceAll(`${dir}/`, ''))
    expect(lines).to.include('y.yaml:3:10  extends  extends cycle: x.yaml -> y.yaml -> x.yaml; a pipeline cannot extend itself, directly or through others')
    const self = await loadPipeline(await write('self.yaml', 'version: 1\nname: s\nextends: self.yaml\n'), kindCatalog)
    expect(self.ok ? [] : self.diagnostics.map((d) => d.message)).to.deep.equal([
      'extends cycle: ' + path.join(dir, 'self.yaml') + ' -> ' + path.join(dir, 'self.yaml') + '; a pipeline cannot extend itself, directly or through others',
    ])
    const missing = await loadPipeline(await write('orphan.yaml', 'version: 1\nname: o\nextends: ../nowhere.yaml\n'), kindCatalog)
    expect(missing.ok ? [] : missing.diagnostics.map((d) => formatDiagnostic(d).replaceAll(`${dir}/`, ''))).to.deep.equal([
      `orphan.yaml:3:10  extends  cannot extend "../nowhere.yaml": file not found (looked for ${path.join(path.dirname(dir), 'nowhere.yaml')})`,
    ])
  })

  it('a chain of three: each level overlays the one below; the hash covers every file', async () => {
    await write('base.yaml', BASE)
    await write('mid.yaml', 'version: 1\nname: mid\nextends: base.yaml\noverlay:\n  - {insert_after: a, step: {id: m, kind: noop}}\n')
    const top = await write(
      'top.yaml',
      'version: 1\nname: top\nextends: mid.yaml\noverlay:\n  - {remove: b}\n  - {insert_before: m, step: {id: t, kind: noop}}\n',
    )
    const first = await loadPipeline(top, kindCatalog)
    if (!first.ok) throw new Error(first.diagnostics.map(formatDiagnostic).join('\n'))
    expect(graph(first.loaded)).to.deep.equal(['a>t', 't>m', 'm>c', 'c>'])
    expect(first.loaded.composition?.files.map((f) => path.basename(f.file))).to.deep.equal(['top.yaml', 'mid.yaml', 'base.yaml'])
    expect(first.loaded.pipeline.name).to.equal('top')
    await write('base.yaml', BASE.replace('name: base', 'name: base2'))
    const second = await loadPipeline(top, kindCatalog)
    expect(second.ok && second.loaded.hash)
      .to.be.a('string')
      .and.not.equal(first.loaded.hash)
  })

  it('locates an error of a base step in the base, and one of an inserted step in the child', async () => {
    const base = BASE.replace('    next: c\n  - id: c', '    next: cc\n  - id: c')
    const lines = await errors(child('  - {insert_after: a, step: {id: n, kind: noop, on: {nope: b}}}\n'), base)
    expect(lines).to.deep.equal([
      'base.yaml:11:11  steps[1].next  unknown step "cc" in transition — did you mean "c"?',
      'child.yaml:5:54  overlay[0].step.on.nope  a noop step has no outcome "nope" (outcomes: success, error, denied)',
    ])
  })

  it('locates the routes a replacement takes over where the replaced step wrote them', async () => {
    const base = BASE.replace('  - id: b\n    kind: noop\n    next: c\n', '  - id: b\n    kind: noop\n    outcome: done\n    on: {done: c}\n')
    expect(await errors(child('  - {replace: b, step: {id: b, kind: noop}}\n'), base)).to.deep.equal([
      'base.yaml:12:10  steps[1].on.done  a noop step has no outcome "done" (outcomes: success, error, denied)',
    ])
  })

  it('locates a transition the overlay rewrote at the operation that rewrote it', async () => {
    // The base alone is never judged by the graph rules: only the composed pipeline is.
    const base = BASE.replace('    next: c\n  - id: c', '    next: zz\n  - id: c')
    expect(await errors(child('  - {remove: b}\n'), base)).to.deep.equal(['child.yaml:5:14  overlay[0].remove  unknown step "zz" in transition'])
  })

  it("merges top-level keys: gates and provider by name, others replaced, the child's steps appended", async () => {
    const loaded = await load(
      'version: 1\nname: child\nextends: base.yaml\ndescription: mine\nprovider: {model: m2}\ngates:\n  g2: {rules: [{path: features, min_items: 1}]}\nsteps:\n  - {id: d, kind: noop}\noverlay:\n  - {replace: c, step: {id: c, kind: noop, next: d}}\n',
      BASE.replace('gates:', 'provider: {kind: offline, model: m1}\ngates:'),
    )
    expect(Object.keys(loaded.pipeline.gates ?? {})).to.deep.equal(['g1', 'g2'])
    expect(loaded.pipeline.provider).to.deep.equal({kind: 'offline', model: 'm2'})
    expect(loaded.pipeline.description).to.equal('mine')
    expect(graph(loaded)).to.deep.equal(['a>b', 'b>c', 'c>d', 'd>'])
  })

  it('a child that only sets steps it duplicates is told to use replace', async () => {
    expect(await errors('version: 1\nname: child\nextends: base.yaml\nsteps:\n  - {id: b, kind: noop}\n')).to.deep.equal([
      'base.yaml:12:9  steps[2].id  step "c" is unreachable from the start step "a"',
      'child.yaml:5:10  steps[0].id  duplicate step id "b" (first defined on line 9 of base.yaml); to put a step in the place of one of the base, use an overlay replace',
    ])
  })

  it("reads a base step's files relative to the base, an inserted step's relative to the child", async () => {
    await write('lib/prompts/compile.md', 'Compile {{input}}\n')
    await write(
      'lib/base.yaml',
      'version: 1\nname: base\nsteps:\n  - {id: ingest, kind: ingest, next: compile}\n  - {id: compile, kind: compile, prompt: prompts/compile.md}\n',
    )
    await write('app/prompts/plan.md', 'Plan {{spec}}\n')
    const file = await write(
      'app/child.yaml',
      'version: 1\nname: app\nextends: ../lib/base.yaml\noverlay:\n  - {insert_after: compile, step: {id: plan, kind: plan_tasks, prompt: prompts/plan.md}}\n',
    )
    const result = await loadPipeline(file, kindCatalog)
    if (!result.ok) throw new Error(result.diagnostics.map(formatDiagnostic).join('\n'))
    expect(stepDir(result.loaded, 'compile')).to.equal(path.join(dir, 'lib'))
    expect(stepDir(result.loaded, 'plan')).to.equal(path.join(dir, 'app'))
    // The same prompt name is looked for in the child's directory for the inserted step.
    const bad = await loadPipeline(
      await write(
        'app/bad.yaml',
        'version: 1\nname: app\nextends: ../lib/base.yaml\noverlay:\n  - {insert_after: compile, step: {id: plan, kind: plan_tasks, prompt: prompts/compile.md}}\n',
      ),
      kindCatalog,
    )
    expect(bad.ok ? [] : bad.diagnostics.map((d) => `${path.relative(dir, d.file)}:${d.line} ${d.message}`)).to.deep.equal([
      `app/bad.yaml:5 prompt file "prompts/compile.md" does not exist (looked for ${path.join(dir, 'app', 'prompts', 'compile.md')})`,
    ])
  })

  it('reports a base that is not a valid pipeline in the base, and says so at the extends line', async () => {
    const lines = await errors('version: 1\nname: child\nextends: base.yaml\n', 'version: 1\nname: base\nsteps:\n  - {id: a, kind: noop, colour: red}\n')
    expect(lines).to.deep.equal([
      'base.yaml:4:25  steps[0].colour  unknown key "colour" in steps[0]',
      'child.yaml:3:10  extends  the base pipeline "base.yaml" has errors (reported in base.yaml and the files it extends)',
    ])
  })

  it('refuses an overlay without extends, at the overlay key', async () => {
    const result = await loadPipeline(await write('lone.yaml', `${BASE}overlay:\n  - {remove: b}\n`), kindCatalog)
    expect(result.ok ? [] : result.diagnostics.map((d) => formatDiagnostic(d).replaceAll(`${dir}/`, ''))).to.deep.equal([
      'lone.yaml:14:1  overlay  "overlay" needs "extends" beside it',
    ])
  })

  it('reports a start that names a removed step with nothing to go to', async () => {
    const base = BASE.replace('name: base\n', 'name: base\nstart: b\n').replace(
      '  - id: b\n    kind: noop\n    next: c\n',
      '  - id: b\n    kind: noop\n    on: {success: c}\n',
    )
    const lines = await errors(child('  - {remove: b}\n'), base)
    expect(lines).to.include(
      'base.yaml:3:8  start  start names step "b", which the overlay removes (child.yaml:5); re-point it: give the remove a next ({remove: b, next: STEP}), or replace this step',
    )
  })

  it('keeps a pipeline without extends exactly as before (no composition, hash of its text)', async () => {
    const result = await loadPipeline(await write('plain.yaml', BASE), kindCatalog)
    expect(result.ok && result.loaded.composition).to.equal(undefined)
  })
})
