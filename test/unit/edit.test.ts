import {expect} from 'chai'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {planEdits} from '../../src/edit/apply.js'
import {parseBlocks} from '../../src/edit/blocks.js'
import {applyEditText, EditFailed, revertEdit} from '../../src/edit/workspace.js'
import {DEFAULT_POLICY, policyFrom} from '../../src/policy/policy.js'
import {tempDir} from '../helpers/cli.js'
import {expectPipeError} from '../helpers/expect.js'

const policy = policyFrom({...DEFAULT_POLICY, max_patch_lines: 40}, null)
const block = (file: string, search: string, replace: string): string => `${file}\n<<<<<<< SEARCH\n${search}\n=======\n${replace}\n>>>>>>> REPLACE\n`

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-edit-')))
afterEach(async () => cleanup())

describe('edit blocks', () => {
  it('parses paths, several blocks, and fences around them', () => {
    const text = `Some prose.\n\`\`\`js\nsrc/a.js\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n\`\`\`\n\nsrc/b.js\n<<<<<<< SEARCH\n=======\ncreated\n>>>>>>> REPLACE\n`
    expect(parseBlocks(text).map((b) => [b.path, b.search, b.replace])).to.deep.equal([
      ['src/a.js', 'old', 'new'],
      ['src/b.js', '', 'created'],
    ])
    expect(() => parseBlocks('nothing here')).to.throw('no SEARCH/REPLACE blocks')
    expect(() => parseBlocks('a.js\n<<<<<<< SEARCH\nx\n')).to.throw('no "=======" divider')
  })

  it('matches despite different indentation and trailing white space, and re-indents the replacement', async () => {
    await writeFile(path.join(dir, 'a.py'), 'class A:\n    def f(self):   \n        return 1\n')
    const result = await applyEditText(policy, dir, block('a.py', 'def f(self):\n    return 1', 'def f(self):\n    return 2'))
    expect(await readFile(path.join(dir, 'a.py'), 'utf8')).to.equal('class A:\n    def f(self):\n        return 2\n')
    expect(result.files[0]!.diff).to.contain('+        return 2')
  })

  it('applies all blocks or none: a failing last block leaves every file byte-identical, and shows the nearest lines', async () => {
    const a = 'alpha\nbeta\ngamma\n'
    const b = 'one\ntwo\nthree\nfour\n'
    await writeFile(path.join(dir, 'a.txt'), a)
    await writeFile(path.join(dir, 'b.txt'), b)
    const text = block('a.txt', 'beta', 'BETA') + block('b.txt', 'two', 'TWO') + block('b.txt', 'thre\nfour', 'x')
    const error = await expectPipeError(applyEditText(policy, dir, text), 'E_CONFLICT')
    expect(await readFile(path.join(dir, 'a.txt'), 'utf8')).to.equal(a)
    expect(await readFile(path.join(dir, 'b.txt'), 'utf8')).to.equal(b)
    const failures = (error as EditFailed).failures
    expect(failures).to.have.length(1)
    expect(failures[0]).to.include({block: 3, path: 'b.txt', reason: 'the SEARCH text does not occur in the file'})
    expect(failures[0]!.nearest?.text).to.contain('three\nfour')
  })

  it('creates a file from an empty SEARCH and refuses to overwrite one', async () => {
    await applyEditText(policy, dir, block('new/file.txt', '', 'hello'))
    expect(await readFile(path.join(dir, 'new', 'file.txt'), 'utf8')).to.equal('hello\n')
    await expectPipeError(applyEditText(policy, dir, block('new/file.txt', '', 'again')), 'E_CONFLICT')
  })

  it('denies paths outside the root or forbidden, before touching anything', async () => {
    await writeFile(path.join(dir, 'ok.txt'), 'x\n')
    for (const target of ['../outside.txt', '/etc/hosts', '.git/config', '.env']) {
      const error = await expectPipeError(applyEditText(policy, dir, block('ok.txt', 'x', 'y') + block(target, '', 'z')), 'E_POLICY_DENIED')
      expect(error.message).to.contain(target)
      expect(await readFile(path.join(dir, 'ok.txt'), 'utf8')).to.equal('x\n')
    }
  })

  it('enforces max_patch_lines', async () => {
    await writeFile(path.join(dir, 'big.txt'), `${Array.from({length: 30}, (_, i) => `line ${i}`).join('\n')}\n`)
    const search = Array.from({length: 30}, (_, i) => `line ${i}`).join('\n')
    const error = await expectPipeError(applyEditText(policy, dir, block('big.txt', search, search.toUpperCase())), 'E_POLICY_DENIED')
    expect(error.message).to.contain('max_patch_lines')
  })

  it('undoes an edit with its reverse patch, and refuses when the file changed since', async () => {
    const original = 'a\nb\nc\n'
    await writeFile(path.join(dir, 'f.txt'), original)
    const result = await applyEditText(policy, dir, block('f.txt', 'b', 'B1\nB2') + block('g.txt', '', 'new'))
    await revertEdit(policy, dir, result.files)
    expect(await readFile(path.join(dir, 'f.txt'), 'utf8')).to.equal(original)
    expect(await readFile(path.join(dir, 'g.txt'), 'utf8').catch(() => null)).to.equal(null)
    const again = await applyEditText(policy, dir, block('f.txt', 'b', 'B'))
    await writeFile(path.join(dir, 'f.txt'), 'someone else\n')
    await expectPipeError(revertEdit(policy, dir, again.files), 'E_CONFLICT')
  })
})

describe('the nearest lines of a failed block', () => {
  /** The window scoring as the first implementation did: each window's text split into tokens afresh. */
  function naive(lines: string[], search: string[]): {from: number; to: number; text: string} | undefined {
    if (lines.length === 0) return undefined
    const similarity = (a: string, b: string): number => {
      const left = new Set(a.split(/\s+/).filter(Boolean))
      const right = new Set(b.split(/\s+/).filter(Boolean))
      if (left.size === 0 && right.size === 0) return 1
      let shared = 0
      for (const t of left) if (right.has(t)) shared++
      return shared / Math.max(left.size, right.size)
    }
    const size = Math.max(1, Math.min(search.length, lines.length))
    let best = {score: -1, start: 0}
    for (let start = 0; start + size <= lines.length; start++) {
      const score = similarity(lines.slice(start, start + size).join('\n'), search.join('\n'))
      if (score > best.score) best = {score, start}
    }
    const from = Math.max(0, best.start - 2)
    const to = Math.min(lines.length, best.start + size + 2)
    return {from: from + 1, to, text: lines.slice(from, to).join('\n')}
  }

  it('slides its window in linear time and picks the very window a full rescoring of each window picks', () => {
    let seed = 7
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n
    }
    const words = ['a', 'b', 'c', 'return', 'x', '', '  ', 'if (y)', 'z\tw']
    const line = (): string => Array.from({length: random(4)}, () => words[random(words.length)]).join(' ')
    for (let round = 0; round < 300; round++) {
      const file = Array.from({length: 1 + random(40)}, line)
      const search = [...Array.from({length: 1 + random(8)}, line), 'no such line anywhere']
      const text = `${file.join('\n')}\n`
      const blocks = parseBlocks(`f.txt\n<<<<<<< SEARCH\n${search.join('\n')}\n=======\nq\n>>>>>>> REPLACE\n`)
      const {failures} = planEdits(blocks, () => text)
      expect(failures[0]?.nearest, `round ${round}`).to.deep.equal(naive(file.join('\n') === '' ? [] : file, search))
    }
  })
})
