import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {appendFile, mkdir, readdir, readFile, rm, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

// Most commands run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output
// and exit code). A real `pipe` process stays, with its timeout, for every command that meets a FIFO
// or a device (a hang or an endless read would stop the test's own process: the runs, resume, spec
// list, ledger list and audit verify), and for the file's first audit verify and resume (marked).

const sentence = path.join(examples, 'one-sentence.txt')
const answers = path.join(examples, 'one-sentence.answers.yaml')
const fullRun = ['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'go', '--json']

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-store-attack-')))
afterEach(async () => cleanup())

/** One hash over every file of the store (names and bytes), to show a command wrote nothing. */
async function storeHash(root: string): Promise<string> {
  const hash = createHash('sha256')
  const walk = async (folder: string): Promise<void> => {
    for (const entry of (await readdir(folder, {withFileTypes: true})).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const file = path.join(folder, entry.name)
      if (entry.name.endsWith('.lock')) continue
      if (entry.isDirectory()) await walk(file)
      else if (entry.isFile()) hash.update(`${file}\n`).update(await readFile(file))
      else hash.update(`${file} (special)\n`)
    }
  }
  await walk(root)
  return hash.digest('hex')
}

/** A run to its end, in this process. */
async function finishedRun(): Promise<string> {
  const done = await pipeHere(fullRun, {cwd: dir})
  expect(done.code, done.stderr).to.equal(0)
  return json<{run_id: string}>(done).run_id
}

type LogLine = Record<string, unknown> & {
  seq: number
  spec: unknown
  evidence: Array<Record<string, unknown>>
  snapshot: Record<string, unknown> & {step: Record<string, unknown>}
}

async function logLines(runId: string): Promise<LogLine[]> {
  const text = await readFile(path.join(dir, '.pipe', 'runs', runId, 'commits.jsonl'), 'utf8')
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as LogLine)
}

describe('attacks on the commit log', function () {
  this.timeout(300000)

  it('a hand-written line that is not a journal (null evidence) is ignored by resume and by audit verify, never a crash', async () => {
    const runId = await finishedRun()
    const logged = (await logLines(runId)).find((l) => l.spec !== null)!
    const log = path.join(dir, '.pipe', 'runs', runId, 'commits.jsonl')
    // (The last line of a seq is the one that counts.)
    await appendFile(log, `${JSON.stringify({...logged, evidence: [{...logged.evidence[0], candidate: '../../../escape'}]})}\n`)
    await appendFile(log, `${JSON.stringify({...logged, evidence: [null], spec: 'x'})}\n${JSON.stringify({run_id: runId, seq: logged.seq + 1, evidence: 5})}\n`)
    // Damage elsewhere in the run makes audit verify read the whole log.
    const evidence = (await readdir(path.join(dir, '.pipe', 'evidence'))).find((n) => n.endsWith('.json'))!
    await writeFile(path.join(dir, '.pipe', 'evidence', evidence), '')
    const before = await storeHash(path.join(dir, '.pipe'))
    // Both as processes (the file's first audit verify and resume).
    const audit = await pipe(['audit', 'verify'], {cwd: dir})
    expect(audit.stderr).to.not.contain('E_INTERNAL')
    expect(audit.code, audit.stderr).to.equal(4)
    expect(await storeHash(path.join(dir, '.pipe'))).to.equal(before)
    const resumed = await pipe(['resume', runId], {cwd: dir})
    expect(resumed.stderr).to.contain('E_STATE')
    expect(resumed.code, resumed.stderr).to.equal(2)
    expect(await readdir(dir)).to.not.include('escape')
  })

  it('a line for a step past the end of an ended run writes nothing on resume, and audit verify says so', async () => {
    const runId = await finishedRun()
    const logged = (await logLines(runId)).find((l) => l.spec !== null)!
    const future = {...logged, seq: 50, snapshot: {...logged.snapshot, step: {...logged.snapshot.step, seq: 50}}}
    await appendFile(path.join(dir, '.pipe', 'runs', runId, 'commits.jsonl'), `${JSON.stringify(future)}\n`)
    const before = await storeHash(path.join(dir, '.pipe'))
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, audit.stdout).to.equal(0)
    expect(audit.stderr).to.contain(`${runId}#50: names a step past the run's last snapshot`)
    expect(audit.stderr).to.not.contain('pipe resume finishes it')
    const resumed = await pipeHere(['resume', runId], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(2)
    expect(await storeHash(path.join(dir, '.pipe'))).to.equal(before)
    expect((await pipeHere(['audit', 'verify'], {cwd: dir})).code).to.equal(0)
  })
  it('a line for a step far ahead in a paused run: resume walks on from where the run stands and leaves no gap', async () => {
    const paused = await pipeHere(['run', defaultPipeline, '--input', sentence, '--json'], {cwd: dir})
    expect(paused.code, paused.stderr).to.equal(10)
    const runId = json<{run_id: string}>(paused).run_id
    const logged = (await logLines(runId)).find((l) => l.spec !== null)!
    const future = {...logged, seq: 50, snapshot: {...logged.snapshot, step: {...logged.snapshot.step, seq: 50}}}
    await appendFile(path.join(dir, '.pipe', 'runs', runId, 'commits.jsonl'), `${JSON.stringify(future)}\n`)
    const resumed = await pipeHere(['resume', runId, '--answers', answers, '--decision', 'go'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(await readdir(path.join(dir, '.pipe', 'runs', runId, 'snapshots'))).to.not.include('000050.json')
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, `${audit.stdout}${audit.stderr}`).to.equal(0)
  })

  it('a torn line followed by good ones in the log of an ended run: resume still says the run has ended, and writes nothing', async () => {
    const runId = await finishedRun()
    const log = path.join(dir, '.pipe', 'runs', runId, 'commits.jsonl')
    const lines = (await readFile(log, 'utf8')).trim().split('\n')
    await writeFile(log, `${[lines[0], lines[1]!.slice(0, 100), ...lines.slice(1)].join('\n')}\n`)
    const before = await storeHash(path.join(dir, '.pipe'))
    const resumed = await pipeHere(['resume', runId], {cwd: dir})
    expect(resumed.stderr).to.contain('E_STATE')
    expect(resumed.code, resumed.stderr).to.equal(2)
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, audit.stderr).to.equal(0)
    expect(await storeHash(path.join(dir, '.pipe'))).to.equal(before)
    // With damage in the run, audit verify reads the whole log and names the line.
    const evidence = (await readdir(path.join(dir, '.pipe', 'evidence'))).find((n) => n.endsWith('.json'))!
    await writeFile(path.join(dir, '.pipe', 'evidence', evidence), '')
    const damaged = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(damaged.code, damaged.stderr).to.equal(4)
    expect(damaged.stderr).to.contain('line 2 of the commit log is not JSON')
    // The good lines still rewrite what the snapshot bound.
    const repaired = await pipeHere(['resume', runId], {cwd: dir})
    expect(repaired.code, repaired.stderr).to.equal(2)
    const after = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(after.code, `${after.stdout}${after.stderr}`).to.equal(0)
    expect(await storeHash(path.join(dir, '.pipe'))).to.equal(before)
  })

  it('a FIFO in place of the commit log: resume and audit verify do not hang', async () => {
    const runId = await finishedRun()
    const log = path.join(dir, '.pipe', 'runs', runId, 'commits.jsonl')
    await rm(log)
    execFileSync('mkfifo', [log])
    const resumed = await pipe(['resume', runId], {cwd: dir, timeoutMs: 60000})
    expect(resumed.stderr).to.contain('E_STATE')
    expect(resumed.code, resumed.stderr).to.equal(2)
    const audit = await pipe(['audit', 'verify'], {cwd: dir, timeoutMs: 60000})
    expect(audit.code, audit.stderr).to.equal(0)
    expect(audit.stderr).to.contain(`${runId}: the commit log cannot be read (not a regular file)`)
  })
})

describe('attacks on the id counters and the ledger log', function () {
  this.timeout(300000)

  it('a FIFO, a device or a folder in place of a counter or the ledger log: lists and audit verify neither hang nor fail', async () => {
    await finishedRun()
    const root = path.join(dir, '.pipe')
    const day = (await readdir(path.join(root, 'ids'))).find((n) => n.startsWith('S-'))!
    const full = json<{specs: Array<{spec_version: string}>}>(await pipeHere(['spec', 'list', '--limit', '1000', '--json'], {cwd: dir})).specs.map(
      (s) => s.spec_version,
    )
    const ledgerFull = json<{entries: Array<{key: string}>}>(await pipeHere(['ledger', 'list', '--json'], {cwd: dir})).entries.map((e) => e.key)
    for (const [what, make] of [
      ['a FIFO', async (file: string) => execFileSync('mkfifo', [file])],
      ['a symlink to /dev/zero', async (file: string) => symlink('/dev/zero', file)],
      ['a folder', async (file: string) => mkdir(file)],
    ] as const) {
      await rm(path.join(root, 'ids', day), {recursive: true, force: true})
      await make(path.join(root, 'ids', day))
      await rm(path.join(root, 'audit', 'ledger.jsonl'), {recursive: true, force: true})
      await make(path.join(root, 'audit', 'ledger.jsonl'))
      // A FIFO or a device as processes, with their timeout; a folder in this process.
      const command = (args: string[]) => (what === 'a folder' ? pipeHere(args, {cwd: dir}) : pipe(args, {cwd: dir, timeoutMs: 60000}))
      const specs = await command(['spec', 'list', '--limit', '2', '--json'])
      expect(specs.code, `${what}: ${specs.stderr}`).to.equal(0)
      expect(
        json<{specs: Array<{spec_version: string}>}>(specs).specs.map((s) => s.spec_version),
        what,
      ).to.deep.equal(full.slice(0, 2))
      const entries = await command(['ledger', 'list', '--limit', '1', '--json'])
      expect(entries.code, `${what}: ${entries.stderr}`).to.equal(0)
      expect(
        json<{entries: Array<{key: string}>}>(entries).entries.map((e) => e.key),
        what,
      ).to.deep.equal(ledgerFull.slice(0, 1))
      const audit = await command(['audit', 'verify'])
      expect(audit.code, `${what}: ${audit.stderr}`).to.be.oneOf([0, 4])
    }
  })

  it('a FIFO in place of the ledger log or the run index: a run stops with the reason instead of hanging', async () => {
    await finishedRun()
    const root = path.join(dir, '.pipe')
    await rm(path.join(root, 'audit', 'ledger.jsonl'))
    execFileSync('mkfifo', [path.join(root, 'audit', 'ledger.jsonl')])
    const published = await pipe(fullRun, {cwd: dir, timeoutMs: 120000})
    expect(published.code, published.stderr).to.not.equal(null)
    expect(published.code).to.not.equal(0)
    expect(`${published.stdout}${published.stderr}`).to.contain('ledger.jsonl is not a regular file')
    await rm(path.join(root, 'audit', 'runs.jsonl'))
    execFileSync('mkfifo', [path.join(root, 'audit', 'runs.jsonl')])
    const created = await pipe(fullRun, {cwd: dir, timeoutMs: 120000})
    expect(created.code, created.stderr).to.equal(4)
    expect(created.stderr).to.contain('runs.jsonl is not a regular file')
  })

  it("a day's counter removed: spec list still names that day's versions first", async () => {
    await finishedRun()
    const root = path.join(dir, '.pipe')
    const full = json<{specs: Array<{spec_version: string}>}>(await pipeHere(['spec', 'list', '--limit', '1000', '--json'], {cwd: dir})).specs.map(
      (s) => s.spec_version,
    )
    const day = (await readdir(path.join(root, 'ids'))).find((n) => n.startsWith('S-'))!
    await rm(path.join(root, 'ids', day))
    // An older day that still has its counter.
    await writeFile(path.join(root, 'ids', 'S-20200101'), '3')
    const listed = await pipeHere(['spec', 'list', '--limit', '3', '--json'], {cwd: dir})
    expect(listed.code, listed.stderr).to.equal(0)
    expect(json<{specs: Array<{spec_version: string}>}>(listed).specs.map((s) => s.spec_version)).to.deep.equal(full.slice(0, 3))
  })

  it('a counter that is a symlink to another file: allocation replaces the link, never writes through it', async () => {
    await finishedRun()
    const root = path.join(dir, '.pipe')
    const victim = path.join(dir, 'victim.txt')
    await writeFile(victim, 'keep me\n')
    const day = (await readdir(path.join(root, 'ids'))).find((n) => n.startsWith('R-'))!
    await rm(path.join(root, 'ids', day))
    await symlink(victim, path.join(root, 'ids', day))
    await finishedRun()
    expect(await readFile(victim, 'utf8')).to.equal('keep me\n')
  })
})
