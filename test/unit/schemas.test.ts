import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
// @ts-expect-error the generator is a plain .mjs script shared with npm run gen:types
import {generateTypes} from '../../scripts/gen-types-lib.mjs'
import {loadSchema} from '../../src/schema/registry.js'
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

  it('every step kind in the pipeline schema has a handler, and every handler a schema branch', () => {
    const schema = loadSchema('pipeline') as {definitions: Record<string, {properties?: {kind?: {const?: string}}}>}
    const kinds = Object.values(schema.definitions)
      .map((d) => d.properties?.kind?.const)
      .filter((k): k is string => typeof k === 'string')
      .sort()
    expect(Object.keys(registry).sort()).to.deep.equal(kinds)
    for (const [kind, handler] of Object.entries(registry)) expect(handler.kind).to.equal(kind)
  })

  it('every schema names itself and compiles', async () => {
    for (const file of (await readdir(path.join(repoRoot, 'schemas'))).filter((f) => f.endsWith('.schema.json'))) {
      const schema = JSON.parse(await readFile(path.join(repoRoot, 'schemas', file), 'utf8')) as {$id?: string; title?: string}
      expect(schema.$id, file).to.match(/^urn:pipe:schema:/)
      expect(schema.title, file).to.be.a('string')
    }
  })
})
