import {expect} from 'chai'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fileEscape} from '../../src/config/pipeline-files.js'
import {checkPath} from '../../src/policy/rules.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {contain, within} from '../../src/util/contain.js'
import {tempDir} from '../helpers/cli.js'

describe('one containment check for pipeline files, policy paths and publish directories', () => {
  let dir: string
  let cleanup: () => Promise<void>
  before(async () => {
    ;({dir, cleanup} = await tempDir('pipe-contain-'))
    await mkdir(path.join(dir, 'tree', 'inner'), {recursive: true})
    await mkdir(path.join(dir, 'outside'))
    await writeFile(path.join(dir, 'outside', 'secret.md'), 'x')
    await symlink(path.join(dir, 'outside'), path.join(dir, 'tree', 'out'))
    await symlink(path.join(dir, 'tree', 'inner'), path.join(dir, 'tree', 'alias'))
  })
  after(async () => cleanup())

  it('tells absolute paths, .. and symlinks out apart, and lets symlinks that stay inside be', () => {
    const root = path.join(dir, 'tree')
    expect(contain(root, '/etc/passwd').escape).to.equal('absolute')
    expect(contain(root, '../outside/secret.md').escape).to.equal('leaves')
    expect(contain(root, 'out/secret.md').escape).to.equal('symlink')
    expect(contain(root, 'alias/x.md').escape).to.equal(undefined)
    expect(contain(root, 'inner/../inner/x.md').escape).to.equal(undefined)
    expect(within(root, root)).to.equal(true)
    expect(within(root, `${root}-sibling`)).to.equal(false)
  })

  it('judges a file that does not exist yet by the directories above it, in the pipeline loader and the policy alike', () => {
    const root = path.join(dir, 'tree')
    // out/ exists and leads outside; out/new.md does not exist.
    expect(fileEscape(root, 'out/new.md')).to.match(/resolves through a symlink to .*outside/)
    expect(checkPath(defaultPolicy(), root, 'out/new.md')).to.include({allowed: false, rule: 'sandbox'})
    expect(fileEscape(root, 'alias/new.md')).to.equal(undefined)
  })
})
