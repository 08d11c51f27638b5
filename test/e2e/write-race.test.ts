/**
 * Issue 35 item 7 through `pipe run`: while a process swaps `out/` for a symlink to a folder
 * outside the repository and back, a foreach of write steps writes many files under `out/`.
 * Nothing may land outside, temp files included; a write that meets the link fails, never follows it.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdir, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'

/** Flips `out/` until `stop` exists (looked at every 64 flips), or at most 2,000,000 times: it ends by itself either way. */
const RACER = `
const fs = require('node:fs')
const [root, outside, stop] = process.argv.slice(1)
const out = root + '/out', aside = root + '/out.aside'
process.stdout.write('ready\\n')
for (let i = 0; i < 2000000 && (i % 64 !== 0 || !fs.existsSync(stop)); i++) {
  try { fs.renameSync(out, aside) } catch {}
  try { fs.symlinkSync(outside, out) } catch {}
  // The link stays a while: a path checked just before (a folder, or nothing yet) is written just after.
  for (let j = 0; j < 20; j++) fs.existsSync(out)
  try { if (fs.lstatSync(out).isSymbolicLink()) fs.unlinkSync(out) } catch {}
  try { fs.renameSync(aside, out) } catch {}
}
`

const PIPELINE = `version: 1
name: many-writes
steps:
  - id: each
    kind: foreach
    items: "\${{ ${JSON.stringify(Array.from({length: 48}, (_, i) => i))} }}"
    concurrency: 4
    fail_fast: false
    steps:
      - {id: a, kind: write, path: "out/a\${{ item }}/f.txt", content: "\${{ item }}\\n", mode: overwrite, next: b}
      - {id: b, kind: write, path: "out/b\${{ item }}/f.txt", content: "\${{ item }}\\n", mode: create, next: c}
      - {id: c, kind: write, path: "out/c\${{ item }}/f.txt", content: "\${{ item }}\\n", mode: append, next: d}
      - {id: d, kind: write, path: "out/d\${{ item }}/f.txt", content: "\${{ item }}\\n", mode: overwrite}
    on: {success: done, partial: done, fail: done}
  - {id: done, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.succeeded }} of \${{ steps.each.outputs.total }}"}
`

describe('pipe run writes inside the repository while a process swaps out/ for a symlink', function () {
  this.timeout(300000)

  it('no write of a foreach of write steps lands outside, and no temp file is left there', async () => {
    const {dir, cleanup} = await tempDir('pipe-write-race-')
    try {
      const repo = path.join(dir, 'repo')
      const outside = path.join(dir, 'outside')
      await mkdir(path.join(repo, '.git'), {recursive: true})
      await mkdir(path.join(repo, 'out'))
      await mkdir(outside)
      await writeFile(path.join(dir, 'many.yaml'), PIPELINE)
      const stop = path.join(dir, 'stop')
      const racer = spawn(process.execPath, ['-e', RACER, repo, outside, stop], {stdio: ['ignore', 'pipe', 'inherit']})
      const ended = once(racer, 'exit')
      await once(racer.stdout, 'data')
      const r = await pipe(['run', path.join(dir, 'many.yaml'), '--json'], {cwd: repo, timeoutMs: 280000})
      await writeFile(stop, '')
      const [code] = await ended
      expect(code).to.equal(0)
      expect(r.code, r.stderr).to.equal(0)
      expect(json<{status: string}>(r).status).to.equal('succeeded')
      expect(await readdir(outside)).to.deep.equal([])
    } finally {
      await cleanup()
    }
  })
})
