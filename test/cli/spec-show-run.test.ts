/**
 * `pipe spec show RUN`, as README.md (Recorded model replies) and examples/coding-agent/README.md
 * write it: the run id pipe run printed shows the run's latest spec version, the same record
 * `pipe spec show VERSION` shows; a run that wrote no version yet is a clear E_NOT_FOUND.
 *
 * The first spec show of a run and the first refusal are `pipe` processes; the runs, the other
 * formats and the further refusals run in this process (test/helpers/pipe-here.ts: the same command
 * from argv, its output and exit code).
 */
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

let dir: string
let cleanup: () => Promise<void>
before(async () => ({dir, cleanup} = await tempDir('pipe-spec-show-run-')))
after(async () => cleanup())

/** `pipe ARGS --store store` in this process, or (asProcess) a process. */
const cli = (args: string[], asProcess = false) =>
  (asProcess ? pipe : pipeHere)([...args, '--store', 'store'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})

describe('pipe spec show RUN (CLI)', function () {
  this.timeout(120000)

  it("shows the run's latest spec version, in every format, as spec show VERSION does", async () => {
    const ran = json<{run_id: string; spec_version: string}>(
      await cli(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']),
    )
    expect(ran.spec_version).to.match(/^S-\d{8}-\d{4}$/)
    for (const format of [['--json'], [], ['--format', 'yaml']]) {
      // (The text, as the READMEs show it, from a process.)
      const byRun = await cli(['spec', 'show', ran.run_id, ...format], format.length === 0)
      const byVersion = await cli(['spec', 'show', ran.spec_version, ...format])
      expect(byRun.code, byRun.stderr).to.equal(0)
      expect(byRun.stdout).to.equal(byVersion.stdout)
    }
    expect(json<{meta: {spec_version: string}}>(await cli(['spec', 'show', ran.run_id, '--json'])).meta.spec_version).to.equal(ran.spec_version)
  })

  it('says a run has no spec version yet, and refuses what is neither a run nor a version', async () => {
    const tiny = path.join(dir, 'tiny.yaml')
    await writeFile(tiny, 'version: 1\nname: tiny\nsteps:\n  - {id: a, kind: noop}\n')
    const runId = json<{run_id: string}>(await cli(['run', tiny, '--json'])).run_id
    const none = await cli(['spec', 'show', runId], true)
    expect(none.code).to.equal(2)
    expect(none.stdout).to.equal('')
    expect(none.stderr).to.contain(`Error [E_NOT_FOUND]: run ${runId} has no spec version yet`).and.contain(`pipe runs show ${runId}`)
    const missing = await cli(['spec', 'show', 'R-20000101-0001'])
    expect(missing.stderr).to.contain('Error [E_NOT_FOUND]: run R-20000101-0001 not found')
    const bad = await cli(['spec', 'show', 'F-2026-001'])
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.contain('Error [E_INVALID_ARGS]: "F-2026-001" is not a spec version (S-YYYYMMDD-NNNN)')
  })
})
