import {expect} from 'chai'
import {spawn, type ChildProcessWithoutNullStreams} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {lockHolder, processStartTime} from '../../src/util/lock.js'
import {defaultPipeline, examples, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {bundled} from '../helpers/bundled.js'
import {changeIn} from '../helpers/wait.js'

let dir: string
let cleanup: () => Promise<void>
const children: ChildProcessWithoutNullStreams[] = []
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-locks-')))
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  await cleanup()
})

/** A process that tries the lock once (no waiting), says "acquired" or "busy CODE", and holds it until its stdin ends. */
async function contender(lock: string, env: Record<string, string> = {}): Promise<{child: ChildProcessWithoutNullStreams; said: Promise<string>}> {
  const script = bundled(path.join(repoRoot, 'test', 'fixtures', 'locks', 'contender.ts'))
  const child = spawn(process.execPath, [script, lock], {cwd: repoRoot, env: {...process.env, ...env}, stdio: ['pipe', 'pipe', 'pipe']})
  children.push(child)
  let out = ''
  const said = new Promise<string>((resolve) => {
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d
      if (out.includes('\n')) resolve(out.trim())
    })
    child.on('close', () => resolve(out.trim() || 'exited silently'))
  })
  return {child, said}
}

/** The pid of a process that has ended: a holder that is certainly dead. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'])
  await new Promise((resolve) => child.on('close', resolve))
  return child.pid!
}

/** Waits for `file` to appear in `dir` (watched, not polled); fails with what the contender said if it speaks first. */
async function until(dir: string, file: string, what: string, given: Promise<string>): Promise<void> {
  await changeIn(dir, () => existsSync(path.join(dir, file)), what, given).catch(async () => {
    throw new Error(`${what} never happened; the contender said: ${await given}`)
  })
}

describe('lock files', function () {
  this.timeout(60000)

  it('never deletes a fresh lock when a slow process takes over the same dead holder', async () => {
    const lock = path.join(dir, 'resource.lock')
    const pauseDir = path.join(dir, 'pause')
    await mkdir(pauseDir)
    await writeFile(lock, JSON.stringify({pid: await deadPid(), host: os.hostname(), at: new Date().toISOString()}))
    // A sees the dead holder and is held right there, before it acts on what it saw.
    const a = await contender(lock, {PIPE_FAULT_PAUSE_AT: 'lock-stale', PIPE_FAULT_PAUSE_DIR: pauseDir})
    await until(pauseDir, `reached.${a.child.pid}`, 'A reaching the takeover', a.said)
    // B takes the dead holder's lock over meanwhile and holds a fresh lock.
    const b = await contender(lock)
    expect(await b.said).to.equal('acquired')
    const fresh = await readFile(lock, 'utf8')
    expect(JSON.parse(fresh)).to.include({pid: b.child.pid})
    // A goes on with its stale view: it must not delete B's lock, so it finds the resource busy.
    await writeFile(path.join(pauseDir, 'go'), '')
    expect(await a.said).to.equal('busy E_CONFLICT')
    expect(await readFile(lock, 'utf8'), "B's lock is intact").to.equal(fresh)
    b.child.stdin.end()
  })

  it('lets exactly one of several processes racing over a dead holder win', async () => {
    const lock = path.join(dir, 'resource.lock')
    const pauseDir = path.join(dir, 'pause')
    await mkdir(pauseDir)
    await writeFile(lock, JSON.stringify({pid: await deadPid(), host: os.hostname(), at: new Date().toISOString()}))
    const racers = await Promise.all([0, 1, 2, 3].map(() => contender(lock, {PIPE_FAULT_PAUSE_AT: 'lock-stale', PIPE_FAULT_PAUSE_DIR: pauseDir})))
    for (const r of racers) await until(pauseDir, `reached.${r.child.pid}`, 'a racer reaching the takeover', r.said)
    await writeFile(path.join(pauseDir, 'go'), '')
    const said = await Promise.all(racers.map((r) => r.said))
    expect(
      said.filter((s) => s === 'acquired'),
      said.join(', '),
    ).to.have.length(1)
    expect(said.filter((s) => s === 'busy E_CONFLICT')).to.have.length(3)
    const winner = racers[said.indexOf('acquired')]!
    expect(JSON.parse(await readFile(lock, 'utf8'))).to.include({pid: winner.child.pid})
    for (const r of racers) r.child.stdin.end()
  })

  it('takes a live pid with another start time for a dead holder', async () => {
    const lock = path.join(dir, 'resource.lock')
    const sleeper = spawn('sleep', ['300'])
    const start = processStartTime(sleeper.pid!)
    expect(start, 'this test reads /proc').to.be.a('string')
    await writeFile(lock, JSON.stringify({pid: sleeper.pid, host: os.hostname(), start_time: start}))
    expect((await lockHolder(lock))?.alive).to.equal(true)
    await writeFile(lock, JSON.stringify({pid: sleeper.pid, host: os.hostname(), start_time: String(Number(start) + 1)}))
    expect((await lockHolder(lock))?.alive, 'the pid now belongs to another process').to.equal(false)
    const taker = await contender(lock)
    expect(await taker.said).to.equal('acquired')
    taker.child.stdin.end()
    sleeper.kill('SIGKILL')
  })
})

