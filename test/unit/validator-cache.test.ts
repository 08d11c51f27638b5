import {expect} from 'chai'
import {buildSync} from 'esbuild'
import {spawnSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {repoRoot} from '../helpers/cli.js'

/**
 * src/schema/registry.ts bundled by esbuild, as the build bundles it into the CLI: each load below is
 * a process of its own, and plain node starts one in a quarter of the CPU that node with tsx (which
 * compiles the sources it imports) takes.
 */
const bundled = mkdtempSync(path.join(os.tmpdir(), 'pipe-vcache-registry-'))
process.on('exit', () => rmSync(bundled, {recursive: true, force: true}))
const registrySource = path.join(bundled, 'registry.mjs')
buildSync({
  entryPoints: [path.join(repoRoot, 'src', 'schema', 'registry.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  outfile: registrySource,
  logLevel: 'error',
})

/**
 * Loads a validator in a new process (as each pipe command does): within one process V8 reuses a
 * script it compiled from the same source and never looks at the cache. Returns whether the cache
 * was taken and the validator's answers for `values`; `write` then writes its cache.
 */
function load(file: string, values: number[], write = false, nodeFlags: string[] = []): {cached: boolean; answers: boolean[]} {
  const script = `const {loadStandalone, writeValidatorCache} = await import(${JSON.stringify(registrySource)})
const loaded = loadStandalone(${JSON.stringify(file)}, ${write})
const answers = ${JSON.stringify(values)}.map((v) => loaded.validate(v))
if (${write}) writeValidatorCache(${JSON.stringify(file)})
console.log(JSON.stringify({cached: loaded.cached, answers}))`
  // The timeout only turns a hang (a cache file that never ends) into a failure; it measures nothing.
  const child = spawnSync(process.execPath, [...nodeFlags, '--input-type=module', '-e', script], {encoding: 'utf8', cwd: repoRoot, timeout: 60000})
  if (child.status !== 0) throw new Error(`${child.signal ?? ''} ${child.stderr}`)
  return JSON.parse(child.stdout) as {cached: boolean; answers: boolean[]}
}

describe('standalone validators through their V8 code cache', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-vcache-'))
  after(() => rmSync(dir, {recursive: true, force: true}))
  const file = path.join(dir, 'v.cjs')
  const cache = path.join(dir, 'v.v8cache')
  const accepts = (n: number): string => `"use strict";module.exports = function validate(d) { return d === ${n} && typeof d === "number" }\n`

  it('compiles without a cache, takes one made for its source, and never one made for other source of the same length', () => {
    writeFileSync(file, accepts(1))
    expect(load(file, [1, 2], true)).to.deep.equal({cached: false, answers: [true, false]})
    expect(load(file, [1, 2]), 'the cache made for this source').to.deep.equal({cached: true, answers: [true, false]})
    // V8 checks only a cached script's length: the source's own hash keeps its bytecode from running for this one.
    writeFileSync(file, accepts(2))
    expect(accepts(2).length).to.equal(accepts(1).length)
    expect(load(file, [1, 2]), 'a cache made for other source').to.deep.equal({cached: false, answers: [false, true]})
  })

  it('loads no node:v8: V8 checks its own version and flags against a cache', () => {
    writeFileSync(file, accepts(7))
    load(file, [7], true)
    const script = `const {loadStandalone} = await import(${JSON.stringify(registrySource)})
const loaded = loadStandalone(${JSON.stringify(file)})
console.log(JSON.stringify({cached: loaded.cached, v8: process.moduleLoadList.includes('NativeModule v8')}))`
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {encoding: 'utf8', cwd: repoRoot, timeout: 60000})
    expect(child.status, child.stderr).to.equal(0)
    expect(JSON.parse(child.stdout)).to.deep.equal({cached: true, v8: false})
  })

  it("keeps a validator's source only in a process that writes its cache", () => {
    writeFileSync(file, accepts(5))
    rmSync(cache, {force: true})
    const script = `const {loadStandalone, writeValidatorCache} = await import(${JSON.stringify(registrySource)})
loadStandalone(${JSON.stringify(file)})
try { writeValidatorCache(${JSON.stringify(file)}); console.log('written') } catch (error) { console.log(error.message) }`
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {encoding: 'utf8', cwd: repoRoot, timeout: 60000})
    expect(child.stdout.trim()).to.equal(`${file} was not loaded in this process to have its cache written`)
    expect(readdirSync(dir)).to.not.include('v.v8cache')
  })

  it('leaves a cache unread when it is damaged, of another format, or no cache at all, and V8 one made under other flags', () => {
    writeFileSync(file, accepts(3))
    load(file, [3], true)
    const good = readFileSync(cache)
    const end = good.indexOf(0x0a)
    const [magic] = good.toString('latin1', 0, end).split(' ')
    const damaged: Array<[string, Buffer]> = [
      ['data not V8 made', Buffer.concat([good.subarray(0, end + 1), Buffer.alloc(good.length - end - 1, 7)])],
      ['data cut short', good.subarray(0, end + 20)],
      ['a header of another format', Buffer.concat([Buffer.from(`${magic} 12345\n`), good.subarray(end + 1)])],
      ['no header', good.subarray(end + 1)],
      ['empty', Buffer.alloc(0)],
      // V8 checks little of the data itself: a changed byte of bytecode ran, or crashed the process.
      ...[0.25, 0.5, 0.75].map((share): [string, Buffer] => {
        const bytes = Buffer.from(good)
        const at = end + 1 + Math.floor((good.length - end - 1) * share)
        bytes[at] = bytes[at]! ^ 0x5a
        return [`one byte of the data changed (${at})`, bytes]
      }),
    ]
    for (const [what, bytes] of damaged) {
      writeFileSync(cache, bytes)
      expect(load(file, [3, 4]), what).to.deep.equal({cached: false, answers: [true, false]})
    }
    writeFileSync(cache, good)
    // The header names no V8 version or flags: V8 compares its own (a flag given to node changes them) and refuses the cache.
    expect(load(file, [3, 4], false, ['--stack-size=2000']), 'under other V8 flags').to.deep.equal({cached: false, answers: [true, false]})
    expect(load(file, [3, 4]), 'the cache as written').to.deep.equal({cached: true, answers: [true, false]})
  })

  it('takes a validator file cut short or emptied (an install overwriting it) as missing: null, and the caller compiles the schema', () => {
    const whole = accepts(4)
    const script = `const {loadStandalone} = await import(${JSON.stringify(registrySource)})
const {writeFileSync} = await import('node:fs')
const answers = []
for (const text of ${JSON.stringify(['', whole.slice(0, whole.length >> 1), '"use strict";', whole])}) {
  writeFileSync(${JSON.stringify(file)}, text)
  const loaded = loadStandalone(${JSON.stringify(file)})
  answers.push(loaded === null ? null : loaded.validate(4))
}
console.log(JSON.stringify(answers))`
    rmSync(cache, {force: true})
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {encoding: 'utf8', cwd: repoRoot, timeout: 60000})
    expect(child.status, child.stderr).to.equal(0)
    expect(JSON.parse(child.stdout)).to.deep.equal([null, null, null, true])
  })

  it('reads no cache that is a FIFO, a folder or a symlink to a cache of other source, and still validates', () => {
    writeFileSync(file, accepts(5))
    rmSync(cache, {recursive: true, force: true})
    // A FIFO with no writer: reading it would wait forever, in every command.
    expect(spawnSync('mkfifo', [cache]).status).to.equal(0)
    expect(load(file, [5, 6]), 'a FIFO').to.deep.equal({cached: false, answers: [true, false]})
    rmSync(cache)
    mkdirSync(cache)
    expect(load(file, [5, 6]), 'a folder').to.deep.equal({cached: false, answers: [true, false]})
    rmSync(cache, {recursive: true})
    const other = path.join(dir, 'other.cjs')
    writeFileSync(other, accepts(6))
    load(other, [6], true)
    symlinkSync(path.join(dir, 'other.v8cache'), cache)
    expect(load(file, [5, 6]), 'a symlink to the cache of other source').to.deep.equal({cached: false, answers: [true, false]})
    rmSync(cache)
  })

  it('an ordinary command with PIPE_BUILD_CODE_CACHE set writes nothing into the installation and exits as it would', () => {
    const validators = path.join(repoRoot, 'dist', 'schema', 'validators')
    const state = (): Record<string, string> =>
      Object.fromEntries(
        readdirSync(validators)
          .sort()
          .map((f) => [
            f,
            createHash('sha256')
              .update(readFileSync(path.join(validators, f)))
              .digest('hex'),
          ]),
      )
    const before = state()
    expect(
      Object.keys(before).filter((f) => f.endsWith('.v8cache')),
      'the build made caches',
    ).to.not.have.length(0)
    const cwd = mkdtempSync(path.join(os.tmpdir(), 'pipe-vcache-env-'))
    after(() => rmSync(cwd, {recursive: true, force: true}))
    const validate = (extra: Record<string, string>): {status: number | null; stdout: string; stderr: string} =>
      spawnSync(process.execPath, [path.join(repoRoot, 'bin', 'run.js'), 'validate', path.join(repoRoot, 'pipelines', 'default.yaml')], {
        encoding: 'utf8',
        cwd,
        env: {...process.env, PIPE_HOME: path.join(cwd, 'home'), ...extra},
      })
    const plain = validate({})
    expect(plain.status, plain.stderr).to.equal(0)
    // As a user would leave it set in a shell, for a command other than the build's default run.
    const withVariable = validate({PIPE_BUILD_CODE_CACHE: '1'})
    expect({status: withVariable.status, stdout: withVariable.stdout, stderr: withVariable.stderr}).to.deep.equal({
      status: 0,
      stdout: plain.stdout,
      stderr: plain.stderr,
    })
    expect(state(), 'the validators folder after the command').to.deep.equal(before)
  })

  it('the build caches the validators of a default run, and the CLI (under its V8 flags) takes them', () => {
    // The flags the CLI sets (src/cli/v8-flags.ts), read from there, so that this check follows them.
    const flags = [...readFileSync(path.join(repoRoot, 'src', 'cli', 'v8-flags.ts'), 'utf8').matchAll(/\['(--[a-z-]+)', '([^']+)'\]/g)].map(
      (m) => `${m[1]}=${m[2]}`,
    )
    expect(flags, 'src/cli/v8-flags.ts lists V8 flags as [flag, value] pairs').to.have.length.greaterThan(0)
    const script = `import {setFlagsFromString} from 'node:v8'
for (const f of ${JSON.stringify(flags)}) setFlagsFromString(f)
const {loadStandalone} = await import(${JSON.stringify(registrySource)})
const out = {}
for (const n of ['pipeline', 'ledger']) out[n] = loadStandalone(${JSON.stringify(path.join(repoRoot, 'dist', 'schema', 'validators'))} + '/' + n + '.cjs').cached
console.log(JSON.stringify(out))`
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {encoding: 'utf8', cwd: repoRoot})
    expect(child.status, child.stderr).to.equal(0)
    // The records a run builds itself (run, snapshot, spec, evidence) are not validated on their way in: a default run loads no validator of theirs.
    expect(JSON.parse(child.stdout)).to.deep.equal({pipeline: true, ledger: true})
  })
  it("has every kind's outputs validator in one script, which the build caches from a default run and the CLI takes", () => {
    const flags = [...readFileSync(path.join(repoRoot, 'src', 'cli', 'v8-flags.ts'), 'utf8').matchAll(/\['(--[a-z-]+)', '([^']+)'\]/g)].map(
      (m) => `${m[1]}=${m[2]}`,
    )
    const kinds = readdirSync(path.join(repoRoot, 'schemas', 'kinds'))
      .filter((f) => f.endsWith('.outputs.json'))
      .map((f) => f.replace('.outputs.json', ''))
    expect(kinds, 'the kinds declared in schemas/kinds/').to.include.members(['compile', 'publish', 'noop'])
    const script = `import {setFlagsFromString} from 'node:v8'
for (const f of ${JSON.stringify(flags)}) setFlagsFromString(f)
const {loadKindValidators} = await import(${JSON.stringify(registrySource)})
const loaded = loadKindValidators(${JSON.stringify(path.join(repoRoot, 'dist', 'schema', 'validators', 'outputs.cjs'))})
const kinds = ${JSON.stringify(kinds)}
console.log(JSON.stringify({cached: loaded.cached, validators: kinds.filter((k) => typeof loaded.validators.validator(k) === 'function').length, unknown: loaded.validators.validator('no_such_kind') ?? null}))`
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {encoding: 'utf8', cwd: repoRoot})
    expect(child.status, child.stderr).to.equal(0)
    // One file, one cache and one compile for every kind a run uses (a default run: 7), not one of each per kind.
    expect(JSON.parse(child.stdout)).to.deep.equal({cached: true, validators: kinds.length, unknown: null})
    expect(readdirSync(path.join(repoRoot, 'dist', 'schema', 'validators')).filter((f) => f.startsWith('outputs-'))).to.deep.equal([])
  })
})
