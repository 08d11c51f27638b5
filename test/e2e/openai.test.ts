/**
 * The openai provider against a real chat-completions server on 127.0.0.1. A whole run that asks it,
 * a failed run's error and hint, the main case of the key never written, and each refusal of the
 * endpoint's configuration are `pipe` processes; the other runs (the replies repaired, retried,
 * re-sent, failed or timed out) and the read-backs run in this process (test/helpers/pipe-here.ts:
 * the CLI's path from argv, its output and exit code), asking the same server.
 */
import {expect} from 'chai'
import {cp, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'
import {examples, json, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {snapshotsIn} from '../helpers/stores.js'
import {cannedReply, ModelServer} from '../helpers/model-server.js'

const KEY = 'sk-test-4f1c9a7e2b6d8e0f3a5c7b9d1e2f4a6c'
const prd = path.join(examples, 'full-prd.md')

interface RunJson {
  run_id: string
  status: string
  spec_version: string | null
  error?: {code: string; message: string; hint?: string}
}

let dir: string
let cleanup: () => Promise<void>
let server: ModelServer

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-openai-'))
  await cp(path.join(repoRoot, 'pipelines'), path.join(dir, 'pipelines'), {recursive: true})
})
afterEach(async () => {
  await server?.close()
  await cleanup()
})

/** The default pipeline with changes to its provider block and compile step. */
async function pipeline(provider = '', compile = ''): Promise<string> {
  let text = await readFile(path.join(dir, 'pipelines', 'default.yaml'), 'utf8')
  if (provider) text = text.replace('  timeout_ms: 60000\n', `  timeout_ms: 60000\n${provider}`)
  if (compile) text = text.replace('    prompt: prompts/compile.md\n', `    prompt: prompts/compile.md\n${compile}`)
  const file = path.join(dir, 'pipelines', 'test.yaml')
  await writeFile(file, text)
  return file
}

function run(file: string, extra: string[] = [], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return pipe(['run', file, '--input', prd, '--decision', 'go', '--provider', 'openai', '--json', ...extra], {
    cwd: dir,
    env: {OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY, PIPE_HOME: path.join(dir, 'home'), ...env},
  })
}

/** run() in this process. */
function runHere(file: string, extra: string[] = []): Promise<CliResult> {
  return pipeHere(['run', file, '--input', prd, '--decision', 'go', '--provider', 'openai', '--json', ...extra], {
    cwd: dir,
    env: {OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY, PIPE_HOME: path.join(dir, 'home')},
  })
}

/** What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts). */
async function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(dir, runId)
}

async function compileSnapshot(runId: string): Promise<Snapshot> {
  return (await snapshots(runId)).find((s) => s.step.name === 'compile')!
}

const compileOk = (): string => cannedReply({kind: 'compile'} as never).content!

