/**
 * A write step's file name may be as long as the file system allows (255 bytes): the temporary file
 * pipe writes beside it first must fit too. A name longer than that is said as such.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pipe, tempDir} from '../helpers/cli.js'

const pipeline = (file: string): string => `version: 1\nname: long\nsteps:\n  - {id: w, kind: write, path: "out/${file}", content: "hi"}\n`

describe('write: file names up to the file system limit', function () {
  this.timeout(60000)
  let dir: string
  let cleanup: () => Promise<void>
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-long-name-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
  })
  afterEach(async () => cleanup())

  it('writes a file whose name is 250 bytes (ü counts two), leaving no temporary file', async () => {
    const name = `${'ü'.repeat(100)}${'a'.repeat(46)}.txt`
    expect(Buffer.byteLength(name)).to.equal(250)
    await writeFile(path.join(dir, 'p.yaml'), pipeline(name))
    const run = await pipe(['run', 'p.yaml', '--text', 'x'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(run.code, run.stderr).to.equal(0)
    expect(await readFile(path.join(dir, 'out', name), 'utf8')).to.equal('hi')
    expect(await readdir(path.join(dir, 'out'))).to.deep.equal([name])
  })

  it('a name longer than 255 bytes is E_INVALID_ARGS saying the name is too long, not where pipe held the folder', async () => {
    await writeFile(path.join(dir, 'p.yaml'), pipeline(`${'a'.repeat(256)}.txt`))
    const run = await pipe(['run', 'p.yaml', '--text', 'x'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(run.code).to.equal(1)
    expect(run.stderr).to.contain('Error [E_INVALID_ARGS]').and.contain('longer than the file system allows (255 bytes)')
    expect(run.stderr).to.not.contain('/proc/self/fd')
  })
})
