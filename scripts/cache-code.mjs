#!/usr/bin/env node
// Makes the V8 code caches (src/util/code-cache.ts says what they hold and how they are checked):
// each group's bundle's, dist/cli/GROUP.v8cache, and the standalone validators',
// dist/schema/validators/*.v8cache. Each comes from a command of the group run through bin/run.js,
// as a user runs it: the same V8 flags (a cache made under other flags is refused), and the
// functions the command compiles are the ones cached. A group with no command here is cached as
// loaded: its top level only, which still spares V8 parsing the script. The commands run offline,
// in a temporary folder, with a bare environment so that no user setting (a provider, a store)
// reaches them.
import {mkdtempSync, readdirSync, rmSync} from 'node:fs'
import {spawnSync} from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dist = path.join(root, 'dist')
const folders = [path.join(dist, 'cli'), path.join(dist, 'schema', 'validators')]
const cachesIn = () => folders.flatMap((folder) => readdirSync(folder).filter((f) => f.endsWith('.v8cache')).map((f) => path.join(folder, f)))
const groups = readdirSync(path.join(dist, 'cli')).filter((f) => f.endsWith('.cjs') && f !== 'boot.cjs').map((f) => path.basename(f, '.cjs'))
// In this order: the run makes the store audit verify reads. validate checks against the shipped
// policy.yaml, as in a checkout that has one: the policy's validator is cached too (without it, a
// run or validate compiled dist/schema/validators/policy.cjs, 92 KB, from source in every project
// with a policy file). A validator's cache serves every group.
const COMMANDS = {
  run: ['run', path.join(root, 'pipelines', 'default.yaml'), '--input', path.join(root, 'examples', 'full-prd.md'), '--decision', 'go'],
  author: ['validate', path.join(root, 'pipelines', 'default.yaml'), '--policy', path.join(root, 'policy.yaml')],
  store: ['audit', 'verify'],
}
const boot = path.join(dist, 'cli', 'boot.cjs')
const argvOf = (group) => (COMMANDS[group] ? [path.join(root, 'bin', 'run.js'), ...COMMANDS[group]] : ['-e', `require(${JSON.stringify(boot)}).loadCli(${JSON.stringify(root)}, ${JSON.stringify(group)})`])
// Caches of an earlier build are not this build's: a command that fails must leave none behind.
for (const stale of cachesIn()) rmSync(stale, {force: true})
const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-code-cache-'))
try {
  for (const group of [...Object.keys(COMMANDS), ...groups.filter((g) => !COMMANDS[g])]) {
    // The variable names the dist/ folder the process may write to (src/util/code-cache.ts): no other value writes anything.
    const run = spawnSync(process.execPath, argvOf(group), {
      cwd: dir,
      encoding: 'utf8',
      env: {PATH: process.env.PATH ?? '', HOME: dir, PIPE_BUILD_CODE_CACHE: dist},
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 10 * 60 * 1000,
    })
    if (run.status !== 0) {
      for (const stale of cachesIn()) rmSync(stale, {force: true})
      const why = run.error ? run.error.message : run.signal ? `killed by ${run.signal}` : `exit ${run.status}`
      process.stderr.write(`${run.stderr ?? ''}\ncache-code: the ${group} group's command failed (${why}); no caches written\n`)
      process.exit(1)
    }
  }
} finally {
  rmSync(dir, {recursive: true, force: true})
}
const caches = cachesIn().map((f) => path.relative(dist, f))
const missing = groups.filter((g) => !caches.includes(path.join('cli', `${g}.v8cache`)))
if (missing.length > 0 || caches.length === groups.length) {
  process.stderr.write(`cache-code: no cache for ${missing.length > 0 ? missing.join(', ') : 'any validator'}\n`)
  process.exit(1)
}
console.log(`cached ${caches.length} scripts (${caches.map((f) => f.replace(/\.v8cache$/, '')).join(', ')})`)