describe('model steps on an OpenAI-compatible endpoint (a real HTTP server on 127.0.0.1)', function () {
  this.timeout(60000)

  it('runs the whole default pipeline on the server, recording provider, model, endpoint and usage', async () => {
    server = await ModelServer.start(cannedReply)
    const result = await run(await pipeline('  prices: {prompt_per_1k: 0.5, completion_per_1k: 1.5, currency: USD}\n'))
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('succeeded')
    const list = await snapshots(body.run_id)
    expect(list.map((s) => s.step.name)).to.deep.equal(['ingest', 'compile', 'validate_gates', 'plan_tasks', 'generate_vv', 'manual_review', 'publish'])
    const compile = list[1]!
    expect(compile.meta).to.include({provider: 'openai', llm_model: 'gpt-4o-mini', endpoint_host: new URL(server.url).host})
    expect(compile.meta.usage).to.deep.equal({prompt_tokens: 120, completion_tokens: 80, total_tokens: 200, calls: 1, cost: 0.18, currency: 'USD'})
    const spec = json<CanonicalSpec>(await pipeHere(['spec', 'show', body.spec_version!, '--json'], {cwd: dir}))
    expect(spec.features.map((f) => f.id)).to.deep.equal(['FR-001', 'FR-002', 'FR-003'])
    expect(spec.tasks[1]).to.include({id: 'T-002'})
    expect(spec.tasks[1]!.depends_on).to.deep.equal(['T-001'])
    expect(spec.tasks[1]!.acceptance_criteria, 'unknown ids are dropped').to.deep.equal(['AC-001'])
    expect(spec.vv[0]).to.include({id: 'VV-001', kind: 'verification'})
    // The endpoint was asked for JSON matching each step's schema.
    expect(server.requests.map((r) => r.body.response_format?.json_schema?.name)).to.deep.equal(['compile', 'plan_tasks', 'generate_vv'])
    expect(server.requests[0]!.headers.authorization).to.equal(`Bearer ${KEY}`)
    expect(server.requests[0]!.body.messages[1]!.content).to.contain('Team Expense Tracker')
    const shown = json<{usage: {total_tokens: number; calls: number; cost?: number}}>(await pipeHere(['runs', 'show', body.run_id, '--json'], {cwd: dir}))
    expect(shown.usage).to.include({total_tokens: 600, calls: 3})
  })

  it('keeps citations that occur in the input as evidence, and drops and records the rest', async () => {
    server = await ModelServer.start(cannedReply)
    const body = json<RunJson>(await runHere(await pipeline()))
    const compile = await compileSnapshot(body.run_id)
    const dropped = (compile.outputs as {citations_dropped: Array<{excerpt: string}>}).citations_dropped
    expect(dropped.map((d) => d.excerpt)).to.deep.equal(['This sentence is not in the input at all.'])
    const quotes = []
    for (const link of compile.evidence_links.filter((l) => l.type === 'quote')) {
      quotes.push(
        JSON.parse(await readFile(path.join(dir, '.pipe', 'evidence', `${link.evidence_id}.json`), 'utf8')) as {
          content: {excerpt: string}
          source: {ref: string}
        },
      )
    }
    expect(quotes.map((q) => q.content.excerpt)).to.deep.equal([
      'Users can create a group and invite members by email.',
      'Must use the existing PostgreSQL 15 database.',
    ])
    expect(quotes[0]!.source.ref).to.match(/full-prd\.md#L7$/)
  })

  it('repairs a reply that is not JSON by sending the error back', async () => {
    server = await ModelServer.start(cannedReply)
    server.script('compile', {content: 'Sure! Here is the spec: {"goal": '}, {content: compileOk()})
    const body = json<RunJson>(await runHere(await pipeline()))
    expect(body.status).to.equal('succeeded')
    const compile = await compileSnapshot(body.run_id)
    expect(compile.meta.usage?.calls).to.equal(2)
    const repair = server.requests.filter((r) => r.kind === 'compile')[1]!
    expect(repair.body.messages.at(-1)!.content).to.contain('the reply is not valid JSON')
  })

  it('fails with E_MODEL after the bounded repairs when every reply breaks the schema', async () => {
    server = await ModelServer.start(cannedReply)
    const bad = {content: JSON.stringify({title: 'x', goal: 'y'})}
    server.script('compile', bad, bad, bad, bad)
    const result = await runHere(await pipeline('  repair_attempts: 1\n'))
    expect(result.code).to.equal(1)
    const body = json<RunJson>(result)
    expect(body.error?.code).to.equal('E_MODEL')
    expect(server.count('compile'), 'one attempt: the first reply and one repair').to.equal(2)
    const compile = await compileSnapshot(body.run_id)
    expect(compile.spec_version_out).to.equal(null)
    expect(compile.errors).to.have.length(1)
    expect(compile.errors[0]!.code).to.equal('E_MODEL')
    expect(compile.errors[0]!.message).to.contain("must have required property 'features'")
    expect((compile.errors[0]!.details as {attempts: unknown[]}).attempts).to.have.length(2)
  })

  it('retries a 429 and succeeds, recording the failed attempt', async () => {
    server = await ModelServer.start(cannedReply)
    server.script('compile', {status: 429, body: {error: {message: 'Rate limit reached', type: 'rate_limit'}}})
    const body = json<RunJson>(await runHere(await pipeline()))
    expect(body.status).to.equal('succeeded')
    const compile = await compileSnapshot(body.run_id)
    expect(compile.step.attempts).to.equal(2)
    expect(compile.errors.map((e) => [e.code, e.attempt, e.retryable])).to.deep.equal([['E_MODEL', 1, true]])
    expect(compile.errors[0]!.message).to.contain('429')
  })

  it('sends a request once more, in the same attempt, when its connection closed before any reply', async () => {
    server = await ModelServer.start(cannedReply)
    server.script('compile', {reset: true})
    const body = json<RunJson>(await runHere(await pipeline()))
    expect(body.status).to.equal('succeeded')
    expect(server.count('compile')).to.equal(2)
    const compile = await compileSnapshot(body.run_id)
    expect(compile.step.attempts).to.equal(1)
    expect(compile.errors).to.deep.equal([])
  })

  it('fails after three attempts when the endpoint answers 500 each time', async () => {
    server = await ModelServer.start(cannedReply)
    const fail = {status: 500, body: {error: {message: 'internal error'}}}
    server.script('compile', fail, fail, fail, fail)
    const result = await runHere(await pipeline())
    expect(result.code).to.equal(1)
    const compile = await compileSnapshot(json<RunJson>(result).run_id)
    expect(compile.step.attempts).to.equal(3)
    expect(compile.errors.map((e) => e.attempt)).to.deep.equal([1, 2, 3])
    expect(server.count('compile')).to.equal(3)
  })

  it('ends a reply slower than the step timeout in E_TOOL_TIMEOUT', async () => {
    server = await ModelServer.start(cannedReply)
    server.script('compile', {hang: true})
    const result = await runHere(await pipeline('', '    timeout_ms: 500\n    retry: {max_retries: 0}\n'))
    expect(result.code).to.equal(1)
    const body = json<RunJson>(result)
    expect(body.error?.code).to.equal('E_TOOL_TIMEOUT')
  })

  it('fails at once on 401 with a hint to set the key', async () => {
    server = await ModelServer.start(cannedReply)
    server.script('compile', {status: 401, body: {error: {message: `Incorrect API key provided: ${KEY}`, type: 'invalid_request_error'}}})
    const result = await run(await pipeline())
    expect(result.code).to.equal(1)
    const body = json<RunJson>(result)
    expect(body.error?.code).to.equal('E_CONFIG')
    expect(body.error?.hint).to.contain('Set OPENAI_API_KEY')
    expect(server.count('compile')).to.equal(1)
    expect(result.stdout).to.contain('Set OPENAI_API_KEY')
  })

  it('never writes the API key, or a slice of it an endpoint echoes, to the store, the logs or the output', async () => {
    server = await ModelServer.start(cannedReply)
    server.script('compile', {status: 401, body: {error: {message: `Incorrect API key provided: ${KEY}`}}})
    const outputs: CliResult[] = [await run(await pipeline())]
    server.script('compile', {status: 500, body: {error: {message: `upstream said Authorization: Bearer ${KEY}`}}})
    // The first run from a process, the others in this process.
    outputs.push(await runHere(await pipeline()))
    outputs.push(await runHere(await pipeline(), ['--text', 'x']).catch((e: unknown) => ({code: 1, stdout: String(e), stderr: '', signal: null})))
    // An endpoint that echoes part of the key, without its sk- shape.
    const slice = KEY.slice(8, 30)
    server.script('compile', {status: 401, body: {error: {message: `Incorrect API key provided: …${slice}…`}}})
    outputs.push(await runHere(await pipeline()))
    for (const o of outputs) expect(`${o.stdout}${o.stderr}`).to.not.contain(KEY).and.not.contain(slice.slice(0, 12)).and.not.contain(slice.slice(-12))
    const files: string[] = []
    const walk = async (at: string): Promise<void> => {
      for (const entry of await readdir(at, {withFileTypes: true}).catch(() => [])) {
        const full = path.join(at, entry.name)
        if (entry.isDirectory()) await walk(full)
        else files.push(full)
      }
    }
    await walk(path.join(dir, '.pipe'))
    await walk(path.join(dir, 'home'))
    expect(files.some((f) => f.includes('orchestrator-'))).to.equal(true)
    for (const file of files)
      expect(await readFile(file, 'utf8'), file)
        .to.not.contain(KEY)
        .and.not.contain(slice.slice(0, 12))
        .and.not.contain(slice.slice(-12))
  })

  it('refuses --provider openai with no endpoint configured, before touching the store', async () => {
    server = await ModelServer.start()
    const result = await pipe(['run', await pipeline(), '--input', prd, '--provider', 'openai'], {
      cwd: dir,
      env: {OPENAI_API_KEY: undefined, OPENAI_BASE_URL: undefined},
    })
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('Error [E_CONFIG]: the openai provider needs an endpoint')
    expect(await readdir(dir)).to.not.include('.pipe')
  })

  it('refuses credentials inside OPENAI_BASE_URL with E_CONFIG saying to put the key in OPENAI_API_KEY, never printing them, before touching the store', async () => {
    server = await ModelServer.start()
    const withCredentials = server.url.replace('http://', 'http://alice:Pa55-in-url@')
    const result = await pipe(['run', await pipeline(), '--input', prd, '--provider', 'openai', '--json'], {
      cwd: dir,
      env: {OPENAI_API_KEY: undefined, OPENAI_BASE_URL: withCredentials},
    })
    expect(result.code, result.stdout + result.stderr).to.equal(2)
    const {error} = json<{error: {code: string; message: string; hint: string}}>(result)
    expect(error.code).to.equal('E_CONFIG')
    expect(error.message).to.match(/OPENAI_BASE_URL holds credentials/)
    expect(error.hint).to.match(/OPENAI_API_KEY/)
    expect(result.stdout + result.stderr).to.not.match(/Pa55-in-url|alice/)
    expect(await readdir(dir)).to.not.include('.pipe')
    expect(server.requests.length, 'the endpoint was never asked').to.equal(0)
  })

  it('falls back to JSON mode when the endpoint rejects JSON-schema output', async () => {
    server = await ModelServer.start((request) =>
      request.body.response_format?.type === 'json_schema'
        ? {status: 400, body: {error: {message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported"}}}
        : cannedReply(request),
    )
    const body = json<RunJson>(await runHere(await pipeline()))
    expect(body.status).to.equal('succeeded')
    expect(server.requests.filter((r) => r.body.response_format?.type === 'json_object').length).to.be.greaterThan(0)
  })
})
