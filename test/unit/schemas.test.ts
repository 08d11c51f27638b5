import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
// @ts-expect-error the composer is a plain .mjs script shared with the build
import {composeSchemas} from '../../scripts/compose-schemas-lib.mjs'
// @ts-expect-error the generator is a plain .mjs script shared with npm run gen:types
import {generateTypes} from '../../scripts/gen-types-lib.mjs'
import {loadSchema} from '../../src/schema/registry.js'
import {kindOutputsSchema} from '../../src/steps/output-schemas.js'
import {registry} from '../../src/steps/registry.js'
import {repoRoot} from '../helpers/cli.js'

describe('schemas are the source of truth', () => {
  it('src/types is exactly what the schemas generate (run npm run gen:types after changing a schema)', async () => {
    const generated = (await generateTypes(repoRoot)) as Map<string, string>
    const onDisk = (await readdir(path.join(repoRoot, 'src', 'types'))).filter((f) => f.endsWith('.ts')).sort()
    expect(onDisk).to.deep.equal([...generated.keys()].sort())
    for (const [file, text] of generated) {
      expect(await readFile(path.join(repoRoot, 'src', 'types', file), 'utf8'), `src/types/${file}`).to.equal(text)
    }
  })

  it('schemas/pipeline.schema.json and schemas/step-outputs.schema.json are exactly what schemas/parts and schemas/kinds compose (run npm run compose:schemas after changing a kind)', async () => {
    const composed = (await composeSchemas(repoRoot)) as Map<string, string>
    expect([...composed.keys()].sort()).to.deep.equal(['schemas/pipeline.schema.json', 'schemas/step-outputs.schema.json'])
    for (const [file, text] of composed) expect(await readFile(path.join(repoRoot, file), 'utf8'), file).to.equal(text)
  })

  it("each kind has its config and its outputs in schemas/kinds, and a step narrows its kind's outputs, never adds to them", async () => {
    const files = (await readdir(path.join(repoRoot, 'schemas', 'kinds'))).sort()
    expect(files).to.deep.equal(
      Object.keys(registry)
        .flatMap((kind) => [`${kind}.config.json`, `${kind}.outputs.json`])
        .sort(),
    )
    const fieldsOf = (schema: unknown): string[] => Object.keys((schema as {properties?: object}).properties ?? {})
    const steps = [
      ...(['lines', 'json', 'text', undefined] as const).map((parse) => ({id: 'c', kind: 'command', run: ['true'], ...(parse ? {parse} : {})})),
      {id: 'h', kind: 'choice', choices: [{when: 'true', next: 'a'}], default: 'b'},
      {id: 'm', kind: 'model', prompt: 'p.md', output_schema: 'missing.json'},
      {id: 'g', kind: 'agent', prompt: 'p.md', tools: ['read_file']},
    ]
    for (const step of steps) {
      const handler = registry[step.kind as keyof typeof registry] as {outputsSchema?: (s: unknown, p: {dir: string}) => unknown}
      const narrowed = fieldsOf(handler.outputsSchema!(step, {dir: repoRoot}))
      expect(fieldsOf(kindOutputsSchema(step.kind as 'command')), `${step.kind} ${JSON.stringify(step)}`).to.include.members(narrowed)
    }
  })

  it('every step kind in the pipeline schema has a handler, and every handler a schema branch', () => {
    const schema = loadSchema('pipeline') as {definitions: Record<string, {properties?: {kind?: {const?: string}}}>}
    const kinds = Object.values(schema.definitions)
      .map((d) => d.properties?.kind?.const)
      .filter((k): k is string => typeof k === 'string')
      .sort()
    expect(Object.keys(registry).sort()).to.deep.equal(kinds)
    for (const [kind, handler] of Object.entries(registry)) expect(handler.kind).to.equal(kind)
  })

  it('the pipeline schema lists each kind once per place: a branch in step.oneOf, its kind in stepKind (editors complete kind: from it), the common fields in stepCommon only', () => {
    type Def = {
      allOf?: Array<{$ref?: string}>
      properties?: Record<string, {const?: string}>
      unevaluatedProperties?: boolean
      enum?: string[]
      oneOf?: Array<{$ref: string}>
    }
    const defs = (loadSchema('pipeline') as {definitions: Record<string, Def>}).definitions
    const branches = defs.step!.oneOf!.map((ref) => defs[ref.$ref.split('/').pop()!]!)
    const kinds = branches.map((b) => b.properties?.kind?.const)
    expect([...defs.stepKind!.enum!].sort(), 'add the new kind to definitions.stepKind.enum').to.deep.equal([...kinds].sort())
    const common = Object.keys(defs.stepCommon!.properties!)
    for (const branch of branches) {
      expect(branch.allOf, `${branch.properties?.kind?.const}: allOf [{$ref: #/definitions/stepCommon}]`).to.deep.equal([{$ref: '#/definitions/stepCommon'}])
      expect(branch.unevaluatedProperties, `${branch.properties?.kind?.const}: unevaluatedProperties: false`).to.equal(false)
      expect(
        Object.keys(branch.properties ?? {}).filter((k) => k !== 'kind' && common.includes(k)),
        `${branch.properties?.kind?.const} repeats common fields`,
      ).to.deep.equal([])
    }
  })

  it('the build has a standalone validator for every schema, and it judges as ajv does at run time', async () => {
    const {createRequire} = await import('node:module')
    const require = createRequire(import.meta.url)
    type AjvClass = new (o: object) => {compile(s: object): (d: unknown) => boolean}
    const addFormats = (require('ajv-formats') as {default: (a: object) => void}).default
    const {ajvModuleFor, ajvOptions} = await import('../../src/schema/options.js')
    const samples: unknown[] = [{}, {version: 1, name: 'x', steps: [{id: 'a', kind: 'noop'}]}, {answers: {'Q-001': 'yes'}}, {run_id: 'R-1'}, []]
    for (const sub of ['', 'model']) {
      for (const file of (await readdir(path.join(repoRoot, 'schemas', sub))).filter((f) => f.endsWith('.schema.json'))) {
        const name = `${sub ? `${sub}-` : ''}${file.replace('.schema.json', '')}`
        const built = require(path.join(repoRoot, 'dist', 'schema', 'validators', `${name}.cjs`)) as (d: unknown) => boolean
        const schema = JSON.parse(await readFile(path.join(repoRoot, 'schemas', sub, file), 'utf8')) as {$schema?: string}
        const Ajv = (require(ajvModuleFor(schema)) as {default: AjvClass}).default
        const ajv = new Ajv({...ajvOptions})
        addFormats(ajv)
        const compiled = ajv.compile(schema)
        for (const sample of samples) expect(built(sample), `${name} on ${JSON.stringify(sample)}`).to.equal(compiled(sample))
        // One character outside ASCII and V8 holds the whole source two bytes a character, for as long as the process runs.
        const source = await readFile(path.join(repoRoot, 'dist', 'schema', 'validators', `${name}.cjs`), 'utf8')
        expect(source.match(/[\u0080-\uffff]/g) ?? [], `${name}.cjs holds characters outside ASCII`).to.deep.equal([])
      }
    }
  })

  it('every schema names itself and compiles', async () => {
    for (const file of (await readdir(path.join(repoRoot, 'schemas'))).filter((f) => f.endsWith('.schema.json'))) {
      const schema = JSON.parse(await readFile(path.join(repoRoot, 'schemas', file), 'utf8')) as {$id?: string; title?: string}
      expect(schema.$id, file).to.match(/^urn:pipe:schema:/)
      expect(schema.title, file).to.be.a('string')
    }
  })
})
