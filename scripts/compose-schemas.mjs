#!/usr/bin/env node
// Writes schemas/pipeline.schema.json and schemas/step-outputs.schema.json from schemas/parts/ and
// schemas/kinds/ (see compose-schemas-lib.mjs). `--check` writes nothing and exits 1 when a
// checked-in file differs from what the parts compose (the drift test runs the same comparison).
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {composeSchemas} from './compose-schemas-lib.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const check = process.argv.includes('--check')
let drift = 0
for (const [file, text] of await composeSchemas(root)) {
  const current = await readFile(path.join(root, file), 'utf8').catch(() => null)
  if (current === text) continue
  if (check) {
    console.error(`drift: ${file} differs from what schemas/parts and schemas/kinds compose; run npm run compose:schemas`)
    drift++
  } else {
    await writeFile(path.join(root, file), text)
    console.log(`wrote ${file}`)
  }
}
process.exit(drift ? 1 : 0)
