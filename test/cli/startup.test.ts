/**
 * Start-up of the built CLI: `pipe --version` answers without oclif yet says what oclif says, and the
 * commands run from the esbuild bundle (scripts/bundle.mjs), dependencies inside it.
 */
import {expect} from 'chai'
import {existsSync, readFileSync, readdirSync} from 'node:fs'
import {builtinModules} from 'node:module'
import path from 'node:path'
import {json, pipe, repoRoot} from '../helpers/cli.js'

/** Bare import specifiers (packages) of an ES module's static and literal dynamic imports. */
function packageImports(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const specifiers = [...text.matchAll(/^(?:import|export)\s*(?:[^'"();]*?\sfrom\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm)].map((m) => m[1] ?? m[2]!)
  return specifiers.filter((s) => !s.startsWith('.') && !s.startsWith('node:') && !builtinModules.includes(s))
}

// typescript: oclif reads it only to map a development checkout (never in the built CLI).
const optional = new Set(['typescript'])

describe('start-up of the built CLI', function () {
  this.timeout(120000)

  it('pipe --version prints the line oclif prints as VERSION in the root help', async () => {
    const version = await pipe(['--version'])
    expect(version.code, version.stderr).to.equal(0)
    const help = await pipe(['--help'])
    const line = /VERSION\n\s+(\S.*)\n/.exec(help.stdout)?.[1]
    expect(line, help.stdout).to.be.a('string')
    expect(version.stdout).to.equal(`${line}\n`)
    const doc = json<{version: string}>(await pipe(['--version', '--json']))
    expect(version.stdout).to.contain(`/${doc.version} `)
  })

  it('the commands, help class and hooks oclif loads are bundled: they import no package from node_modules', () => {
    const dist = path.join(repoRoot, 'dist')
    const commandFiles = (dir: string): string[] => readdirSync(dir, {withFileTypes: true}).flatMap((e) => (e.isDirectory() ? commandFiles(path.join(dir, e.name)) : e.name.endsWith('.js') ? [path.join(dir, e.name)] : []))
    const loaded = [...commandFiles(path.join(dist, 'commands')), ...['main', 'help', 'not-found', 'help-json'].map((n) => path.join(dist, 'cli', `${n}.js`)), ...readdirSync(path.join(dist, 'vendor')).map((n) => path.join(dist, 'vendor', n))]
    const chunks = readdirSync(path.join(dist, 'chunks')).map((n) => path.join(dist, 'chunks', n))
    const offenders = [...loaded, ...chunks].flatMap((file) => packageImports(file).filter((s) => !optional.has(s)).map((s) => `${path.relative(dist, file)}: ${s}`))
    expect(offenders).to.deep.equal([])
  })

  it('the run bundle requires only Node\'s modules, and imports only the vendored files, which exist', () => {
    const dist = path.join(repoRoot, 'dist')
    const text = readFileSync(path.join(dist, 'cli', 'fast-run.cjs'), 'utf8')
    const required = [...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1]!)
    expect(required.filter((s) => !builtinModules.includes(s.replace(/^node:/, '')))).to.deep.equal([])
    // bin/run.js's importer resolves a relative specifier from dist/cli/, as import() there would.
    const imported = [...text.matchAll(/\b__pipeImport\("([^"]+)"\)/g)].map((m) => m[1]!)
    expect(imported.filter((s) => s.startsWith('../vendor/')).map((s) => existsSync(path.join(dist, 'cli', s)))).to.not.include(false)
    expect(imported.filter((s) => !s.startsWith('../vendor/') && !builtinModules.includes(s.replace(/^node:/, '')))).to.deep.equal([])
    expect(text, 'an import() left in a script has no loader').to.not.match(/\bimport\(/)
  })

  it('a bundled command still finds the schemas, the standalone validators and the shipped prompts', async () => {
    const validate = await pipe(['validate', path.join(repoRoot, 'pipelines', 'default.yaml'), '--json'])
    expect(validate.code, validate.stderr).to.equal(0)
    const help = await pipe(['help', 'spec'])
    expect(help.code, help.stderr).to.equal(0)
    expect(help.stdout).to.contain('pipe spec')
  })
})
