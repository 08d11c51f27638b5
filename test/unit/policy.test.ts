import {expect} from 'chai'
import {realpathSync} from 'node:fs'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {loadPolicyFile} from '../../src/config/policy.js'
import {globMatches, ignoresCase} from '../../src/policy/glob.js'
import {DEFAULT_POLICY, policyFrom} from '../../src/policy/policy.js'
import {checkCommand, checkPath} from '../../src/policy/rules.js'
import {tempDir} from '../helpers/cli.js'

const policy = policyFrom(
  {
    ...DEFAULT_POLICY,
    allowed_commands: [
      ['npm', 'test', '...'],
      ['node', '--test'],
    ],
    forbidden_paths: ['.git/**', 'secrets/**', '**/*.pem', '.env'],
  },
  null,
)

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-policy-')))
afterEach(async () => cleanup())

describe('policy rules', () => {
  it('matches globs: ** crosses directories, * does not', () => {
    expect(globMatches('**/*.pem', 'a/b/key.pem')).to.equal(true)
    expect(globMatches('**/*.pem', 'key.pem')).to.equal(true)
    expect(globMatches('secrets/**', 'secrets/x/y.txt')).to.equal(true)
    expect(globMatches('src/*.ts', 'src/a/b.ts')).to.equal(false)
    expect(globMatches('.git/**', '.git/config')).to.equal(true)
    expect(globMatches('.env', '.env.local')).to.equal(false)
    expect(globMatches('build', 'build/out.js'), 'a directory covers what is under it').to.equal(true)
  })

  it('matches forbidden globs with braces, in dot directories, and without case where asked', () => {
    expect(globMatches('**/*.{pem,key}', 'deploy/server.key')).to.equal(true)
    expect(globMatches('**/*.{pem,key}', 'server.pem')).to.equal(true)
    expect(globMatches('**/*.{pem,key}', 'server.keys')).to.equal(false)
    expect(globMatches('**/*.pem', '.ssh/x.pem'), 'dot directories are not skipped').to.equal(true)
    expect(globMatches('**/*.pem', 'a/.x.pem'), 'dotfiles are not skipped').to.equal(true)
    expect(globMatches('secrets/[a-c]*', 'secrets/b1')).to.equal(true)
    expect(globMatches('!keep', 'other'), 'a leading ! is a literal, never a negation that forbids everything else').to.equal(false)
    expect(globMatches('.env', '.ENV')).to.equal(false)
    expect(globMatches('.env', '.ENV', {nocase: true})).to.equal(true)
    expect(globMatches('**/*.{pem,key}', 'Deploy/SERVER.KEY', {nocase: true})).to.equal(true)
  })

  it("knows whether the repository's file system ignores case", async () => {
    await mkdir(path.join(dir, 'Repo'))
    // The answer comes from the file system itself: the temporary directory here is case-sensitive.
    if (process.platform === 'linux') expect(ignoresCase(realpathSync(path.join(dir, 'Repo')))).to.equal(false)
    const root = path.join(dir, 'Repo')
    const forbidding = policyFrom({...DEFAULT_POLICY, forbidden_paths: ['**/*.{pem,key}']}, null)
    expect(checkPath(forbidding, root, 'certs/site.key')).to.include({allowed: false, rule: 'forbidden_paths[0] "**/*.{pem,key}"'})
    expect(checkPath(policyFrom(DEFAULT_POLICY, null), root, 'certs/site.key'), 'the built-in policy forbids keys').to.include({allowed: false})
  })

  it('matches a command against whole entries: literals, "{arg}", "{path}" and a last "..."', async () => {
    const root = path.join(dir, 'repo')
    await mkdir(path.join(root, 'src'), {recursive: true})
    await mkdir(path.join(dir, 'outside'))
    await symlink(path.join(dir, 'outside'), path.join(root, 'out'))
    const p = policyFrom(
      {
        ...DEFAULT_POLICY,
        allowed_commands: [
          ['node', '--check', '{path}'],
          ['git', 'log', '{arg}'],
          ['npm', 'test', '...'],
        ],
        forbidden_paths: ['secrets/**'],
      },
      null,
    )
    const at = {root}
    expect(checkCommand(p, ['node', '--check', 'src/a.js'], at)).to.include({allowed: true, rule: 'allowed_commands[0] ["node","--check","{path}"]'})
    const imported = checkCommand(p, ['node', '--check', '--import', 'data:text/javascript,require("fs").writeFileSync("/tmp/x","")', 'src/a.js'], at)
    expect(imported.allowed, 'an allowed prefix is no door to further flags').to.equal(false)
    expect(checkCommand(p, ['node', '--check', '--eval=1'], at))
      .to.include({allowed: false})
      .and.have.property('reason')
      .that.contains('never takes an option')
    expect(checkCommand(p, ['node', '--check', '../x.js'], at).reason).to.contain('leaves the repository root')
    expect(checkCommand(p, ['node', '--check', 'out/x.js'], at).reason).to.contain('through a symlink')
    expect(checkCommand(p, ['node', '--check', 'secrets/a.js'], at).reason).to.contain('forbidden_paths[0]')
    expect(checkCommand(p, ['node', '--check', 'a.js'], {root, cwd: 'src'}), "{path} is resolved from the command's directory").to.include({allowed: true})
    expect(checkCommand(p, ['node', '--check', '../../x.js'], {root, cwd: 'src'}).allowed).to.equal(false)
    expect(checkCommand(p, ['node', '--check'], at).allowed).to.equal(false)
    expect(checkCommand(p, ['git', 'log', '--oneline'], at).allowed, '{arg} is any one argument').to.equal(true)
    expect(checkCommand(p, ['git', 'log', '--oneline', '-n1'], at).allowed).to.equal(false)
    expect(checkCommand(p, ['git', 'log'], at).allowed).to.equal(false)
    expect(checkCommand(p, ['npm', 'test'], at).allowed, '"..." allows none').to.equal(true)
    expect(checkCommand(p, ['npm', 'test', '--', '--grep', 'x'], at).allowed, '"..." allows any further').to.equal(true)
    expect(checkCommand(p, ['npm', 'install'], at).allowed).to.equal(false)
  })

  it('refuses a policy whose "..." is not last or whose program is a placeholder', async () => {
    const file = path.join(dir, 'p.yaml')
    await writeFile(
      file,
      'version: 1\nallowed_commands:\n  - [npm, "...", test]\n  - ["{arg}", x]\n  - [npm, test, "..."]\nforbidden_paths: []\nmax_patch_lines: 10\nmax_retries_default: 2\nresource_limits: {}\n',
    )
    const result = await loadPolicyFile(file)
    expect(result.ok).to.equal(false)
    if (result.ok) return
    expect(result.diagnostics.map((d) => `${d.path} ${d.line}`)).to.deep.equal(['allowed_commands[0] 3', 'allowed_commands[1] 4'])
    expect(result.diagnostics[0]!.message).to.contain('may only be the last element')
  })

  it('allows a command by a whole-argv entry, naming the rule, and denies the rest', () => {
    expect(checkCommand(policy, ['npm', 'test', '--', '--grep', 'x'])).to.include({allowed: true, rule: 'allowed_commands[0] ["npm","test","..."]'})
    expect(checkCommand(policy, ['node', '--test', '--import', 'x'])).to.include({allowed: false, rule: 'allowed_commands'})
    expect(checkCommand(policy, ['npm', 'install'])).to.include({allowed: false, rule: 'allowed_commands'})
    expect(checkCommand(policy, ['npm'])).to.include({allowed: false})
    expect(checkCommand(policy, ['npm test'])).to.include({allowed: false}, 'a shell string is not an argv')
    expect(checkCommand(policy, [])).to.include({allowed: false, rule: 'argv'})
  })

  it('keeps paths inside the root: .., absolute paths and escaping symlinks are denied', async () => {
    await mkdir(path.join(dir, 'repo', 'src'), {recursive: true})
    await mkdir(path.join(dir, 'outside'))
    await symlink(path.join(dir, 'outside'), path.join(dir, 'repo', 'escape'))
    await symlink(path.join(dir, 'repo', 'src'), path.join(dir, 'repo', 'inner'))
    const root = path.join(dir, 'repo')
    expect(checkPath(policy, root, 'src/app.ts')).to.include({allowed: true, relative: 'src/app.ts'})
    expect(checkPath(policy, root, '../outside/x')).to.include({allowed: false, rule: 'sandbox'})
    expect(checkPath(policy, root, 'src/../../outside/x')).to.include({allowed: false, rule: 'sandbox'})
    expect(checkPath(policy, root, '/etc/passwd')).to.include({allowed: false, rule: 'sandbox'})
    const escape = checkPath(policy, root, 'escape/new-file.txt')
    expect(escape).to.include({allowed: false, rule: 'sandbox'})
    expect(escape.reason).to.contain('through a symlink')
    expect(checkPath(policy, root, 'inner/ok.ts')).to.include({allowed: true, relative: 'src/ok.ts'})
    expect(checkPath(policy, root, 'secrets/token.txt')).to.include({allowed: false, rule: 'forbidden_paths[1] "secrets/**"'})
    expect(checkPath(policy, root, 'deploy/server.pem')).to.include({allowed: false, rule: 'forbidden_paths[2] "**/*.pem"'})
    // .git is refused by its own rule, before forbidden_paths: a policy without ".git/**" does not open it.
    expect(checkPath(policy, root, '.git/config')).to.include({allowed: false, rule: 'git'})
    expect(checkPath(policy, root, 'vendor/lib/.GIT/hooks/post-commit')).to.include({allowed: false, rule: 'git'})
    expect(checkPath({...policy, protected: [path.join(root, '.pipe')]}, root, '.pipe/runs/x.json')).to.include({allowed: false, rule: 'store'})
  })

  it('versions a policy by its values: a changed rule changes policy_version, a comment does not', async () => {
    const base = 'version: 1\nallowed_commands: [[npm, test]]\nforbidden_paths: []\nmax_patch_lines: 10\nmax_retries_default: 2\nresource_limits: {}\n'
    const write = async (name: string, text: string): Promise<string> => {
      const file = path.join(dir, name)
      await writeFile(file, text)
      const result = await loadPolicyFile(file)
      if (!result.ok) throw new Error(JSON.stringify(result.diagnostics))
      return result.loaded.version
    }
    const a = await write('a.yaml', base)
    const b = await write('b.yaml', `# a comment\n${base.replace('max_patch_lines: 10', 'max_patch_lines:    10   # same value')}`)
    const c = await write('c.yaml', base.replace('max_patch_lines: 10', 'max_patch_lines: 11'))
    expect(a).to.equal(b)
    expect(a).to.not.equal(c)
  })
})

