import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {tempWriter} from '../../src/store/file/trail.js'
import {createFileExclusive, writeFileAtomic} from '../../src/util/fs.js'
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
