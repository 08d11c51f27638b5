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
const validators = path.join(root, 'dist', 'schema', 'validators')
const cachesIn = () => readdirSync(validators).filter((f) => f.endsWith('.v8cache'))
const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-validator-cache-'))
try {
  // The variable names the folder the run may write to (src/schema/registry.ts): no other value writes anything.
  const run = spawnSync(
    process.execPath,
    [path.join(root, 'bin', 'run.js'), 'run', path.join(root, 'pipelines', 'default.yaml'), '--input', path.join(root, 'examples', 'full-prd.md'), '--decision', 'go'],
    {cwd: dir, encoding: 'utf8', env: {PATH: process.env.PATH ?? '', HOME: dir, PIPE_BUILD_VALIDATOR_CACHE: validators}, stdio: ['ignore', 'ignore', 'pipe'], timeout: 10 * 60 * 1000},
  )
  if (run.status !== 0) {
    // A run that failed writes no cache; one it may have left before failing is not kept either.
    for (const stale of cachesIn()) rmSync(path.join(validators, stale), {force: true})
    const why = run.error ? run.error.message : run.signal ? `killed by ${run.signal}` : `exit ${run.status}`
    process.stderr.write(`${run.stderr ?? ''}\ncache-validators: the default run failed (${why}); no caches written\n`)
    process.exit(1)
  }
} finally {
  rmSync(dir, {recursive: true, force: true})
}
const caches = cachesIn()
if (caches.length === 0) {
  process.stderr.write('cache-validators: the default run wrote no caches\n')
  process.exit(1)
}
console.log(`cached ${caches.length} validators (${caches.map((f) => f.replace('.v8cache', '')).join(', ')})`)
