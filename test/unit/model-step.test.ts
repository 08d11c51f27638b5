/** kind: model: how vars reach the prompt, where spec_path writes, the outputs schema, and what validate judges. */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {writesSpec} from '../../src/config/catalog.js'
import {compileOutputSchema, loadOutputSchema} from '../../src/config/output-schema.js'
import {loadPipeline} from '../../src/config/pipeline.js'
import {PipeError} from '../../src/errors.js'
import {ExprChecker} from '../../src/expr/index.js'
import {OfflineProvider} from '../../src/providers/offline/provider.js'
import {emptyBody} from '../../src/providers/spec-build.js'
import {model, renderVar, writeSection} from '../../src/steps/model.js'
import {kindCatalog} from '../../src/steps/registry.js'
import {tempDir} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-model-unit-'))
  await mkdir(path.join(dir, 'prompts'))
  await writeFile(path.join(dir, 'prompts', 'p.md'), '{{x}}\n')
})
afterEach(async () => cleanup())

describe('kind: model', () => {
  it('renders vars: strings as they are, numbers and booleans as written, null as nothing, lists and maps as indented JSON', () => {
    expect(renderVar('a {{b}}')).to.equal('a {{b}}')
    expect(renderVar(3.5)).to.equal('3.5')
    expect(renderVar(false)).to.equal('false')
    expect(renderVar(null)).to.equal('')
    expect(renderVar(['a', 1])).to.equal('[\n  "a",\n  1\n]')
    expect(renderVar({k: {v: true}})).to.equal('{\n  "k": {\n    "v": true\n  }\n}')
  })

  it('writes spec_path under sections, creating maps, never touching the body it was given', () => {
    const body = emptyBody()
    const once = writeSection(body, 'notes', {items: []})
    const twice = writeSection(once, 'summary.short.text', 'hi')
    expect(body.sections).to.equal(undefined)
    expect(once.sections).to.deep.equal({notes: {items: []}})
    expect(twice.sections).to.deep.equal({notes: {items: []}, summary: {short: {text: 'hi'}}})
    expect(twice.goal).to.equal('')
    expect(() => writeSection(once, 'notes.items.x', 1)).to.throw(PipeError, /goes through sections.notes.items, which holds a list/)
  })

  it('declares only success as its outcome, and writes a spec only with spec_path', () => {
    const step = {id: 'd', kind: 'model' as const, prompt: 'prompts/p.md', output_schema: 's.json'}
    expect(model.outcomes(step)).to.deep.equal(['success'])
    expect(kindCatalog['model']!.changesSpec).to.be.a('function')
    const changes = kindCatalog['model']!.changesSpec as (s: unknown) => boolean
    expect(changes(step)).to.equal(false)
    expect(changes({...step, spec_path: 'notes'})).to.equal(true)
    expect(writesSpec(kindCatalog, {id: 'c', kind: 'compile'})).to.equal(true)
  })

  it('declares its outputs as {value: the output schema}, so expressions can read and are checked against it', async () => {
    await writeFile(
      path.join(dir, 's.json'),
      JSON.stringify({
        type: 'object',
        required: ['items'],
        properties: {items: {type: 'array', items: {$ref: '#/definitions/item'}}},
        definitions: {item: {type: 'object', properties: {title: {type: 'string'}}}},
      }),
    )
    const step = {id: 'draft', kind: 'model' as const, prompt: 'prompts/p.md', output_schema: 's.json', spec_path: 'notes'}
    const schema = kindCatalog['model']!.outputsSchema!(step, {dir}) as Record<string, unknown>
    expect(schema['required']).to.deep.equal(['value'])
    expect(Object.keys(schema['properties'] as object)).to.deep.equal(['value', 'spec_version_out'])
    const checker = new ExprChecker({steps: {draft: {outputs: schema, outcomes: ['success']}}})
    expect(checker.check('steps.draft.outputs.value.items[0].title').diagnostics).to.deep.equal([])
    const wrong = checker.check('steps.draft.outputs.value.items[0].titel').diagnostics
    expect(wrong.map((d) => d.message).join(' ')).to.contain('titel')
    // A broken file leaves the value unchecked (validate reports the file itself).
    const broken = model.outputsSchema!({...step, output_schema: 'missing.json'}, {dir}) as {properties: {value: unknown}}
    expect(broken.properties.value).to.equal(true)
  })

  it('judges output schemas: draft-07 by default, 2020-12 by $schema, an object root, strict keywords', () => {
    const draft2020 = compileOutputSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {a: {type: 'array', prefixItems: [{type: 'string'}]}},
    })
    expect(draft2020).to.not.be.a('string')
    if (typeof draft2020 === 'string') return
    expect(draft2020.check({a: ['x']})).to.equal(null)
    expect(draft2020.check({a: [1]})).to.contain('/a/0 must be string')
    expect(compileOutputSchema({$schema: 'http://example.com/mine', type: 'object'})).to.match(/use draft-07/)
    expect(compileOutputSchema([1])).to.match(/root must be a JSON object/)
    expect(compileOutputSchema({type: ['object', 'null']})).to.match(/must describe a JSON object/)
    expect(compileOutputSchema({type: 'object', additionalProperties: false, properties: {a: {type: 'string'}}})).to.have.property('check')
    const closed = compileOutputSchema({type: 'object', additionalProperties: false, properties: {a: {type: 'string'}}})
    if (typeof closed !== 'string') expect(closed.check({b: 1})).to.equal('/ must NOT have additional properties (b)')
    // Two files may share an $id, and an edited file compiles again.
    expect(compileOutputSchema({$id: 'urn:x', type: 'object'})).to.not.be.a('string')
    expect(compileOutputSchema({$id: 'urn:x', type: 'object', required: ['a']})).to.not.be.a('string')
  })

  it('never reads an output schema outside the pipeline directory, nor a FIFO', () => {
    expect(loadOutputSchema(dir, '../x.json')).to.deep.include({ok: false})
    expect((loadOutputSchema(dir, '/etc/passwd') as {problem: string}).problem).to.contain('absolute path')
    expect((loadOutputSchema(dir, 'prompts') as {problem: string}).problem).to.equal('is not a file')
    // Reading a FIFO would block until a writer came; it is refused by its type.
    execFileSync('mkfifo', [path.join(dir, 'fifo.json')])
    expect((loadOutputSchema(dir, 'fifo.json') as {problem: string}).problem).to.equal('is not a file')
  })

  it('the offline provider answers a model step with E_CONFIG, not retryable', async () => {
    const error = await new OfflineProvider().generate({name: 'draft', prompt: 'x', schema: {type: 'object'}, check: () => null}).catch((e: unknown) => e)
    expect(error).to.be.instanceOf(PipeError)
    expect((error as PipeError).code).to.equal('E_CONFIG')
    expect((error as PipeError).retryable).to.equal(false)
    expect((error as PipeError).hint).to.contain('OPENAI_API_KEY')
  })

  it('counts a model step with spec_path as writing a spec for the steps after it (spec-before-use)', async () => {
    await writeFile(path.join(dir, 's.json'), JSON.stringify({type: 'object'}))
    const steps = (extra: string): string =>
      `version: 1\nname: t\nsteps:\n  - id: draft\n    kind: model\n    prompt: prompts/p.md\n    vars: {x: 1}\n    output_schema: s.json\n${extra}    next: review\n  - id: review\n    kind: review\n`
    await writeFile(path.join(dir, 'with.yaml'), steps('    spec_path: notes\n'))
    await writeFile(path.join(dir, 'without.yaml'), steps(''))
    expect((await loadPipeline(path.join(dir, 'with.yaml'), kindCatalog)).ok).to.equal(true)
    const without = await loadPipeline(path.join(dir, 'without.yaml'), kindCatalog)
    expect(without.ok).to.equal(false)
    if (!without.ok) expect(without.diagnostics.map((d) => d.rule)).to.deep.equal(['spec-before-use'])
  })
})
