/**
 * Start-up of the built CLI: `pipe --version` says what the root help says, and the commands run from
 * the one esbuild bundle (scripts/bundle.mjs), dependencies inside it.
 */
import {expect} from 'chai'
import {existsSync, readFileSync, readdirSync} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import {builtinModules} from 'node:module'
import path from 'node:path'
import {bin, defaultPipeline, examples, json, node, pipe, repoRoot, tempDir} from '../helpers/cli.js'

/** Bare import specifiers (packages) of an ES module's static and literal dynamic imports. */
function packageImports(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const specifiers = [...text.matchAll(/^(?:import|export)\s*(?:[^'"();]*?\sfrom\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm)].map(
    (m) => m[1] ?? m[2]!,
  )
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

  it("the CLI is one script that requires only Node's modules and imports only the vendored files, which exist", () => {
    const dist = path.join(repoRoot, 'dist')
    const text = readFileSync(path.join(dist, 'cli', 'main.cjs'), 'utf8')
    // oclif's module loader resolves and requires by computed paths (a plugin's files); every literal require is a Node module.
    const required = [...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1]!)
    expect(required.filter((s) => !builtinModules.includes(s.replace(/^node:/, '')) && !optional.has(s))).to.deep.equal([])
    // boot.ts's importer resolves a relative specifier from dist/cli/, as import() there would.
    const imported = [...text.matchAll(/\b__pipeImport\("([^"]+)"\)/g)].map((m) => m[1]!)
    expect(imported.filter((s) => s.startsWith('../vendor/')).map((s) => existsSync(path.join(dist, 'cli', s)))).to.not.include(false)
    expect(imported.filter((s) => !s.startsWith('../vendor/') && !builtinModules.includes(s.replace(/^node:/, '')))).to.deep.equal([])
    expect(text, 'an import() left in a script has no loader').to.not.match(/(?<![\w$.])import\(/)
    for (const file of readdirSync(path.join(dist, 'vendor')))
      expect(
        packageImports(path.join(dist, 'vendor', file)).filter((s) => !optional.has(s)),
        file,
      ).to.deep.equal([])
  })

  it('every command in src/commands/ is in the map oclif reads (src/entry/commands.ts), under its id', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir, {withFileTypes: true}).flatMap((e) =>
        e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
      )
    const commandsDir = path.join(repoRoot, 'src', 'commands')
    const ids = files(commandsDir)
      .map((f) => path.relative(commandsDir, f).replace(/\.ts$/, '').split(path.sep).join(':'))
      .sort()
    const manifest = JSON.parse(readFileSync(path.join(repoRoot, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, unknown>}
    expect(Object.keys(manifest.commands).sort()).to.deep.equal(ids)
  })

  it('a bundled command still finds the schemas, the standalone validators and the shipped prompts', async () => {
    const validate = await pipe(['validate', path.join(repoRoot, 'pipelines', 'default.yaml'), '--json'])
    expect(validate.code, validate.stderr).to.equal(0)
    const help = await pipe(['help', 'spec'])
    expect(help.code, help.stderr).to.equal(0)
    expect(help.stdout).to.contain('pipe spec')
  })
})

describe('what the built CLI does as it starts', function () {
  this.timeout(120000)

  let dir: string
  let cleanup: () => Promise<void>
  before(async () => {
    ;({dir, cleanup} = await tempDir('pipe-startup-'))
  })
  after(() => cleanup())

  /** `pipe ARGS` in a folder of its own, with what it loaded and read (test/helpers/record-loads.cjs). */
  async function recorded(name: string, args: string[], env: Record<string, string> = {}): Promise<{modules: string[]; read: string[]; stdout: string}> {
    const cwd = path.join(dir, name)
    await mkdir(cwd)
    const loads = path.join(cwd, 'loads.json')
    const out = await node(['-r', path.join(repoRoot, 'test', 'helpers', 'record-loads.cjs'), bin, ...args], {cwd, env: {PIPE_TEST_LOADS: loads, ...env}})
    expect(out.code, out.stderr).to.equal(0)
    return {...(JSON.parse(readFileSync(loads, 'utf8')) as {modules: string[]; read: string[]}), stdout: out.stdout}
  }
  const runArgs = ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go']

  it('oclif is given the plugins the build loaded (dist/cli/plugins.json): no package.json and no manifest is read again', async () => {
    for (const [name, args] of [
      ['version', ['--version']],
      ['run', runArgs],
    ] as const) {
      const {read} = await recorded(`plugins-${name}`, [...args])
      expect(
        read.filter((file) => /(^|[\\/])(package\.json|oclif\.manifest\.json)$/.test(file)),
        name,
      ).to.deep.equal([])
      expect(
        read.map((file) => path.relative(repoRoot, file)),
        name,
      ).to.include(path.join('dist', 'cli', 'plugins.json'))
    }
  })

  it('perf_hooks and readline, which oclif requires as it loads but a run never calls, are not loaded', async () => {
    for (const [name, args] of [
      ['version', ['--version']],
      ['run', runArgs],
    ] as const) {
      const {modules} = await recorded(`modules-${name}`, [...args])
      expect(modules, name).to.include('crypto')
      expect(
        modules.filter((m) => /^(perf_hooks|readline)(\/|$)/.test(m)),
        name,
      ).to.deep.equal([])
    }
  })

  it("a plugin a user installed for pipe (package.json in PIPE_DATA_DIR) is found as oclif finds it, and pipe's commands with it", async () => {
    const data = path.join(dir, 'data')
    const plugin = path.join(data, 'node_modules', 'pipe-plugin-hello')
    await mkdir(plugin, {recursive: true})
    await writeFile(
      path.join(data, 'package.json'),
      JSON.stringify({private: true, oclif: {schema: 1, plugins: [{type: 'user', name: 'pipe-plugin-hello'}]}, dependencies: {'pipe-plugin-hello': '1.0.0'}}),
    )
    await writeFile(
      path.join(plugin, 'package.json'),
      JSON.stringify({
        name: 'pipe-plugin-hello',
        version: '1.0.0',
        main: 'index.js',
        oclif: {commands: {strategy: 'explicit', target: './index.js', identifier: 'COMMANDS'}},
      }),
    )
    await writeFile(
      path.join(plugin, 'index.js'),
      "exports.COMMANDS = {hello: class Hello { static summary = 'Say hello.'; static run() { process.stdout.write('hello from a plugin\\n') } }}\n",
    )
    const hello = await pipe(['hello'], {cwd: dir, env: {PIPE_DATA_DIR: data}})
    expect(hello.code, hello.stderr).to.equal(0)
    expect(hello.stdout).to.equal('hello from a plugin\n')
    const help = await pipe(['--help'], {cwd: dir, env: {PIPE_DATA_DIR: data}})
    expect(help.stdout)
      .to.match(/\n {2}hello +Say hello\./)
      .and.to.match(/\n {2}validate /)
  })
})
