import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {formatDiagnostic, type Diagnostic} from '../../src/config/diagnostics.js'
import {loadPipeline} from '../../src/config/pipeline.js'
import {kindCatalog} from '../../src/steps/registry.js'
import type {Step} from '../../src/types/pipeline.js'
import {tempDir} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>

before(async () => ({dir, cleanup} = await tempDir('pipe-loader-')))
after(async () => cleanup())

async function load(name: string, content: string | Buffer): Promise<Diagnostic[]> {
  const file = path.join(dir, name)
  await writeFile(file, content)
  const result = await loadPipeline(file, kindCatalog)
  return result.ok ? [] : result.diagnostics
}

function lines(diagnostics: Diagnostic[]): string[] {
  return diagnostics.map((d) => formatDiagnostic(d).replace(`${dir}/`, ''))
}

const header = 'version: 1\nname: t\n'

describe('pipeline loader: YAML input classes', () => {
  it('refuses an empty file', async () => {
    expect(lines(await load('empty.yaml', ''))).to.deep.equal(['empty.yaml:1:1  (root)  file is empty; expected a YAML mapping'])
  })

  it('refuses a file of only comments', async () => {
    expect(lines(await load('comments.yaml', '# nothing\n\n# here\n'))).to.deep.equal([
      'comments.yaml:1:1  (root)  file has no content (only comments or blank lines); expected a YAML mapping',
    ])
  })

  it('refuses a binary file', async () => {
    expect(lines(await load('bin.yaml', Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0x01])))).to.deep.equal([
      'bin.yaml:1:1  (root)  file is binary (NUL byte at offset 4), not YAML text',
    ])
  })

  it('refuses text that is not UTF-8', async () => {
    expect(lines(await load('latin1.yaml', Buffer.from([0x6e, 0x61, 0x6d, 0x65, 0x3a, 0x20, 0xe9, 0x0a])))).to.deep.equal([
      'latin1.yaml:1:1  (root)  file is not valid UTF-8 text; save it as UTF-8',
    ])
  })

  it('refuses a top level that is a list, or a scalar', async () => {
    expect(lines(await load('list.yaml', '- a\n- b\n'))).to.deep.equal([
      'list.yaml:1:1  (root)  the top level must be a mapping (key: value lines), but the file holds a list',
    ])
    expect(lines(await load('scalar.yaml', 'just words\n'))).to.deep.equal([
      'scalar.yaml:1:1  (root)  the top level must be a mapping (key: value lines), but the file holds a single value ("just words")',
    ])
  })

  it('reports a duplicate key at the second occurrence', async () => {
    expect(lines(await load('dup.yaml', `${header}steps:\n  - {id: a, kind: noop}\nname: again\n`))).to.deep.equal([
      'dup.yaml:5:1  (root)  duplicate key "name" (keys of a mapping must be unique)',
    ])
  })

  it('reports duplicate keys in nested and flow mappings, but not keys that differ in type or repeated merge keys', async () => {
    const found = lines(
      await load(
        'dups.yaml',
        `${header}inputs:\n  a: {type: string, type: integer}\n  b: {type: string}\n  b: {type: string}\nsteps:\n  - {id: a, kind: noop}\n`,
      ),
    )
    expect(found).to.deep.equal([
      'dups.yaml:4:21  (root)  duplicate key "type" (keys of a mapping must be unique)',
      'dups.yaml:6:3  (root)  duplicate key "b" (keys of a mapping must be unique)',
    ])
    const base = '  - &s {id: a, kind: noop}\n'
    const other = lines(await load('merge.yaml', `${header}x: {1: one, "1": two}\nsteps:\n${base}  - {<<: *s, <<: {kind: noop}, id: b}\n`))
    expect(other.filter((line) => line.includes('duplicate'))).to.deep.equal([])
    expect(other).to.have.length.greaterThan(0)
  })

  it('reports a syntax error where it is', async () => {
    const found = lines(await load('syntax.yaml', `${header}steps:\n  - id: a\n    kind: [noop\n`))
    expect(found).to.have.length.greaterThan(0)
    expect(found[0]).to.match(/^syntax\.yaml:[56]:\d+ {2}\(root\) {2}/)
  })

  it('refuses an alias-expansion bomb quickly', async () => {
    let bomb = `${header}a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n`
    for (let i = 1; i < 20; i++)
      bomb += `a${i}: &a${i} [${Array(10)
        .fill(`*a${i - 1}`)
        .join(', ')}]\n`
    const found = lines(await load('bomb.yaml', bomb))
    expect(found).to.deep.equal(['bomb.yaml:1:1  (root)  refused: aliases would expand past 200 nodes (an alias-expansion bomb?)'])
  })

  it('accepts anchors, aliases, merge keys and block strings', async () => {
    const text = `${header}description: |\n  Two lines\n  of text.\nsteps:\n  - &base {id: a, kind: noop, timeout_ms: 1000, next: b}\n  - <<: *base\n    id: b\n    next: c\n  - {id: c, kind: noop}\n`
    expect(lines(await load('anchors.yaml', text))).to.deep.equal([])
  })
})

