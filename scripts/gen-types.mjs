#!/usr/bin/env node
// Generates src/types/*.ts from schemas/*.schema.json. `--check` exits 1 when the checked-in
// files differ from what the schemas generate (the drift test runs the same comparison).
import {readdir, readFile, writeFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'
import path from 'node:path'
import {generateTypes} from './gen-types-lib.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const check = process.argv.includes('--check')
const outputs = await generateTypes(root)
let drift = 0
for (const [file, text] of outputs) {
  const target = path.join(root, 'src', 'types', file)
  const current = await readFile(target, 'utf8').catch(() => null)
  if (current === text) continue
  if (check) {
    console.error(`drift: src/types/${file} differs from what schemas/ generate; run npm run gen:types`)
    drift++
  } else {
    await writeFile(target, text)
    console.log(`wrote src/types/${file}`)
  }
}
const expected = new Set(outputs.keys())
for (const file of await readdir(path.join(root, 'src', 'types'))) {
  if (file.endsWith('.ts') && file !== 'index.ts' && !expected.has(file)) {
    console.error(`stale: src/types/${file} has no schema`)
    drift++
  }
}
process.exit(drift ? 1 : 0)