describe('a partial policy over the built-in one', () => {
  it("the built-in policy is the schema's defaults, key for key", async () => {
    const {loadSchema} = await import('../../src/schema/registry.js')
    const schema = loadSchema('policy') as {properties: Record<string, {default?: unknown}>}
    const defaults = Object.fromEntries(
      Object.entries(schema.properties)
        .filter(([, p]) => p.default !== undefined)
        .map(([k, p]) => [k, p.default]),
    )
    expect({version: 1, ...defaults}).to.deep.equal(DEFAULT_POLICY)
  })

  it('keeps what the file leaves out, replaces scalars and lists, adds forbidden globs, merges maps per key', async () => {
    const file = path.join(dir, 'policy.yaml')
    await writeFile(
      file,
      'version: 1\nallowed_commands: [[git, status]]\nforbidden_paths: [secrets/**, .env]\nmax_patch_lines: 40\nresource_limits: {command_timeout_ms: 1000}\ntools: {read_file: moderate}\nconfirm: []\n',
    )
    const result = await loadPolicyFile(file)
    if (!result.ok) throw new Error(JSON.stringify(result.diagnostics))
    const p = result.loaded.policy
    expect(p.allowed_commands).to.deep.equal([['git', 'status']])
    expect(p.forbidden_paths, "the file's globs (their indices as in the file), then the built-in ones, each once").to.deep.equal([
      'secrets/**',
      '.env',
      ...DEFAULT_POLICY.forbidden_paths.filter((g) => g !== '.env'),
    ])
    expect(p.max_patch_lines).to.equal(40)
    expect(p.max_retries_default).to.equal(DEFAULT_POLICY.max_retries_default)
    expect(p.resource_limits).to.deep.equal({...DEFAULT_POLICY.resource_limits, command_timeout_ms: 1000})
    expect(p.tools).to.deep.equal({...DEFAULT_POLICY.tools, read_file: 'moderate'})
    expect(p.confirm).to.deep.equal([])
    expect(p.sandbox).to.equal('auto')
  })

  it('versions the effective policy: restating a built-in value changes nothing, changing one does', async () => {
    const version = async (text: string): Promise<string> => {
      const file = path.join(dir, `p${Math.random().toString(36).slice(2)}.yaml`)
      await writeFile(file, text)
      const result = await loadPolicyFile(file)
      if (!result.ok) throw new Error(JSON.stringify(result.diagnostics))
      return result.loaded.version
    }
    const minimal = await version('version: 1\nallowed_commands: [[git, status]]\n')
    expect(
      await version(
        'version: 1\nallowed_commands: [[git, status]]\nmax_patch_lines: 500\nresource_limits: {step_timeout_ms: 600000}\nforbidden_paths: [.git/**]\n',
      ),
    ).to.equal(minimal)
    expect(await version('version: 1\nallowed_commands: [[git, status]]\nmax_patch_lines: 499\n')).to.not.equal(minimal)
    expect(await version('version: 1\n'), 'a file that states nothing is the built-in policy').to.equal(policyFrom(DEFAULT_POLICY, null).version)
  })
})