describe('pipeline loader: schema errors point at the node', () => {
  it('points an unknown key at the key, with a suggestion', async () => {
    const text = `${header}steps:\n  - id: a\n    kind: noop\n    nxt: a\n`
    expect(lines(await load('unknown-key.yaml', text))).to.deep.equal([
      'unknown-key.yaml:6:5  steps[0].nxt  unknown key "nxt" in steps[0] — did you mean "next"?',
    ])
  })

  it("suggests from the common step fields and the kind's own alike, one error per unknown key", async () => {
    const text = `${header}steps:\n  - id: a\n    kind: command\n    run: [node, -v]\n    rnu: [x]\n    on_exhaustd: a\n`
    expect(lines(await load('shared-keys.yaml', text))).to.deep.equal([
      'shared-keys.yaml:7:5  steps[0].rnu  unknown key "rnu" in steps[0] — did you mean "run"?',
      'shared-keys.yaml:8:5  steps[0].on_exhaustd  unknown key "on_exhaustd" in steps[0] — did you mean "on_exhausted"?',
    ])
  })

  it('points an unknown step kind at the kind, with a suggestion', async () => {
    const text = `${header}steps:\n  - id: a\n    kind: compil\n`
    const [first] = lines(await load('kind.yaml', text))
    expect(first).to.match(/^kind\.yaml:5:11 {2}steps\[0\]\.kind {2}unknown step kind "compil" — did you mean "compile"\? \(kinds: /)
  })

  it('points a missing required key at the mapping', async () => {
    const text = `${header}steps:\n  - id: g\n    kind: gate\n`
    expect(lines(await load('required.yaml', text))).to.deep.equal(['required.yaml:4:5  steps[0]  missing required key "gates"'])
  })

  it('points a wrong type at the value', async () => {
    const text = `${header}steps:\n  - id: a\n    kind: noop\n    timeout_ms: soon\n`
    expect(lines(await load('type.yaml', text))).to.deep.equal(['type.yaml:6:17  steps[0].timeout_ms  must be integer, found "soon"'])
  })

  it('rejects an unknown top-level key with a suggestion', async () => {
    const text = `${header}stpes: []\nsteps:\n  - {id: a, kind: noop}\n`
    expect(lines(await load('top.yaml', text))).to.deep.equal(['top.yaml:3:1  stpes  unknown key "stpes" in a pipeline — did you mean "steps"?'])
  })

  it('collects every error, not just the first', async () => {
    const text = `${header}steps:\n  - id: a\n    kind: noop\n    colour: red\n  - id: B\n    kind: noop\n`
    expect(await load('many.yaml', text)).to.have.length(2)
  })
})

describe('pipeline loader: graph rules', () => {
  it('reports a misspelt transition on its line, with a suggestion', async () => {
    const text = `${header}steps:\n  - id: ingest\n    kind: noop\n    next: compil\n  - id: compile\n    kind: noop\n`
    expect(lines(await load('target.yaml', text))).to.deep.equal([
      'target.yaml:6:11  steps[0].next  unknown step "compil" in transition — did you mean "compile"?',
    ])
  })

  it('reports duplicate step ids', async () => {
    const text = `${header}steps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop}\n  - {id: a, kind: noop}\n`
    expect(lines(await load('dupid.yaml', text))).to.include('dupid.yaml:6:10  steps[2].id  duplicate step id "a" (first defined on line 4)')
  })

  it('reports an unreachable step', async () => {
    const text = `${header}steps:\n  - {id: a, kind: noop}\n  - {id: lonely, kind: noop}\n`
    expect(lines(await load('unreachable.yaml', text))).to.deep.equal([
      'unreachable.yaml:5:10  steps[1].id  step "lonely" is unreachable from the start step "a"',
    ])
  })

  it('reports a cycle without max_iterations, and accepts it once bounded', async () => {
    const loop = `${header}steps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, outcome: again, on: {again: a}}\n`
    expect(lines(await load('loop.yaml', loop))).to.deep.equal([
      'loop.yaml:4:10  steps[0].id  steps a -> b form a cycle with no bound; set max_iterations on one of them',
    ])
    expect(await load('bounded.yaml', loop.replace('kind: noop, next: b', 'kind: noop, next: b, max_iterations: 3'))).to.deep.equal([])
  })

  it('reports a self-loop without a bound', async () => {
    const text = `${header}steps:\n  - {id: a, kind: noop, next: a}\n`
    expect(lines(await load('self.yaml', text))).to.deep.equal([
      'self.yaml:4:10  steps[0].id  steps a form a cycle with no bound; set max_iterations on one of them',
    ])
  })

  it('reports a gate used but not defined', async () => {
    const text = `${header}gates:\n  gate_s: {rules: [{path: goal, required: true}]}\nsteps:\n  - {id: g, kind: gate, gates: [gate_x]}\n`
    expect(lines(await load('gate.yaml', text))).to.deep.equal([
      'gate.yaml:6:33  steps[0].gates[0]  gate "gate_x" is used but not defined — did you mean "gate_s"? (defined: gate_s)',
    ])
  })

  it('reports an outcome the kind never produces', async () => {
    const text = `${header}gates:\n  g: {rules: [{path: goal, required: true}]}\nsteps:\n  - id: g\n    kind: gate\n    gates: [g]\n    on:\n      pas: done\n      fail: done\n  - {id: done, kind: noop}\n`
    expect(lines(await load('outcome.yaml', text))).to.deep.equal([
      'outcome.yaml:10:7  steps[0].on.pas  a gate step has no outcome "pas" — did you mean "pass"? (outcomes: pass, fail, error, denied)',
    ])
  })

  it('reports a step kind with no registered handler', async () => {
    const result = await loadPipeline(path.join(dir, 'kind.yaml'), {noop: {outcomes: () => ['success']}})
    expect(result.ok).to.equal(false)
    await writeFile(path.join(dir, 'registered.yaml'), `${header}steps:\n  - {id: a, kind: compile}\n`)
    const unregistered = await loadPipeline(path.join(dir, 'registered.yaml'), {noop: {outcomes: () => ['success']}})
    expect(unregistered.ok ? [] : lines(unregistered.diagnostics)).to.deep.equal([
      'registered.yaml:4:19  steps[0].kind  step kind "compile" has no handler registered',
    ])
  })

  it('reports a prompt file that does not exist', async () => {
    await mkdir(path.join(dir, 'prompts'), {recursive: true})
    await writeFile(path.join(dir, 'prompts', 'there.md'), 'hello')
    const ok = `${header}steps:\n  - {id: c, kind: compile, prompt: prompts/there.md}\n`
    expect(await load('prompt-ok.yaml', ok)).to.deep.equal([])
    const missing = `${header}steps:\n  - {id: c, kind: compile, prompt: prompts/gone.md}\n`
    const [only] = lines(await load('prompt.yaml', missing))
    expect(only).to.match(/^prompt\.yaml:4:36 {2}steps\[0\]\.prompt {2}prompt file "prompts\/gone\.md" does not exist/)
  })

  it('reports a prompt that uses a variable its step does not fill', async () => {
    await mkdir(path.join(dir, 'prompts'), {recursive: true})
    await writeFile(path.join(dir, 'prompts', 'vars.md'), 'Requirement:\n{{ input }} from {{source_ref}}\nand {{inptu}}\n')
    const text = `${header}steps:\n  - {id: c, kind: compile, prompt: prompts/vars.md}\n`
    expect(lines(await load('vars.yaml', text))).to.deep.equal([
      'vars.yaml:4:36  steps[0].prompt  prompt file "prompts/vars.md" line 3 column 5 uses {{inptu}}, which a compile step does not fill — did you mean "input"? (variables: input, source_ref, previous_spec)',
    ])
  })

  it('reports a gate rule with no check and a bad regular expression', async () => {
    const text = `${header}gates:\n  g:\n    rules:\n      - {path: goal}\n      - {path: goal, pattern: "([a-z"}\nsteps:\n  - {id: g, kind: gate, gates: [g]}\n`
    expect(lines(await load('rules.yaml', text))).to.deep.equal([
      'rules.yaml:6:9  gates.g.rules[0]  gate rule on "goal" names no check; add one of: required, min_items, max_items, min_length, pattern, enum',
      'rules.yaml:7:31  gates.g.rules[1].pattern  invalid regular expression: Invalid regular expression: /([a-z/u: Unterminated character class',
    ])
  })

  it('accepts the shipped default pipeline', async () => {
    const result = await loadPipeline(path.resolve('pipelines/default.yaml'), kindCatalog)
    expect(result.ok ? [] : result.diagnostics.map(formatDiagnostic)).to.deep.equal([])
  })
})

describe('pipeline loader: spec-before-use', () => {
  it('walks the paths for a spec once per load, for its error and its warning alike', async () => {
    const {specReach} = await import('../../src/config/graph.js')
    const {writesSpec} = await import('../../src/config/catalog.js')
    let asked = 0
    const counting: typeof kindCatalog = Object.fromEntries(
      Object.entries(kindCatalog).map(([kind, info]) => [kind, {...info, changesSpec: (step: Step) => (asked++, writesSpec(kindCatalog, step))}]),
    )
    // A gate reached both before and after a compile: the warning's case.
    const text = `${header}steps:\n  - {id: route, kind: choice, choices: [{when: "\${{ true }}", next: make}], default: check}\n  - {id: make, kind: compile, next: check}\n  - {id: check, kind: gate, gates: [g]}\ngates:\n  g: {rules: [{path: goal, required: true}]}\n`
    const file = path.join(dir, 'reach.yaml')
    await writeFile(file, text)
    const result = await loadPipeline(file, counting)
    expect(result.ok).to.equal(true)
    if (result.ok) expect(result.warnings.map((w) => w.rule)).to.include('spec-before-use')
    const duringLoad = asked
    asked = 0
    if (result.ok) specReach(result.loaded.pipeline, counting, (step) => writesSpec(counting, step))
    expect(duringLoad).to.equal(asked)
  })
})

describe('pipeline loader: every independent error in one pass, a cascade stopped at its cause (issue 42 item 1)', () => {
  it('reports a child pipeline’s own error beside the parent’s errors, not only once the parent is valid', async () => {
    await writeFile(path.join(dir, 'bad-child.yaml'), `${header}inputs:\n  x: {type: string}\nsteps:\n  - {id: a, kind: nope}\n`)
    const text = `${header}steps:\n  - {id: run, kind: pipeline, file: bad-child.yaml, with: {x: hi}}\n  - {id: lonely, kind: noop}\n`
    const found = lines(await load('parent.yaml', text))
    expect(found).to.have.length(2)
    expect(found[0]).to.match(/^parent\.yaml:4:37 .* the pipeline bad-child\.yaml is not valid: .*bad-child\.yaml:6:\d+: unknown step kind "nope"/)
    expect(found[1]).to.equal('parent.yaml:5:10  steps[1].id  step "lonely" is unreachable from the start step "run"')
  })

  it('says to quote a scalar YAML reads as a number, a boolean or null where text is expected, as it is written', async () => {
    const text = `${header}steps:\n  - {id: a, kind: command, run: [echo, -1, 1.50, true]}\n  - {id: b, kind: end, status: succeeded, reason:}\n`
    const found = lines(await load('quote.yaml', text)).filter((l) => !l.includes('unreachable'))
    expect(found).to.deep.equal([
      'quote.yaml:4:40  steps[0].run[1]  must be string, found -1; YAML reads -1 as a number: write it in quotes, "-1"',
      'quote.yaml:4:44  steps[0].run[2]  must be string, found 1.5; YAML reads 1.50 as a number: write it in quotes, "1.50"',
      'quote.yaml:4:50  steps[0].run[3]  must be string, found true; YAML reads true as a boolean: write it in quotes, "true"',
      'quote.yaml:5:50  steps[1].reason  must be string, found null; an empty value (or ~) is null in YAML: write "" for empty text',
    ])
  })

  it('reports a double quote inside a double-quoted expression once, with the fix, not the errors that follow from it', async () => {
    const text = `${header}inputs:\n  y: {type: string, default: a}\nsteps:\n  - id: a\n    kind: choice\n    choices:\n      - {when: "\${{ inputs.y == "a" }}", next: b}\n    default: b\n  - {id: b, kind: end, status: succeeded, reason: "x"}\n  - {id: c, kind: end, status: succeeded, reason: "\${{ "c }}"}\n`
    const found = lines(await load('trap.yaml', text))
    expect(found).to.have.length(1)
    expect(found[0]).to.match(/^trap\.yaml:9:\d+ .* a double-quoted string ends at its next ": quote the whole value with single quotes/)
  })

  it('a route to an unknown step is the cause: the steps past it are not also reported unreachable', async () => {
    const text = `${header}steps:\n  - {id: a, kind: noop, next: bb}\n  - {id: b, kind: noop, next: c}\n  - {id: c, kind: noop}\n`
    expect(lines(await load('typo.yaml', text))).to.deep.equal(['typo.yaml:4:31  steps[0].next  unknown step "bb" in transition — did you mean "b"?'])
  })

  it('types nothing from a child whose outputs: cannot be read, rather than saying it declares no fields', async () => {
    await writeFile(path.join(dir, 'odd-outputs.yaml'), `${header}outputs:\n  y: {typ: string}\nsteps:\n  - {id: a, kind: end, status: succeeded, reason: r}\n`)
    const text = `${header}steps:\n  - {id: run, kind: pipeline, file: odd-outputs.yaml, next: out}\n  - {id: out, kind: end, status: succeeded, reason: "\${{ steps.run.outputs.outputs.y }}"}\n`
    const found = lines(await load('reads.yaml', text))
    expect(found.join('\n')).to.not.contain('declares no fields')
    expect(found.join('\n')).to.contain('odd-outputs.yaml is not valid')
  })
})
