/**
 * Seed 002: every key error reaches the Evidence store, linked from the snapshot of the step that
 * ended with it, whatever its code: a model endpoint that kept failing (E_MODEL) and a bug in pipe
 * (E_INTERNAL) too. The internal error's hint says the log has the stack trace: it has.
 */
import {expect} from 'chai'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {openStore} from '../../src/store/open.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {cannedReply, ModelServer} from '../helpers/model-server.js'

interface RunJson {
  run_id: string
  status: string
  error?: {code: string; message: string; hint?: string; trace_id?: string; log?: string}
}

let dir: string
let cleanup: () => Promise<void>
let server: ModelServer | undefined

beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-error-evidence-')))
afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup()
})

/** The error evidence the step's snapshot links: its content, read through the store as `pipe` reads it. */
async function errorEvidenceOf(runId: string, step: string): Promise<{snapshot: Snapshot; notes: string[]}> {
  const store = await openStore(path.join(dir, '.pipe'), 'existing')
  const snapshot = (await store.readSnapshots(runId)).find((s) => s.step.name === step)!
  const notes: string[] = []
  for (const link of snapshot.evidence_links.filter((l) => l.type === 'log')) {
    const evidence = await store.readEvidence(link.evidence_id)
    notes.push(String((evidence.content as {note?: unknown}).note))
  }
  return {snapshot, notes}
}

describe('every error a step stops its run with is evidence (seed 002)', function () {
  this.timeout(120000)

  it('a compile whose endpoint answers 500 three times: E_MODEL, kept as log evidence linked from the compile snapshot', async () => {
    server = await ModelServer.start(cannedReply)
    const fail = {status: 500, body: {error: {message: 'internal error'}}}
    server.script('compile', fail, fail, fail)
    const result = await pipe(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--provider', 'openai', '--json'], {
      cwd: dir,
      env: {OPENAI_BASE_URL: server.url, OPENAI_API_KEY: 'sk-test-4f1c9a7e2b6d8e0f3a5c7b9d1e2f4a6c', PIPE_HOME: path.join(dir, 'home')},
    })
    expect(result.code, result.stderr).to.equal(1)
    const body = json<RunJson>(result)
    expect(body.error?.code).to.equal('E_MODEL')
    const {snapshot, notes} = await errorEvidenceOf(body.run_id, 'compile')
    expect(snapshot.errors.map((e) => e.code)).to.deep.equal(['E_MODEL', 'E_MODEL', 'E_MODEL'])
    expect(notes).to.have.length(1)
    expect(notes[0]).to.match(/^E_MODEL at step compile: .*500/)
    const audit = await pipe(['audit', 'verify', body.run_id], {cwd: dir})
    expect(audit.code, audit.stdout).to.equal(0)
  })

  it('a bug in pipe inside a step: E_INTERNAL, kept as evidence, and the log has the stack trace under the trace id stderr names', async () => {
    const file = path.join(dir, 'one.yaml')
    await writeFile(file, 'version: 1\nname: one\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop}\n')
    const home = path.join(dir, 'home')
    const result = await pipe(['run', file, '--json'], {cwd: dir, env: {PIPE_HOME: home, PIPE_FAULT_THROW_AT: 'attempt:b'}})
    expect(result.code, result.stderr).to.equal(1)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('failed')
    expect(body.error?.code).to.equal('E_INTERNAL')
    expect(body.error?.hint).to.contain('the log file has the stack trace')
    const {snapshot, notes} = await errorEvidenceOf(body.run_id, 'b')
    expect(notes).to.deep.equal(['E_INTERNAL at step b: fault injected at attempt:b#1'])
    const traceId = snapshot.errors.at(-1)!.trace_id
    expect(body.error?.trace_id).to.equal(traceId)
    const [log] = (await readdir(path.join(home, 'logs'))).map((f) => path.join(home, 'logs', f))
    const text = await readFile(log!, 'utf8')
    // The entry of the step's error, with the stack indented under it (a frame of the engine's attempt among it).
    const entry = text.split(/\n(?=\S)/).find((e) => e.includes(`trace=${traceId} [E_INTERNAL] run ${body.run_id} step b:`))
    expect(entry, text).to.be.a('string')
    expect(entry)
      .to.contain('fault injected at attempt:b#1')
      .and.match(/\n {4}\s*at .*attempt/)
  })
})
