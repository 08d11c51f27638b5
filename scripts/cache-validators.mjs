#!/usr/bin/env node
// Makes the V8 code cache of the standalone validators a default run uses (src/schema/registry.ts
// says what it holds and how it is checked). The caches come from one run of the default pipeline
// through bin/run.js, as a user runs it: the same V8 flags (a cache made under other flags is
// refused), and the functions that run compiles are the ones cached. The run is offline, in a
// temporary folder, with a bare environment so that no user setting (a provider, a store) reaches it.
import {mkdtempSync, readdirSync, rmSync} from 'node:fs'
import {spawnSync} from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-validator-cache-'))
try {
  const run = spawnSync(
    process.execPath,
    [path.join(root, 'bin', 'run.js'), 'run', path.join(root, 'pipelines', 'default.yaml'), '--input', path.join(root, 'examples', 'full-prd.md'), '--decision', 'go'],
    {cwd: dir, encoding: 'utf8', env: {PATH: process.env.PATH ?? '', HOME: dir, PIPE_BUILD_VALIDATOR_CACHE: '1'}},
  )
  if (run.status !== 0) {
    process.stderr.write(`${run.stderr}\ncache-validators: the default run failed (exit ${run.status}); no caches written\n`)
    process.exit(1)
  }
} finally {
  rmSync(dir, {recursive: true, force: true})
}
const caches = readdirSync(path.join(root, 'dist', 'schema', 'validators')).filter((f) => f.endsWith('.v8cache'))
console.log(`cached ${caches.length} validators (${caches.map((f) => f.replace('.v8cache', '')).join(', ')})`)
