import {expect} from 'chai'
import {spawn} from 'node:child_process'
import fs from 'node:fs'
import {readdir, readFile} from 'node:fs/promises'
import {syncBuiltinESMExports} from 'node:module'
import path from 'node:path'
import {tempWriter} from '../../src/store/file/trail.js'
import {createFileExclusive, makeDirs, writeFileAtomic} from '../../src/util/fs.js'
import {repoRoot, tempDir} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-fs-')))
afterEach(async () => cleanup())

describe('crash-safe writes', () => {
  it('give every temporary file of a process its own name, even hundreds at once', async () => {
    const made = await Promise.all(
      Array.from({length: 300}, (_, i) =>
        i % 2
          ? createFileExclusive(path.join(dir, `c${i}`), `c${i}`, {sync: false})
          : writeFileAtomic(path.join(dir, `a${i}`), `a${i}`, {sync: false}).then(() => true),
      ),
    )
    expect(made.every(Boolean)).to.equal(true)
    const names = await readdir(dir)
    expect(names).to.have.length(300)
    expect(await readFile(path.join(dir, 'c299'), 'utf8')).to.equal('c299')
  })

  it("leave a temporary file that audit can tell was its writer's when the writer is killed mid-write", async () => {
    const script = `const {createFileExclusive} = await import(${JSON.stringify(path.join(repoRoot, 'src/util/fs.ts'))});
      await createFileExclusive(${JSON.stringify(path.join(dir, 'one'))}, 'x');
      await createFileExclusive(${JSON.stringify(path.join(dir, 'two'))}, 'y');`
    const pid = await new Promise<number>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: repoRoot,
        env: {...process.env, PIPE_FAULT_KILL_AT: 'write#2'},
      })
      child.on('close', () => resolve(child.pid!))
    })
    const names = (await readdir(dir)).sort()
    expect(names).to.have.length(2)
    expect(names[1]).to.equal('one')
    expect(names[0]).to.match(/^\.two\./)
    expect(tempWriter(names[0]!)).to.equal(pid)
  })
})

describe('makeDirs', () => {
  /**
   * Runs `body` with node:fs's mkdirSync replaced by `wrap(real)`, for util/fs.ts too: its named
   * import of node:fs is a live binding that syncBuiltinESMExports updates. Restored afterwards.
   */
  function withMkdir(wrap: (real: typeof fs.mkdirSync) => typeof fs.mkdirSync, body: () => void): void {
    const real = fs.mkdirSync
    fs.mkdirSync = wrap(real)
    syncBuiltinESMExports()
    try {
      body()
    } finally {
      fs.mkdirSync = real
      syncBuiltinESMExports()
    }
  }

  it('makes the folder when another process made its parent between the first try and the look at the parent', () => {
    const target = path.join(dir, 'store', '.pipe', 'runs')
    let raced = false
    withMkdir(
      (real) =>
        ((p: fs.PathLike, options?: fs.MakeDirectoryOptions) => {
          if (!raced && p === target) {
            // The other process: the whole parent chain appears just after this mkdir found it missing.
            raced = true
            try {
              return real(p, options)
            } finally {
              real(path.dirname(target), {recursive: true})
            }
          }
          return real(p, options)
        }) as typeof fs.mkdirSync,
      () => makeDirs(target),
    )
    expect(raced).to.equal(true)
    expect(fs.statSync(target).isDirectory()).to.equal(true)
  })

  it('takes the folder made by another process between its parent and itself', () => {
    const target = path.join(dir, 'a', 'b')
    let calls = 0
    withMkdir(
      (real) =>
        ((p: fs.PathLike, options?: fs.MakeDirectoryOptions) => {
          calls += 1
          const made = real(p, options)
          // Once the parent is made, the other process makes the folder itself before this one can.
          if (p === path.dirname(target)) real(target)
          return made
        }) as typeof fs.mkdirSync,
      () => makeDirs(target),
    )
    expect(calls).to.equal(3)
    expect(fs.statSync(target).isDirectory()).to.equal(true)
  })

  it('still refuses a file where a folder of the path should be', () => {
    fs.writeFileSync(path.join(dir, 'a'), 'not a folder')
    expect(() => makeDirs(path.join(dir, 'a', 'b'))).to.throw(/ENOTDIR|EEXIST/)
  })
})
