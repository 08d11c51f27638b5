import {expect} from 'chai'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {loadPolicyFile} from '../../src/config/policy.js'
import {globMatches} from '../../src/policy/glob.js'
import {DEFAULT_POLICY, policyFrom} from '../../src/policy/policy.js'
import {checkCommand, checkPath} from '../../src/policy/rules.js'
import {tempDir} from '../helpers/cli.js'

const policy = policyFrom({...DEFAULT_POLICY, allowed_commands: [['npm', 'test'], ['node', '--test']], forbidden_paths: ['.git/**', 'secrets/**', '**/*.pem', '.env']}, null)

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

  it('allows a command by argv prefix, naming the rule, and denies the rest', () => {
    expect(checkCommand(policy, ['npm', 'test', '--', '--grep', 'x'])).to.include({allowed: true, rule: 'allowed_commands[0] ["npm","test"]'})
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
    expect(checkPath(policy, root, '.git/config')).to.include({allowed: false, rule: 'forbidden_paths[0] ".git/**"'})
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
