import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdir, readdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {applyEditText} from '../../src/edit/workspace.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {writeInside} from '../../src/steps/write.js'
import {durability} from '../../src/util/fs.js'
import {openHeldDir} from '../../src/util/held-dir.js'
import {tempDir} from '../helpers/cli.js'

/**
 * A process that swaps `out/` for a symlink to `outside/` and back, `flips` times, as a sandboxed
 * command of a foreach sibling could while pipe writes: each flip moves the real folder aside, puts
 * the link in its place, then takes the link away and moves the folder back. It ends by itself.
 */
const RACER = `
const fs = require('node:fs')
const [root, outside, flips] = process.argv.slice(1)
const out = root + '/out', aside = root + '/out.aside'
process.stdout.write('ready\\n')
for (let i = 0; i < Number(flips); i++) {
  try { fs.renameSync(out, aside) } catch {}
  try { fs.symlinkSync(outside, out) } catch {}
  try { if (fs.lstatSync(out).isSymbolicLink()) fs.unlinkSync(out) } catch {}
  try { fs.renameSync(aside, out) } catch {}
}
`

/** Runs `write` over and over while the racer flips `out/`, until the racer has ended; returns how many writes went through. */
async function underRace(root: string, outside: string, write: (i: number) => Promise<unknown>): Promise<{tried: number; ok: number}> {
  const racer = spawn(process.execPath, ['-e', RACER, root, outside, '20000'], {stdio: ['ignore', 'pipe', 'inherit']})
  const ended = once(racer, 'exit')
  let done = false
  void ended.then(() => (done = true))
  await once(racer.stdout, 'data')
  let tried = 0
  let ok = 0
  while (!done) {
    tried++
    try {
      await write(tried)
      ok++
    } catch {
      // Refused (a link met on the way) or the folder moved away mid-write: what matters is where nothing went.
    }
    // Lets the racer's exit be seen: the loop ends with the racer, not after a guessed count.
    await new Promise((resolve) => setImmediate(resolve))
  }
  const [code] = await ended
  expect(code).to.equal(0)
  return {tried, ok}
}

describe('writes inside the repository while a command swaps a folder for a symlink', () => {
  let dir: string
  let cleanup: () => Promise<void>
  beforeEach(async () => {
    // No fsync: more writes meet the racer, and where a write lands does not depend on the disk.
    durability.sync = false
    ;({dir, cleanup} = await tempDir('pipe-held-'))
    await mkdir(path.join(dir, 'repo', 'out'), {recursive: true})
    await mkdir(path.join(dir, 'outside'))
  })
  afterEach(async () => {
    durability.sync = true
    await cleanup()
  })

  it('a write step never lands outside, and leaves no temp file there', async function () {
    this.timeout(120_000)
    const root = path.join(dir, 'repo')
    const modes = ['create', 'overwrite', 'append'] as const
    const {tried} = await underRace(root, path.join(dir, 'outside'), (i) => writeInside(defaultPolicy(), root, `out/d${i}/f.txt`, `${i}\n`, modes[i % 3]!))
    expect(tried).to.be.greaterThan(0)
    expect(await readdir(path.join(dir, 'outside'))).to.deep.equal([])
  })

  it('an edit never lands outside, and leaves no temp file there', async function () {
    this.timeout(120_000)
    const root = path.join(dir, 'repo')
    const block = (i: number): string => `out/d${i}/e.txt\n<<<<<<< SEARCH\n=======\nline ${i}\n>>>>>>> REPLACE\n`
    const {tried} = await underRace(root, path.join(dir, 'outside'), (i) => applyEditText(defaultPolicy(), root, block(i)))
    expect(tried).to.be.greaterThan(0)
    expect(await readdir(path.join(dir, 'outside'))).to.deep.equal([])
  })

  it('refuses a symlink at any level below the root, and makes the missing folders', async () => {
    const root = path.join(dir, 'repo')
    await symlink(path.join(dir, 'outside'), path.join(root, 'out', 'link'))
    expect(() => openHeldDir(root, 'out/link/deeper', {create: true})).to.throw(/symlink out\/link ->/)
    const held = openHeldDir(root, 'out/a/b', {create: true})
    await writeFile(held.entry('x.txt'), 'x')
    held.close()
    expect(await readdir(path.join(root, 'out', 'a', 'b'))).to.deep.equal(['x.txt'])
    expect(await readdir(path.join(dir, 'outside'))).to.deep.equal([])
  })
})
