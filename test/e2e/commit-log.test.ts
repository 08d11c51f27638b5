/**
 * `pipe` processes: the runs killed at a fault point, and the file's first run, snapshot show,
 * audit verify and resume (the first test); every other command runs in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

const sentence = path.join(examples, 'one-sentence.txt')
const answers = path.join(examples, 'one-sentence.answers.yaml')
const fullRun = ['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'go']

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-commit-log-')))
afterEach(async () => cleanup())

/** The bytes of every record of the store (runs, specs, evidence). */
async function recordFiles(cwd: string): Promise<Record<string, string>> {
  const root = path.join(cwd, '.pipe')
  const out: Record<string, string> = {}
  const runs = (await readdir(path.join(root, 'runs'))).filter((n) => n.startsWith('R-'))
  const folders = ['specs', 'evidence', ...runs.map((r) => path.join('runs', r, 'snapshots'))]
  for (const folder of folders)
    for (const name of await readdir(path.join(root, folder)))
      if (name.endsWith('.json')) out[path.join(folder, name)] = await readFile(path.join(root, folder, name), 'utf8')
  return out
}

/** `pipe snapshot show RUN --json`: in this process, or (the file's first) as a process. */
async function snapshots(cwd: string, runId: string, asProcess = false): Promise<Snapshot[]> {
  const result = await (asProcess ? pipe : pipeHere)(['snapshot', 'show', runId, '--json'], {cwd})
  expect(result.code, result.stderr).to.equal(0)
  return json<Snapshot[]>(result)
}

/** What a power failure leaves of writes that were never synced: an empty file, a torn one, none. */
async function losePower(cwd: string, files: {empty?: string[]; torn?: string[]; gone?: string[]}): Promise<void> {
  const root = path.join(cwd, '.pipe')
  for (const f of files.empty ?? []) await writeFile(path.join(root, f), '')
  for (const f of files.torn ?? []) await writeFile(path.join(root, f), (await readFile(path.join(root, f), 'utf8')).slice(0, 40))
  for (const f of files.gone ?? []) await rm(path.join(root, f))
}