describe('pipe cancel', function () {
  this.timeout(120000)

  it('exits 5 (CANCELLED), and 2 for a run that has already ended', async () => {
    const paused = json<{run_id: string}>(await pipe(['run', defaultPipeline, '--input', path.join(examples, 'one-sentence.txt'), '--json'], {cwd: dir}))
    const cancelled = await pipe(['cancel', paused.run_id, '--json'], {cwd: dir})
    expect(cancelled.code, cancelled.stderr).to.equal(0)
    expect(json<{status: string}>(cancelled).status).to.equal('cancelled')
    expect((await pipe(['cancel', paused.run_id], {cwd: dir})).code).to.equal(2)
  })

  it('never signals an unrelated process that now has the recorded pid', async () => {
    const paused = json<{run_id: string}>(await pipe(['run', defaultPipeline, '--input', path.join(examples, 'one-sentence.txt'), '--json'], {cwd: dir}))
    const unrelated = spawn('sleep', ['300'])
    const exited = new Promise<string>((resolve) => unrelated.on('exit', (code, signal) => resolve(`exited ${code ?? signal}`)))
    const pid = unrelated.pid!
    const wrongStart = String(Number(processStartTime(pid)) + 1)
    // The run says a process with this pid drives it, but that process started at another time: it is gone.
    const runDir = path.join(dir, '.pipe', 'runs', paused.run_id)
    const record = JSON.parse(await readFile(path.join(runDir, 'run.json'), 'utf8')) as {status: string; owner: Record<string, unknown>; pending?: unknown}
    record.status = 'running'
    delete record.pending
    record.owner = {pid, host: os.hostname(), user: 'someone', start_time: wrongStart}
    await writeFile(path.join(runDir, 'run.json'), JSON.stringify(record))
    await writeFile(path.join(runDir, 'owner.lock'), JSON.stringify({pid, host: os.hostname(), start_time: wrongStart, at: new Date().toISOString()}))
    const cancelled = await pipe(['cancel', paused.run_id, '--json'], {cwd: dir})
    expect(cancelled.code, cancelled.stderr).to.equal(0)
    expect(json<{status: string}>(cancelled).status).to.equal('cancelled')
    const state = await Promise.race([exited, new Promise<string>((resolve) => setImmediate(() => resolve('running')))])
    expect(state, 'the unrelated process was not signalled').to.equal('running')
    expect(unrelated.exitCode).to.equal(null)
    unrelated.kill('SIGKILL')
  })
})
