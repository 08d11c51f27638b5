/** max_patch_lines counts the lines an edit really changes, and the recorded diff is one git applies. */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {applyEditText} from '../../src/edit/workspace.js'
import {DEFAULT_POLICY, policyFrom} from '../../src/policy/policy.js'
import {tempDir} from '../helpers/cli.js'
import {expectPipeError} from '../helpers/expect.js'

const policy = policyFrom({...DEFAULT_POLICY, max_patch_lines: 40}, null)
const block = (file: string, search: string, replace: string): string => `${file}\n<<<<<<< SEARCH\n${search}\n=======\n${replace}\n>>>>>>> REPLACE\n`
const lines = (n: number, f: (i: number) => string): string => Array.from({length: n}, (_, i) => f(i)).join('\n')

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-diff-')))
afterEach(async () => cleanup())

function git(...args: string[]): string {
  return execFileSync('git', args, {
    cwd: dir,
    encoding: 'utf8',
    env: {...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t'},
  })
}

describe('edit: changed lines come from a real line diff', () => {
  it('counts only the lines a large block really changes', async () => {
    const search = lines(25, (i) => `line ${i}`)
    await writeFile(path.join(dir, 'big.txt'), `${search}\n`)
    // 25 lines of SEARCH and 25 of REPLACE, one of which differs: 2 changed lines, not 50.
    const result = await applyEditText(policy, dir, block('big.txt', search, search.replace('line 12', 'line twelve')))
    expect(result.changed_lines).to.equal(2)
    expect(result.files[0]!.changed_lines).to.equal(2)
    expect(await readFile(path.join(dir, 'big.txt'), 'utf8')).to.contain('line twelve\nline 13')
  })

  it('still refuses an edit whose real diff is larger than max_patch_lines, and counts new files by their lines', async () => {
    const search = lines(30, (i) => `line ${i}`)
    await writeFile(path.join(dir, 'big.txt'), `${search}\n`)
    const error = await expectPipeError(applyEditText(policy, dir, block('big.txt', search, search.toUpperCase())), 'E_POLICY_DENIED')
    expect(error.message).to.contain('changes more than 40 lines (big.txt alone); the policy allows 40 (max_patch_lines)')
    // Over several files the sum counts: 2 x 22 lines is 44, over 40, though each file is under it.
    await writeFile(path.join(dir, 'one.txt'), `${lines(11, (i) => `one ${i}`)}\n`)
    await writeFile(path.join(dir, 'two.txt'), `${lines(11, (i) => `two ${i}`)}\n`)
    const both =
      block(
        'one.txt',
        lines(11, (i) => `one ${i}`),
        lines(11, (i) => `ONE ${i}`),
      ) +
      block(
        'two.txt',
        lines(11, (i) => `two ${i}`),
        lines(11, (i) => `TWO ${i}`),
      )
    const sum = await expectPipeError(applyEditText(policy, dir, both), 'E_POLICY_DENIED')
    expect(sum.message).to.contain('the edit changes 44 lines; the policy allows 40')
    expect(await readFile(path.join(dir, 'one.txt'), 'utf8')).to.contain('one 0')
    const created = await applyEditText(policy, dir, block('new.txt', '', 'a\nb\nc'))
    expect(created.changed_lines).to.equal(3)
  })

  it('records a unified diff that git apply accepts on a real repository', async () => {
    const long = `${lines(40, (i) => `row ${i}`)}\n`
    await writeFile(path.join(dir, 'long.txt'), long)
    await writeFile(path.join(dir, 'tail.txt'), 'first\nlast without newline')
    git('init', '-q', '-b', 'main')
    git('add', '-A')
    git('commit', '-qm', 'init')
    const edits =
      block('long.txt', 'row 10\nrow 11\nrow 12', 'row 10\nrow eleven\nrow 12') +
      block('long.txt', 'row 30', 'row 30\nrow 30.5') +
      block('tail.txt', 'last without newline', 'the new last') +
      block('src/created.js', '', 'export const x = 1')
    const result = await applyEditText(policy, dir, edits)
    expect(result.changed_lines).to.equal(2 + 1 + 2 + 1)
    const edited: Record<string, string> = Object.fromEntries(
      await Promise.all(['long.txt', 'tail.txt', 'src/created.js'].map(async (f): Promise<[string, string]> => [f, await readFile(path.join(dir, f), 'utf8')])),
    )
    const patch = path.join(dir, '..', `${path.basename(dir)}.diff`)
    await writeFile(patch, result.files.map((f) => f.diff).join(''))
    // Back to the commit, then the recorded diff must apply and give the edited files again.
    git('checkout', '-q', '--', '.')
    git('clean', '-qfd')
    expect(git('status', '--porcelain')).to.equal('')
    git('apply', '--check', patch)
    git('apply', patch)
    for (const [file, text] of Object.entries(edited)) expect(await readFile(path.join(dir, file), 'utf8'), file).to.equal(text)
    expect(result.files.find((f) => f.path === 'src/created.js')!.diff).to.match(
      /^diff --git a\/src\/created\.js b\/src\/created\.js\nnew file mode 100644\n--- \/dev\/null\n\+\+\+ b\/src\/created\.js\n@@ -0,0 \+1,1 @@\n/,
    )
    expect(result.files.find((f) => f.path === 'long.txt')!.diff).to.contain('@@ -9,7 +9,7 @@\n row 8\n row 9\n row 10\n-row 11\n+row eleven\n')
  })
})
