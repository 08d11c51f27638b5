/**
 * Issue 35 item 8: a symlink named policy.yaml or .pipe that another user planted in a shared
 * folder is refused (git's safe.directory rule, extended to links), whatever it points at; a file
 * named on the command line is used as typed; a run says which policy and store it used.
 *
 * The first `policy explain`, `runs list` and `run` are `pipe` processes; the other commands run in
 * this process (test/helpers/pipe-here.ts: the same command from argv, its output and exit code, as
 * the same user: the links' owners are checked the same).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {lchownSync} from 'node:fs'
import {mkdir, realpath, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

const NOBODY = 65534
const PERMISSIVE = 'version: 1\nallowed_commands: [[sh, -c, ...]]\n'
const STATUS_PIPELINE = 'version: 1\nname: status\nsteps:\n  - {id: status, kind: command, run: [sh, -c, "true"]}\n'

type ErrorJson = {error: {code: string; message: string; hint: string}}

describe('a planted policy.yaml or .pipe symlink is refused, not used', function () {
  this.timeout(120000)
  let dir: string
  let repo: string
  let cleanup: () => Promise<void>
  beforeEach(async function () {
    // Giving a link to another user needs root (the tests run as root here).
    if (process.getuid?.() !== 0) this.skip()
    ;({dir, cleanup} = await tempDir('pipe-planted-'))
    dir = await realpath(dir)
    repo = path.join(dir, 'shared')
    execFileSync('git', ['init', '-q', repo])
    // What the planter points at: a permissive policy and another project's store, both root's.
    await mkdir(path.join(dir, 'elsewhere'))
    await writeFile(path.join(dir, 'elsewhere', 'policy.yaml'), PERMISSIVE)
  })
  afterEach(async () => cleanup?.())

  async function plant(name: string, target: string, owner = NOBODY): Promise<string> {
    const link = path.join(repo, name)
    await symlink(target, link)
    lchownSync(link, owner, owner)
    return link
  }

  it('policy.yaml -> a root-owned permissive policy, the link owned by another user: refused in the folder and from below it', async () => {
    await plant('policy.yaml', path.join(dir, 'elsewhere', 'policy.yaml'))
    for (const [index, cwd] of [repo, path.join(repo, 'src')].entries()) {
      await mkdir(cwd, {recursive: true})
      // The first refusal from a process, the one from below the folder in this process.
      const r = await (index === 0 ? pipe : pipeHere)(['policy', 'explain', '--json', '--', 'sh', '-c', 'id'], {cwd})
      expect(r.code, r.stdout + r.stderr).to.equal(2)
      const {error} = json<ErrorJson>(r)
      expect(error.code).to.equal('E_CONFIG')
      expect(error.message).to.contain('policy.yaml').and.contain('symlink owned by another user (uid 65534')
      expect(error.hint).to.contain('Remove the link').and.contain('--policy FILE')
    }
    // Named on the command line it is the user's own choice: used, and named in the answer.
    const typed = await pipeHere(['policy', 'explain', '--json', '--policy', 'policy.yaml', '--', 'sh', '-c', 'id'], {cwd: repo})
    expect(typed.code, typed.stderr).to.equal(0)
    expect(json<{allowed: boolean; policy: string}>(typed)).to.include({allowed: true, policy: path.join(repo, 'policy.yaml')})
  })

  it('a link of the user leading through a link of another user is refused too', async () => {
    const middle = path.join(dir, 'elsewhere', 'middle.yaml')
    await symlink(path.join(dir, 'elsewhere', 'policy.yaml'), middle)
    lchownSync(middle, NOBODY, NOBODY)
    await plant('policy.yaml', middle, 0)
    const r = await pipeHere(['policy', 'explain', '--json', '--', 'sh', '-c', 'id'], {cwd: repo})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    expect(json<ErrorJson>(r).error.message).to.contain(`${middle} (on the way from`)
  })

  it('a link of the user whose target goes through a folder link of another user is refused', async () => {
    // The user's policy.yaml -> hop/policy.yaml, where hop is another user's link to a folder it can turn anywhere.
    const hop = path.join(repo, 'hop')
    await symlink(path.join(dir, 'elsewhere'), hop)
    lchownSync(hop, NOBODY, NOBODY)
    await plant('policy.yaml', 'hop/policy.yaml', 0)
    const r = await pipeHere(['policy', 'explain', '--json', '--', 'sh', '-c', 'id'], {cwd: repo})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    expect(json<ErrorJson>(r).error.message).to.contain(`${hop} (on the way from`).and.contain('symlink owned by another user (uid 65534')
  })

  it(".pipe -> another project's store, the link owned by another user: refused, and --store uses it as typed", async () => {
    const other = path.join(dir, 'elsewhere', 'store')
    await mkdir(other)
    await plant('.pipe', other)
    await writeFile(path.join(repo, 'status.yaml'), STATUS_PIPELINE)
    for (const args of [
      ['runs', 'list', '--json'],
      ['run', 'status.yaml', '--json'],
    ]) {
      const r = await pipe(args, {cwd: repo})
      expect(r.code, r.stdout + r.stderr).to.equal(2)
      const {error} = json<ErrorJson>(r)
      expect(error.code).to.equal('E_CONFIG')
      expect(error.message).to.contain('.pipe').and.contain('symlink owned by another user')
      expect(error.hint).to.contain('--store DIR')
    }
    const typed = await pipeHere(['runs', 'list', '--json', '--store', '.pipe'], {cwd: repo})
    expect(typed.code, typed.stderr).to.equal(0)
  })

  it("the user's own links are used, and a run names the policy and the store it used", async () => {
    await plant('policy.yaml', path.join(dir, 'elsewhere', 'policy.yaml'), 0)
    await mkdir(path.join(dir, 'elsewhere', 'store'))
    await plant('.pipe', path.join(dir, 'elsewhere', 'store'), 0)
    await writeFile(path.join(repo, 'status.yaml'), STATUS_PIPELINE)
    const r = await pipeHere(['run', 'status.yaml', '--json'], {cwd: repo})
    expect(r.code, r.stdout + r.stderr).to.equal(0)
    const run = json<{policy: string | null; store: string}>(r)
    expect(run.policy).to.equal(path.join(repo, 'policy.yaml'))
    expect(run.store).to.equal(path.join(repo, '.pipe'))
  })
})
