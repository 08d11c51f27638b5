/**
 * A file a person names on the command line (`export --html FILE`, `test --junit FILE`) that is
 * already a link, a fifo or a device is written through, as a shell's `>` would: replacing it by a
 * regular file of the same name turned /dev/stdout or /dev/full into a regular file when pipe ran as
 * root, and cut a link to a shared report.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {createReadStream, existsSync, lstatSync} from 'node:fs'
import {readFile, readlink, rm, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'

const FLOW = 'version: 1\nname: flow\nsteps:\n  - {id: done, kind: end, status: succeeded}\n'

describe('a named output file that is a link, a fifo or a device', function () {
  this.timeout(60_000)
  let dir: string
  let runId: string

  before(async () => {
    dir = (await tempDir('named-output-')).dir
    await writeFile(path.join(dir, 'flow.yaml'), FLOW)
    await writeFile(path.join(dir, 'flow.pipe-test.yaml'), 'version: 1\npipeline: flow.yaml\ntests:\n  - {name: ends, expect: {status: succeeded}}\n')
    const ran = await pipe(['run', 'flow.yaml', '--json'], {cwd: dir})
    expect(ran.code, ran.stderr).to.equal(0)
    runId = json<{run_id: string}>(ran).run_id
  })

  after(async () => {
    await rm(dir, {recursive: true, force: true})
  })

  it('writes through a link: the link stays, the file it names holds the page or the report', async () => {
    await writeFile(path.join(dir, 'shared.html'), 'old')
    await symlink('shared.html', path.join(dir, 'page.html'))
    const exported = await pipe(['export', runId, '--html', 'page.html'], {cwd: dir})
    expect(exported.code, exported.stderr).to.equal(0)
    expect(lstatSync(path.join(dir, 'page.html')).isSymbolicLink()).to.equal(true)
    expect(await readFile(path.join(dir, 'shared.html'), 'utf8')).to.match(/^<!doctype html>/i)

    await writeFile(path.join(dir, 'shared.xml'), 'old')
    await symlink('shared.xml', path.join(dir, 'junit.xml'))
    const tested = await pipe(['test', 'flow.pipe-test.yaml', '--junit', 'junit.xml'], {cwd: dir})
    expect(tested.code, tested.stderr).to.equal(0)
    expect(await readlink(path.join(dir, 'junit.xml'))).to.equal('shared.xml')
    expect(await readFile(path.join(dir, 'shared.xml'), 'utf8')).to.contain('<testsuite')
  })

  it('writes into a fifo for its reader, and the fifo stays a fifo', async () => {
    const fifo = path.join(dir, 'page.fifo')
    execFileSync('mkfifo', [fifo])
    const read = new Promise<string>((resolve, reject) => {
      let text = ''
      createReadStream(fifo, 'utf8')
        .on('data', (chunk) => (text += String(chunk)))
        .on('end', () => resolve(text))
        .on('error', reject)
    })
    const exported = await pipe(['export', runId, '--html', fifo], {cwd: dir})
    expect(exported.code, exported.stderr).to.equal(0)
    expect(await read).to.match(/^<!doctype html>/i)
    expect(lstatSync(fifo).isFIFO()).to.equal(true)
  })

  it('names the file asked for, not a temp beside it, when its folder takes no new file', async function () {
    if (!existsSync('/proc/1')) this.skip()
    const r = await pipe(['export', runId, '--html', '/proc/1/page.html'], {cwd: dir})
    expect(r.code).to.not.equal(0)
    expect(r.stderr).to.contain('/proc/1/page.html').and.not.contain('.tmp')
  })
})
