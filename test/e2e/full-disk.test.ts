/**
 * A run on a disk that fills up, on a real file system that does: a small tmpfs mounted for the
 * test (as root; mount is refused otherwise, and the test says so). The error says the disk is full
 * and which one, and once space is freed a single pipe resume finishes the run.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdtempSync, rmSync, statSync, truncateSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe} from '../helpers/cli.js'

const prd = path.join(examples, 'full-prd.md')

interface RunJson {
  run_id: string
  status: string
  error?: {code: string; message: string; hint: string}
}

describe('a full disk under a run', function () {
  this.timeout(120000)
  let disk: string
  let mounted = false
  before(function () {
    disk = mkdtempSync(path.join(os.tmpdir(), 'pipe-full-disk-'))
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', disk], {stdio: 'pipe'})
      mounted = true
    } catch (error) {
      console.warn(`cannot mount a tmpfs here (${String(error).split('\n')[0]}): the full-disk test needs root`)
      this.skip()
    }
  })
  after(() => {
    if (mounted) execFileSync('umount', [disk])
    rmSync(disk, {recursive: true, force: true})
  })

  it('says "no space left on device" naming it, and one pipe resume after space is freed finishes the run', async () => {
    const started = await pipe(['run', defaultPipeline, '--input', prd, '--json'], {cwd: disk})
    expect(started.code, started.stderr).to.equal(10)
    const runId = json<RunJson>(started).run_id
    // Fill the disk, then leave a few pages: the review is recorded, the publish step finds the disk full.
    const filler = path.join(disk, 'filler')
    try {
      execFileSync('sh', ['-c', `cat /dev/zero > '${filler}'`], {stdio: 'pipe'})
    } catch {
      // cat stops at ENOSPC: the disk is full.
    }
    truncateSync(filler, statSync(filler).size - 16 * 1024)
    const full = await pipe(['resume', runId, '--decision', 'go', '--json'], {cwd: disk})
    expect(full.code, full.stdout + full.stderr).to.equal(1)
    expect(full.stderr).to.match(/no space left on device \/\S+ \(writing \/\S+\)/)
    expect(full.stderr).to.match(/Try this: Free space on \/\S+ \(df -h \/\S+/)
    expect(full.stderr).to.not.match(/Check that the path exists/)

    rmSync(filler)
    const resumed = await pipe(['resume', runId, '--json'], {cwd: disk})
    expect(resumed.code, resumed.stdout + resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    const audit = await pipe(['audit', 'verify'], {cwd: disk})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
  })
})
