#!/usr/bin/env node
// Makes the V8 code caches a default run uses (src/util/code-cache.ts says what they hold and how
// they are checked): the CLI bundle's, dist/cli/main.v8cache, and the standalone validators',
// dist/schema/validators/*.v8cache. They come from one run of the default pipeline through
// bin/run.js, as a user runs it: the same V8 flags (a cache made under other flags is refused), and
// the functions that run compiles are the ones cached. The run is offline, in a temporary folder,
// with a bare environment so that no user setting (a provider, a store) reaches it.
import {existsSync, mkdtempSync, readdirSync, rmSync} from 'node:fs'
import {spawnSync} from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dist = path.join(root, 'dist')
const validators = path.join(dist, 'schema', 'validators')
const runCache = path.join(dist, 'cli', 'main.v8cache')
const cachesIn = () => [...readdirSync(validators).filter((f) => f.endsWith('.v8cache')).map((f) => path.join(validators, f)), ...(existsSync(runCache) ? [runCache] : [])]
// Caches of an earlier build are not this build's: a run that fails must leave none behind.
for (const stale of cachesIn()) rmSync(stale, {force: true})
const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-code-cache-'))
try {
  // The variable names the dist/ folder the run may write to (src/util/code-cache.ts): no other value writes anything.
  const run = spawnSync(
    process.execPath,
    [path.join(root, 'bin', 'run.js'), 'run', path.join(root, 'pipelines', 'default.yaml'), '--input', path.join(root, 'examples', 'full-prd.md'), '--decision', 'go'],
    {cwd: dir, encoding: 'utf8', env: {PATH: process.env.PATH ?? '', HOME: dir, PIPE_BUILD_CODE_CACHE: dist}, stdio: ['ignore', 'ignore', 'pipe'], timeout: 10 * 60 * 1000},
  )
  if (run.status !== 0) {
    for (const stale of cachesIn()) rmSync(stale, {force: true})
    const why = run.error ? run.error.message : run.signal ? `killed by ${run.signal}` : `exit ${run.status}`
    process.stderr.write(`${run.stderr ?? ''}\ncache-code: the default run failed (${why}); no caches written\n`)
    process.exit(1)
  }
} finally {
  rmSync(dir, {recursive: true, force: true})
}
const caches = cachesIn()
if (!caches.includes(runCache) || caches.length < 2) {
  process.stderr.write(`cache-code: the default run wrote ${caches.length === 0 ? 'no caches' : `only ${caches.map((f) => path.relative(root, f)).join(', ')}`}\n`)
  process.exit(1)
}
console.log(`cached the CLI bundle and ${caches.length - 1} validators (${caches.filter((f) => f !== runCache).map((f) => path.basename(f, '.v8cache')).join(', ')})`)
