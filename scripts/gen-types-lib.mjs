import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {compile} from 'json-schema-to-typescript'

const banner = '/* eslint-disable */\n// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.\n'

/** Returns Map<fileName, text> of the type modules the schemas generate. */
export async function generateTypes(root) {
  const dir = path.join(root, 'schemas')
  const out = new Map()
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.schema.json')).sort()) {
    const schema = JSON.parse(await readFile(path.join(dir, file), 'utf8'))
    const text = await compile(schema, schema.title, {
      bannerComment: banner,
      additionalProperties: false,
      strictIndexSignatures: true,
      unreachableDefinitions: true,
      format: true,
      style: {singleQuote: true, semi: false, printWidth: 120},
      cwd: dir,
    })
    out.set(file.replace('.schema.json', '.ts'), text)
  }
  return out
}
