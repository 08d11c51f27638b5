/**
 * Schedules on a folder store (pipe validate, pipe schedule list and run-due): bad cron
 * expressions, timezones and inputs are errors with their place; each slot fires once however
 * often run-due runs; missed slots as catch_up says; a DST change fires a slot once. The clock is
 * PIPE_NOW, moved by the test: nothing waits for a slot.
 *
 * The first `validate`, `schedule run-due` and `schedule list` are `pipe` processes; the other
 * commands run in this process (test/helpers/pipe-here.ts: the same command, output and exit code;
 * PIPE_NOW is read at each command).
 */
import {expect} from 'chai'
import {copyFile, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

const policy = path.join(repoRoot, 'test', 'fixtures', 'postgres', 'policy.yaml')

const pipeline = (schedules: string): string => `version: 1
name: nightly
inputs:
  since: {type: string, default: HEAD}
schedules:
${schedules}
steps:
  - {id: first, kind: command, run: [sleep, "0"], next: done}
  - {id: done, kind: end, status: succeeded, reason: all steps ran}
`

interface Fired {
  schedule: string
  slot: string
  status: string
}

describe('schedules on a folder store', function () {
  this.timeout(120000)
  let dir: string
  let cleanup: () => Promise<void>
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-schedules-'))
    await copyFile(policy, path.join(dir, 'policy.yaml'))
  })
  afterEach(async () => cleanup())

  /** `pipe schedule run-due nightly.yaml --json` at `now`, in this process. */
  const runDue = async (now: string): Promise<Fired[]> => {
    const result = await pipeHere(['schedule', 'run-due', 'nightly.yaml', '--json'], {cwd: dir, env: {PIPE_NOW: now}})
    expect(result.code, result.stderr).to.equal(0)
    return json<{fired: Fired[]}>(result).fired.map((f) => ({schedule: f.schedule, slot: f.slot, status: f.status}))
  }

  it('pipe validate quotes a bad cron expression, names an unknown timezone and checks the inputs against the pipeline', async () => {
    await writeFile(
      path.join(dir, 'nightly.yaml'),
      pipeline(
        '  - {cron: "61 * * * *"}\n  - {cron: "0 2 * * *", timezone: Mars/Base, inputs: {since: 3, until: x}}\n  - {cron: "0 0 2 * * * 2030"}\n  - {cron: "@every 5m"}',
      ),
    )
    const result = await pipe(['validate', 'nightly.yaml'], {cwd: dir})
    expect(result.code).to.equal(2)
    expect(result.stdout).to.include('schedules[0].cron  bad cron expression "61 * * * *"')
    expect(result.stdout).to.include('schedules[1].timezone  unknown timezone "Mars/Base"; give an IANA name')
    expect(result.stdout).to.match(/schedules\[1\]\.inputs\.since .*not a string/)
    expect(result.stdout).to.match(/schedules\[1\]\.inputs\.until .*unknown input "until"/)
    expect(result.stdout).to.include('schedules[2].cron  cron expression "0 0 2 * * * 2030" has 7 field(s): give five')
    expect(result.stdout).to.include('schedules[3].cron  cron expression "@every 5m" is not one pipe reads: a nickname stands alone')
  })

  it('run-due without a pipeline named says why a pipeline under ./pipelines that declares schedules cannot load, not that none does', async () => {
    await mkdir(path.join(dir, 'pipelines'))
    await writeFile(path.join(dir, 'pipelines', 'nightly.yaml'), pipeline('  - {cron: "0 2 * * *"}').replace('kind: command', 'kind: shell'))
    const result = await pipe(['schedule', 'run-due'], {cwd: dir, env: {PIPE_NOW: '2026-11-28T02:00:10Z'}})
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('E_CONFIG').and.contain('unknown step kind "shell"')
    expect(result.stderr).not.to.contain('none under ./pipelines declares schedules')
  })

  it('PIPE_NOW is an ISO 8601 time with its timezone or an error naming it: "1" is not the year 2001, a time without a zone not the local one', async () => {
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {cron: "0 2 * * *"}'))
    for (const [index, now] of ['1', '2026-11-28T02:00:30', '2026-02-30T02:00:00Z', 'Sat Nov 28 2026 02:00:30 GMT'].entries()) {
      // The first is a process, the others run in this one.
      const result = await (index === 0 ? pipe : pipeHere)(['schedule', 'list', 'nightly.yaml'], {cwd: dir, env: {PIPE_NOW: now}})
      expect(result.code, `${now}: ${result.stdout}`).to.equal(2)
      expect(result.stderr)
        .to.contain('E_INVALID_ARGS')
        .and.contain(`PIPE_NOW=${JSON.stringify(now)} is not an ISO 8601 time`)
    }
    const offset = await pipeHere(['schedule', 'list', 'nightly.yaml', '--json'], {cwd: dir, env: {PIPE_NOW: '2026-11-28T03:00:30+01:00'}})
    expect(offset.code, offset.stderr).to.equal(0)
    expect(json<{schedules: Array<{next: string}>}>(offset).schedules[0]!.next).to.equal('2026-11-29T02:00:00.000Z')
  })

  it('a day of missed minutes is logged as at least the slots looked at, not as that many', async () => {
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {cron: "* * * * *", catch_up: latest}'))
    expect(await runDue('2026-11-27T02:00:10Z')).to.have.length(1)
    const result = await pipeHere(['schedule', 'run-due', 'nightly.yaml'], {cwd: dir, env: {PIPE_NOW: '2026-11-28T02:00:30Z'}})
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stderr).to.contain('schedule 0: at least 100 missed slot(s) not fired (catch_up: latest)')
  })

  it('a slot whose run could not start (a secret unset) is not recorded as fired: run-due fires it once the cause is fixed', async () => {
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {cron: "0 2 * * *"}').replace('steps:', 'secrets: [NIGHTLY_TOKEN]\nsteps:'))
    const refused = await pipeHere(['schedule', 'run-due', 'nightly.yaml', '--json'], {cwd: dir, env: {PIPE_NOW: '2026-11-28T02:00:10Z', NIGHTLY_TOKEN: ''}})
    const fired = json<{fired: Array<Fired & {error?: string}>}>(refused).fired
    expect(
      fired.map((f) => f.status),
      refused.stderr,
    ).to.deep.equal(['not-fired'])
    expect(fired[0]!.error).to.contain('NIGHTLY_TOKEN')
    const after = await pipeHere(['schedule', 'run-due', 'nightly.yaml', '--json'], {cwd: dir, env: {PIPE_NOW: '2026-11-28T02:00:20Z', NIGHTLY_TOKEN: 'set'}})
    expect(after.code, after.stderr).to.equal(0)
    expect(json<{fired: Fired[]}>(after).fired.map((f) => [f.slot, f.status])).to.deep.equal([['2026-11-28T02:00:00.000Z', 'succeeded']])
  })

  it('run-due fires a slot once however often it runs, and schedule list shows the last and next firings', async () => {
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {cron: "0 2 * * *", timezone: UTC}'))
    expect(await runDue('2026-11-28T02:00:10Z')).to.deep.equal([{schedule: '0', slot: '2026-11-28T02:00:00.000Z', status: 'succeeded'}])
    expect(await runDue('2026-11-28T02:00:20Z')).to.deep.equal([])
    const list = await pipeHere(['schedule', 'list', 'nightly.yaml', '--json'], {cwd: dir, env: {PIPE_NOW: '2026-11-28T02:00:30Z'}})
    expect(list.code, list.stderr).to.equal(0)
    expect(json<{schedules: Array<{last: string; next: string}>}>(list).schedules.map((s) => [s.last, s.next])).to.deep.equal([
      ['2026-11-28T02:00:00.000Z', '2026-11-29T02:00:00.000Z'],
    ])
  })

  it('a schedule inserted before an unnamed one is refused until both are named, and naming the old one as its place keeps its firings: no slot fires twice', async () => {
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {cron: "0 2 * * *"}'))
    expect(await runDue('2026-11-28T02:00:10Z')).to.deep.equal([{schedule: '0', slot: '2026-11-28T02:00:00.000Z', status: 'succeeded'}])
    // Keyed by place, the hourly schedule would take the daily one's firing and the daily one fire 02:00 again.
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {cron: "0 * * * *"}\n  - {cron: "0 2 * * *"}'))
    const refused = await pipeHere(['schedule', 'run-due', 'nightly.yaml', '--json'], {cwd: dir, env: {PIPE_NOW: '2026-11-28T02:00:20Z'}})
    expect(refused.code, refused.stdout).to.equal(2)
    expect(refused.stderr).to.contain('E_CONFIG').and.contain('schedule 0 has no name').and.contain('schedule 1 has no name')
    expect(refused.stderr).not.to.match(/E_INTERNAL|\n\s+at /)
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {name: hourly, cron: "0 * * * *"}\n  - {name: "0", cron: "0 2 * * *"}'))
    expect(await runDue('2026-11-28T02:00:30Z')).to.deep.equal([{schedule: 'hourly', slot: '2026-11-28T02:00:00.000Z', status: 'succeeded'}])
  })

  it('missed slots: none skips them, latest fires the most recent once, all fires each', async () => {
    await writeFile(
      path.join(dir, 'nightly.yaml'),
      pipeline(
        '  - {name: none, cron: "0 * * * *", catch_up: none}\n  - {name: latest, cron: "0 * * * *", catch_up: latest}\n  - {name: all, cron: "0 * * * *", catch_up: all}',
      ),
    )
    expect((await runDue('2026-11-28T02:00:10Z')).map((f) => f.schedule)).to.deep.equal(['none', 'latest', 'all'])
    // Three slots missed (03:00, 04:00, 05:00), none of them on time at 05:30.
    expect(await runDue('2026-11-28T05:30:00Z')).to.deep.equal([
      {schedule: 'latest', slot: '2026-11-28T05:00:00.000Z', status: 'succeeded'},
      {schedule: 'all', slot: '2026-11-28T03:00:00.000Z', status: 'succeeded'},
      {schedule: 'all', slot: '2026-11-28T04:00:00.000Z', status: 'succeeded'},
      {schedule: 'all', slot: '2026-11-28T05:00:00.000Z', status: 'succeeded'},
    ])
    expect(await runDue('2026-11-28T05:30:00Z')).to.deep.equal([])
    expect((await runDue('2026-11-28T06:00:05Z')).map((f) => f.schedule)).to.deep.equal(['none', 'latest', 'all'])
  })

  it('a slot of a timezone that falls back (02:30 twice in Europe/Berlin) fires once', async () => {
    await writeFile(path.join(dir, 'nightly.yaml'), pipeline('  - {cron: "30 2 * * *", timezone: Europe/Berlin, catch_up: all}'))
    // 02:30 CEST is 00:30Z; after the change, 02:30 CET (01:30Z) is the same day's slot again.
    expect(await runDue('2026-10-25T00:30:10Z')).to.deep.equal([{schedule: '0', slot: '2026-10-25T00:30:00.000Z', status: 'succeeded'}])
    expect(await runDue('2026-10-25T01:30:10Z')).to.deep.equal([])
    const list = await pipeHere(['schedule', 'list', 'nightly.yaml', '--json'], {cwd: dir, env: {PIPE_NOW: '2026-10-25T01:30:10Z'}})
    expect(json<{schedules: Array<{next: string}>}>(list).schedules[0]!.next).to.equal('2026-10-26T01:30:00.000Z')
  })
})
