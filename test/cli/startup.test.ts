/**
 * Start-up of the built CLI: `pipe --version` says what the root help says, the commands run from
 * their group's esbuild bundle (scripts/bundle.mjs, src/entry/groups/), dependencies inside it, what
 * the manifest answers (--version, help, an unknown command) opens no bundle, and a command opens
 * only its group's, and a command initialises of the step kinds only what it uses.
 */
import {expect} from 'chai'
import {existsSync, readFileSync, readdirSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
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

/** The groups of commands, one bundle each (src/entry/groups/GROUP.ts: dist/cli/GROUP.cjs). */
const groups = readdirSync(path.join(repoRoot, 'src', 'entry', 'groups'))
  .map((file) => path.basename(file, '.ts'))
  .sort()

// pg's native binding: optional, never installed; pg requires it only when asked to.
const optional = new Set(['pg-native'])

describe('start-up of the built CLI', function () {
  this.timeout(120000)

  it('pipe --version prints the line the root help shows as VERSION', async () => {
    const version = await pipe(['--version'])
    expect(version.code, version.stderr).to.equal(0)
    const help = await pipe(['--help'])
    const line = /VERSION\n\s+(\S.*)\n/.exec(help.stdout)?.[1]
    expect(line, help.stdout).to.be.a('string')
    expect(version.stdout).to.equal(`${line}\n`)
    const doc = json<{version: string}>(await pipe(['--version', '--json']))
    expect(version.stdout).to.contain(`/${doc.version} `)
  })

  it("each group's script requires only Node's modules and imports only the vendored files, which exist", () => {
    const dist = path.join(repoRoot, 'dist')
    const scripts = groups.map((group) => path.join(dist, 'cli', `${group}.cjs`))
    expect(groups, 'src/entry/groups/').to.include.members(['author', 'run'])
    for (const script of scripts) {
      const text = readFileSync(script, 'utf8')
      // Every literal require is a Node module.
      const required = [...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1]!)
      expect(required.filter((s) => !builtinModules.includes(s.replace(/^node:/, '')) && !optional.has(s))).to.deep.equal([])
      // boot.ts's importer resolves a relative specifier from dist/cli/, as import() there would.
      const imported = [...text.matchAll(/\b__pipeImport\("([^"]+)"\)/g)].map((m) => m[1]!)
      expect(imported.filter((s) => s.startsWith('../vendor/')).map((s) => existsSync(path.join(dist, 'cli', s)))).to.not.include(false)
      expect(imported.filter((s) => !s.startsWith('../vendor/') && !builtinModules.includes(s.replace(/^node:/, '')))).to.deep.equal([])
      expect(text, `${script}: an import() left in a script has no loader`).to.not.match(/(?<![\w$.])import\(/)
      // boot.ts decodes it as latin1: a character past ASCII would be read as other characters.
      expect(
        [...text].filter((c) => c.charCodeAt(0) > 0x7f),
        `${script} is ASCII only`,
      ).to.deep.equal([])
    }
    for (const file of readdirSync(path.join(dist, 'vendor')))
      expect(
        packageImports(path.join(dist, 'vendor', file)).filter((s) => !optional.has(s)),
        file,
      ).to.deep.equal([])
  })

  it('every command in src/commands/ is in one group (src/entry/groups/) and the manifest the build wrote, under its id', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir, {withFileTypes: true}).flatMap((e) =>
        e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
      )
    const commandsDir = path.join(repoRoot, 'src', 'commands')
    const ids = files(commandsDir)
      .map((f) => path.relative(commandsDir, f).replace(/\.ts$/, '').split(path.sep).join(':'))
      .sort()
    const manifest = JSON.parse(readFileSync(path.join(repoRoot, 'dist', 'cli', 'commands.json'), 'utf8')) as {commands: Record<string, {group: string}>}
    expect(Object.keys(manifest.commands).sort()).to.deep.equal(ids)
    expect([...new Set(Object.values(manifest.commands).map((c) => c.group))].sort()).to.deep.equal(groups)
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

  /** `pipe ARGS` in a folder of its own, with what it loaded, read and opened (test/helpers/record-loads.cjs). */
  async function recorded(name: string, args: string[], code = 0): Promise<{modules: string[]; read: string[]; opened: string[]; stdout: string}> {
    const cwd = path.join(dir, name)
    await mkdir(cwd)
    const loads = path.join(cwd, 'loads.json')
    const out = await node(['-r', path.join(repoRoot, 'test', 'helpers', 'record-loads.cjs'), bin, ...args], {
      cwd,
      env: {PIPE_TEST_LOADS: loads, PIPE_HOME: path.join(cwd, 'home')},
    })
    expect(out.code, out.stderr).to.equal(code)
    return {...(JSON.parse(readFileSync(loads, 'utf8')) as {modules: string[]; read: string[]; opened: string[]}), stdout: out.stdout}
  }
  const runArgs = ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go']
  const manifest = path.join('dist', 'cli', 'commands.json')
  const relative = (files: string[]): string[] => files.map((file) => path.relative(repoRoot, file))
  /** The groups' scripts a process opened or read. */
  const scriptsOf = (files: string[]): string[] =>
    relative(files)
      .filter((file) => groups.some((group) => file === path.join('dist', 'cli', `${group}.cjs`)))
      .sort()

  it('--version answers from package.json alone: it reads no manifest (~90 KB to parse) and opens no group of commands', async () => {
    for (const [name, args] of [
      ['version', ['--version']],
      ['version-json', ['--version', '--json']],
    ] as const) {
      const {opened, read} = await recorded(name, [...args])
      expect(relative([...opened, ...read]), name)
        .to.include('package.json')
        .and.not.include(manifest)
      expect(scriptsOf([...opened, ...read]), name).to.deep.equal([])
    }
  })

  it('help and an unknown command answer from the manifest and open no group of commands', async () => {
    for (const [name, args, code] of [
      ['root-help', ['--help'], 0],
      ['help', ['help', 'runs', 'list'], 0],
      ['command-help', ['run', '--help'], 0],
      ['topic', ['runs'], 0],
      ['unknown', ['valdate'], 2],
    ] as const) {
      const {opened, read} = await recorded(name, [...args], code)
      expect(relative([...opened, ...read]), name).to.include(manifest)
      expect(scriptsOf([...opened, ...read]), name).to.deep.equal([])
    }
  })

  it("a command opens its group's script and no other, and no package.json: pipe run the run group's, pipe validate the authoring group's", async () => {
    const run = await recorded('run', runArgs)
    expect(scriptsOf([...run.opened, ...run.read])).to.deep.equal([path.join('dist', 'cli', 'run.cjs')])
    expect(run.read.filter((file) => /(^|[\\/])package\.json$/.test(file))).to.deep.equal([])
    const validate = await recorded('validate', ['validate', defaultPipeline])
    expect(scriptsOf([...validate.opened, ...validate.read])).to.deep.equal([path.join('dist', 'cli', 'author.cjs')])
  })

  /** The source modules whose bundled code `pipe ARGS` initialised (test/helpers/record-inits.cjs). */
  async function initialised(name: string, args: string[]): Promise<string[]> {
    const cwd = path.join(dir, `inits-${name}`)
    await mkdir(cwd)
    const inits = path.join(cwd, 'inits.json')
    const out = await node(['-r', path.join(repoRoot, 'test', 'helpers', 'record-inits.cjs'), bin, ...args], {
      cwd,
      env: {PIPE_TEST_INITS: inits, PIPE_HOME: path.join(cwd, 'home')},
    })
    expect(out.code, out.stderr).to.equal(0)
    return JSON.parse(readFileSync(inits, 'utf8')) as string[]
  }

  // Modules only a kind's run uses (its loop, tools, sandbox, delivery, git): a kind's contract
  // (src/steps/KIND.ts, what validate, graph and the LSP read) imports them only inside its run.
  const runCode: Record<string, string> = {
    agent: 'src/steps/agent/conversation.ts',
    'agent tools': 'src/steps/agent/tools.ts',
    'command, qa': 'src/policy/exec.ts',
    sandbox: 'src/policy/sandbox.ts',
    publish: 'src/publish/deliver.ts',
    git: 'src/vcs/git.ts',
    context: 'src/steps/context/gather.ts',
  }

  it("validate initialises every kind's contract and no kind's run code; a run, only the run code of its pipeline's kinds", async () => {
    const validate = await initialised('validate', ['validate', defaultPipeline])
    // The probe sees the kinds' contracts, so an empty list below is not a probe that saw nothing.
    expect(validate).to.include.members(['src/steps/registry.ts', 'src/steps/agent.ts', 'src/steps/publish.ts'])
    expect(Object.entries(runCode).filter(([, file]) => validate.includes(file))).to.deep.equal([])
    // The default pipeline publishes and has no agent, command, git or context step.
    const run = await initialised('run', runArgs)
    expect(run).to.include('src/publish/deliver.ts')
    expect(Object.entries(runCode).filter(([kind, file]) => kind !== 'publish' && run.includes(file))).to.deep.equal([])
  })
})

describe('bin/dev.js: the CLI from src/ without a build (docs/development.md)', function () {
  this.timeout(120000)

  it('answers --version, runs a command, and ends with a failure exit code as bin/run.js does', async () => {
    const dev = (args: string[]) => node(['--import', 'tsx', path.join(repoRoot, 'bin', 'dev.js'), ...args])
    const version = await dev(['--version'])
    expect(version.code, version.stderr).to.equal(0)
    expect(version.stdout).to.match(/^pipe\/\d+\.\d+\.\d+ /)
    const valid = await dev(['validate', defaultPipeline])
    expect(valid.code, valid.stderr).to.equal(0)
    const unknown = await dev(['valdate'])
    expect(unknown.code).to.equal(2)
    expect(unknown.stderr).to.contain('did you mean "validate"')
  })
})