describe('the commit log: records written without their own sync, rebuilt after a power failure', function () {
  this.timeout(300000)

  it('an ended run: audit verify names what the log can rebuild, pipe resume rewrites it byte for byte, and verify passes', async () => {
    const done = await pipe([...fullRun, '--json'], {cwd: dir})
    expect(done.code, done.stderr).to.equal(0)
    const runId = json<{run_id: string}>(done).run_id
    const intact = await recordFiles(dir)
    const list = await snapshots(dir, runId, true)
    const compile = list.find((s) => s.step.name === 'compile' && s.evidence_links.length > 0)!
    const planned = list.find((s) => s.step.name === 'plan_tasks')!
    await losePower(dir, {
      empty: [`evidence/${compile.evidence_links[0]!.evidence_id}.json`, `runs/${runId}/snapshots/${String(planned.step.seq).padStart(6, '0')}.json`],
      torn: [`evidence/${compile.evidence_links.at(-1)!.evidence_id}.json`],
      gone: [`specs/${compile.spec_version_out}.json`],
    })

    const damaged = await pipe(['audit', 'verify'], {cwd: dir})
    expect(damaged.code, damaged.stdout).to.equal(4)
    expect(damaged.stdout).to.contain(`${compile.spec_version_out}: file is missing`)
    for (const id of [compile.evidence_links[0]!.evidence_id, compile.evidence_links.at(-1)!.evidence_id, compile.spec_version_out!]) {
      expect(damaged.stderr).to.match(
        new RegExp(`note: \\S+  ${id}: is (missing|damaged), and the commit log of ${runId} holds it .*pipe resume ${runId} rewrites it`),
      )
    }
    expect(damaged.stderr).to.contain(`${runId}#${planned.step.seq}: the snapshot is damaged, and the commit log holds it`)

    // The run has ended: resume refuses to run it again, but rewrites what the log holds first.
    const resumed = await pipe(['resume', runId], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(2)
    expect(await recordFiles(dir)).to.deep.equal(intact)
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, `${audit.stdout}${audit.stderr}`).to.equal(0)
    expect(audit.stderr).to.not.contain('note:')
  })

  it('a record changed to other valid JSON is not overwritten: audit verify still reports it', async () => {
    const done = await pipeHere([...fullRun, '--json'], {cwd: dir})
    const runId = json<{run_id: string}>(done).run_id
    const evidence = (await snapshots(dir, runId)).flatMap((s) => s.evidence_links)[0]!.evidence_id
    const file = path.join(dir, '.pipe', 'evidence', `${evidence}.json`)
    const changed = (await readFile(file, 'utf8')).replace('"created_at": "', '"created_at": "1')
    await writeFile(file, changed)
    await pipeHere(['resume', runId], {cwd: dir})
    expect(await readFile(file, 'utf8')).to.equal(changed)
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code).to.equal(4)
    expect(audit.stdout).to.contain(`${evidence}: field changed`)
  })

  it("an intact run's last log line is read from its start (run, seq): noted exactly when the step it names has no snapshot, whatever follows", async () => {
    const done = await pipeHere([...fullRun, '--json'], {cwd: dir})
    expect(done.code, done.stderr).to.equal(0)
    const runId = json<{run_id: string}>(done).run_id
    const log = path.join(dir, '.pipe', 'runs', runId, 'commits.jsonl')
    const text = await readFile(log, 'utf8')
    const cut = text.lastIndexOf('\n', text.length - 2) + 1
    const last = text.slice(cut, -1)
    const seq = (JSON.parse(last) as {seq: number}).seq
    const head = (JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', runId, 'run.json'), 'utf8')) as {head: {seq: number}}).head.seq
    const withLast = (line: string): Promise<void> => writeFile(log, `${text.slice(0, cut)}${line}\n`)
    /** The notes of `pipe audit verify --json`. */
    const notes = async (): Promise<string[]> => {
      const audit = await pipeHere(['audit', 'verify', '--json'], {cwd: dir})
      expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
      return json<{notes: Array<{record: string; message: string}>}>(audit).notes.map((n) => `${n.record}: ${n.message}`)
    }
    expect(await notes()).to.deep.equal([])
    // Its step's snapshot is there: nothing to note, as when the whole line was parsed (a line that is not JSON is ignored for an intact run).
    await withLast(`${last.slice(0, 200)}`)
    expect(await notes()).to.deep.equal([])
    // The same line naming a step with no snapshot, past the run's end: noted, though its start alone names that step.
    await withLast(last.replace(`"seq":${seq},`, '"seq":90,'))
    expect(await notes()).to.deep.equal([
      `${runId}#90: names a step past the run's last snapshot #${head}, yet the run is succeeded: no step wrote it (changed by hand?), and pipe resume ignores it`,
    ])
    // Another run's line, or keys in another order: read whole, as before.
    await withLast(last.replace(`"run_id":"${runId}",`, '"run_id":"R-20000101-0001",'))
    expect(await notes()).to.deep.equal([])
    await withLast(last.replace(`{"version":1,"run_id":"${runId}","seq":${seq},`, `{"seq":90,"version":1,"run_id":"${runId}",`))
    expect(await notes()).to.deep.equal([
      `${runId}#90: names a step past the run's last snapshot #${head}, yet the run is succeeded: no step wrote it (changed by hand?), and pipe resume ignores it`,
    ])
  })

  it('a commit killed half-way: audit verify notes it as interrupted (not damage), resume finishes it, and the note goes', async () => {
    const killed = await pipe(fullRun, {cwd: dir, env: {PIPE_FAULT_KILL_AT: 'evidence-written:compile'}})
    expect(killed.signal === 'SIGKILL' || killed.code === 137, killed.stderr).to.equal(true)
    const [runId] = (await readdir(path.join(dir, '.pipe', 'runs'))).filter((n) => n.startsWith('R-'))
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, `${audit.stdout}${audit.stderr}`).to.equal(0)
    expect(audit.stderr).to.match(new RegExp(`note: \\S+/runs/${runId}/commits\\.jsonl  ${runId}#2: a step commit was interrupted; pipe resume finishes it`))
    const resumed = await pipeHere(['resume', runId!, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect((await snapshots(dir, runId!)).filter((s) => s.step.name === 'compile')).to.have.length(2)
    const again = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(again.code, `${again.stdout}${again.stderr}`).to.equal(0)
    expect(again.stderr).to.not.contain('note:')
  })

  it('a killed run whose earlier records a power failure lost: resume rewrites them, finishes the run, and verify passes without notes', async () => {
    const killed = await pipe(fullRun, {cwd: dir, env: {PIPE_FAULT_KILL_AT: 'after-step:plan_tasks'}})
    expect(killed.signal === 'SIGKILL' || killed.code === 137, killed.stderr).to.equal(true)
    const [runId] = (await readdir(path.join(dir, '.pipe', 'runs'))).filter((n) => n.startsWith('R-'))
    const before = await snapshots(dir, runId!)
    const planned = before.at(-1)!
    expect(planned.step.name).to.equal('plan_tasks')
    const applied = before.find((s) => s.step.name === 'apply_answers')!
    const intact = await recordFiles(dir)
    await losePower(dir, {
      gone: [`runs/${runId}/snapshots/${String(planned.step.seq).padStart(6, '0')}.json`, `specs/${planned.spec_version_out}.json`],
      empty: [`evidence/${applied.evidence_links[0]!.evidence_id}.json`, `specs/${applied.spec_version_out}.json`],
    })
    const resumed = await pipeHere(['resume', runId!, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<{status: string}>(resumed).status).to.equal('succeeded')
    const after = await recordFiles(dir)
    for (const [file, text] of Object.entries(intact)) expect(after[file], file).to.equal(text)
    const list = await snapshots(dir, runId!)
    expect(list.map((s) => s.step.seq)).to.deep.equal(list.map((_, i) => i + 1))
    expect(
      list.filter((s) => s.step.name === 'plan_tasks'),
      'the step is not run again',
    ).to.have.length(1)
    const specs = (await readdir(path.join(dir, '.pipe', 'specs'))).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5))
    expect(specs.sort(), 'every version written is used, once').to.deep.equal(
      list
        .map((s) => s.spec_version_out)
        .filter((v): v is string => v !== null)
        .sort(),
    )
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, `${audit.stdout}${audit.stderr}`).to.equal(0)
    expect(audit.stderr).to.not.contain('note:')
  })
})
