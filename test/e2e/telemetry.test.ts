/**
 * OpenTelemetry traces from the built CLI to a real OTLP/HTTP receiver on 127.0.0.1: a span per
 * run session, per step attempt, per model call (a real chat-completions server) and per tool call,
 * parents linked; a paused run resumed by another process continues its trace; a collector that is
 * down or never answers costs a bounded wait and never fails a run; and a run with no collector
 * configured loads no OpenTelemetry module at all.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import type {RunRecord} from '../../src/types/run.js'
import {bin, json, node, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {ModelServer} from '../helpers/model-server.js'
import {OtlpReceiver, type ReceivedSpan} from '../helpers/otlp-receiver.js'

interface RunJson {
  run_id: string
  status: string
}

/**
 * Every variable that could point the CLI at a collector, unset: each test says which it sets. The
 * flush's bound is long (the default 3 s was passed by a loaded machine, and the spans a test looks
 * for were dropped); the tests of a silent or dripping collector set a short one of their own.
 */
const NO_OTEL = {
  OTEL_EXPORTER_OTLP_ENDPOINT: undefined,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined,
  OTEL_EXPORTER_OTLP_PROTOCOL: undefined,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: undefined,
  OTEL_SDK_DISABLED: undefined,
  OTEL_TRACES_EXPORTER: undefined,
  OTEL_EXPORTER_OTLP_TIMEOUT: '120000',
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: undefined,
}

const TWO_STEPS = 'version: 1\nname: two\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop}\n'
const SCHEMA = {type: 'object', additionalProperties: false, required: ['items'], properties: {items: {type: 'array', items: {type: 'string'}}}}
const MODEL_STEP = `version: 1
name: notes
provider: {prices: {prompt_per_1k: 0.5, completion_per_1k: 1.5, currency: EUR}}
steps:
  - id: draft
    kind: model
    prompt: notes.md
    output_schema: notes.schema.json
    spec_path: notes
    next: check
  - {id: check, kind: review, on: {go: done}}
  - {id: done, kind: noop}
`

let dir: string
let cleanup: () => Promise<void>
let receiver: OtlpReceiver | undefined
let server: ModelServer | undefined

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-otel-'))
  await writeFile(path.join(dir, 'two.yaml'), TWO_STEPS)
  await writeFile(path.join(dir, 'notes.md'), 'List the changes.\n')
  await writeFile(path.join(dir, 'notes.schema.json'), JSON.stringify(SCHEMA))
  await writeFile(path.join(dir, 'notes.yaml'), MODEL_STEP)
})
afterEach(async () => {
  await receiver?.close()
  await server?.close()
  receiver = undefined
  server = undefined
  await cleanup()
})

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return pipe(args, {
    cwd: dir,
    env: {...NO_OTEL, PIPE_HOME: path.join(dir, 'home'), ...(server ? {OPENAI_BASE_URL: server.url} : {}), ...env},
    timeoutMs: 60000,
  })
}

async function record(runId: string): Promise<RunRecord> {
  return JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', runId, 'run.json'), 'utf8')) as RunRecord
}

function one(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const found = spans.filter((s) => s.name === name)
  expect(
    found.map((s) => s.name),
    `one span named ${name} among ${spans.map((s) => s.name).join(', ')}`,
  ).to.deep.equal([name])
  return found[0]!
}

describe('OpenTelemetry traces (a real OTLP/HTTP receiver on 127.0.0.1)', function () {
  this.timeout(120000)

  it('sends one trace: the run span and a span per step under it, with the run, pipeline, step, kind and outcome', async () => {
    receiver = await OtlpReceiver.start()
    const result = await cli(['run', 'two.yaml', '--json'], {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url})
    expect(result.code, result.stderr).to.equal(0)
    const {run_id: runId} = json<RunJson>(result)
    expect(receiver.paths).to.include('/v1/traces')
    const {spans} = receiver
    expect(new Set(spans.map((s) => s.traceId)).size, 'one trace').to.equal(1)
    const run = one(spans, 'invoke_workflow two')
    expect(run.parentSpanId).to.equal(undefined)
    expect(run.attributes).to.include({
      'pipe.run_id': runId,
      'pipe.pipeline': 'two',
      'pipe.outcome': 'succeeded',
      'pipe.session': 'started',
      'gen_ai.operation.name': 'invoke_workflow',
    })
    expect(run.resource['service.name']).to.equal('pipe')
    const a = one(spans, 'step a')
    const b = one(spans, 'step b')
    for (const step of [a, b]) expect(step.parentSpanId, step.name).to.equal(run.spanId)
    expect(a.attributes).to.include({
      'pipe.run_id': runId,
      'pipe.pipeline': 'two',
      'pipe.step': 'a',
      'pipe.kind': 'noop',
      'pipe.outcome': 'success',
      'pipe.seq': 1,
      'pipe.attempt': 1,
    })
    expect(b.attributes).to.include({'pipe.step': 'b', 'pipe.kind': 'noop', 'pipe.seq': 2})
    // The record keeps the trace, so a later session of the run can join it.
    expect((await record(runId)).trace).to.deep.equal({trace_id: run.traceId, span_id: run.spanId})
  })

  it("a foreach's child runs are sessions under the foreach step, in the parent's trace", async () => {
    receiver = await OtlpReceiver.start()
    await writeFile(
      path.join(dir, 'fan.yaml'),
      `version: 1\nname: fan\nsteps:\n  - id: each\n    kind: foreach\n    items: '\${{ ["x", "y"] }}'\n    inputs: {name: {type: string, required: true}}\n    steps:\n      - {id: greet, kind: noop}\n    with: {name: "\${{ item }}"}\n    concurrency: 2\n`,
    )
    const result = await cli(['run', 'fan.yaml', '--json'], {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url})
    expect(result.code, result.stderr).to.equal(0)
    const {spans} = receiver
    expect(new Set(spans.map((s) => s.traceId)).size, 'one trace').to.equal(1)
    const each = one(spans, 'step each')
    const children = spans.filter((s) => s.name === 'invoke_workflow fan.each')
    expect(children.length).to.equal(2)
    for (const child of children) {
      expect(child.parentSpanId).to.equal(each.spanId)
      expect(child.attributes).to.include({'pipe.parent_run_id': json<RunJson>(result).run_id, 'pipe.parent_step': 'each', 'pipe.outcome': 'succeeded'})
      const greet = spans.filter((s) => s.name === 'step greet' && s.parentSpanId === child.spanId)
      expect(greet.map((s) => s.attributes['pipe.run_id'])).to.deep.equal([child.attributes['pipe.run_id']])
      expect((await record(String(child.attributes['pipe.run_id']))).trace).to.deep.equal({trace_id: each.traceId, span_id: child.spanId})
    }
  })

  it("a failing step's span carries its error code; the run span ends in error", async () => {
    receiver = await OtlpReceiver.start()
    // A command no policy allows: the step fails with E_POLICY_DENIED.
    await writeFile(path.join(dir, 'fail.yaml'), 'version: 1\nname: fail\nsteps:\n  - {id: boom, kind: command, run: [node, -e, "process.exit(3)"]}\n')
    const result = await cli(['run', 'fail.yaml', '--json'], {OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`})
    expect(result.code).to.not.equal(0)
    const step = one(receiver.spans, 'step boom')
    const code = step.attributes['pipe.error_code']
    expect(code).to.equal('E_POLICY_DENIED')
    expect(step.attributes['error.type']).to.equal(code)
    expect(step.status.code, 'ERROR').to.equal(2)
    const run = one(receiver.spans, 'invoke_workflow fail')
    expect(run.attributes).to.include({'pipe.outcome': 'failed', 'pipe.error_code': code})
    expect(run.status.code).to.equal(2)
  })

  it("a model step's span and its chat span carry the GenAI attributes; a paused run resumed by another process continues the same trace", async () => {
    receiver = await OtlpReceiver.start()
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify({items: ['CSV export']}), usage: {prompt_tokens: 400, completion_tokens: 100}})
    const otel = {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url}
    const paused = await cli(['run', 'notes.yaml', '--json'], otel)
    expect(paused.code, paused.stderr).to.equal(10)
    const {run_id: runId} = json<RunJson>(paused)
    const first = [...receiver.spans]
    const draft = one(first, 'step draft')
    expect(draft.attributes).to.include({
      'pipe.kind': 'model',
      'gen_ai.request.model': 'gpt-4o-mini',
      'pipe.model_calls': 1,
      'pipe.cost': 0.35,
      'pipe.cost_currency': 'EUR',
      'pipe.cache_hit': false,
    })
    // The tokens are the model call's: on the step too, a backend summing the trace would count them twice.
    expect(draft.attributes).to.not.have.any.keys('gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens')
    const chat = one(first, 'chat gpt-4o-mini')
    expect(chat.parentSpanId, 'the model call is under its step').to.equal(draft.spanId)
    expect(chat.kind, 'CLIENT').to.equal(3)
    expect(chat.attributes).to.include({
      'gen_ai.operation.name': 'chat',
      // A local address names no provider, and the pipeline names none: the conventions' value for one outside their list.
      'gen_ai.provider.name': '_OTHER',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.usage.input_tokens': 400,
      'gen_ai.usage.output_tokens': 100,
      'pipe.reply_source': 'live',
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(server.url).port),
    })
    expect(chat.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['stop'])
    const check = one(first, 'step check')
    expect(check.attributes['pipe.outcome']).to.equal('awaiting_input')
    const started = one(first, 'invoke_workflow notes')
    expect(started.attributes['pipe.outcome']).to.equal('awaiting_input')

    const resumed = await cli(['resume', runId, '--decision', 'go', '--json'], otel)
    expect(resumed.code, resumed.stderr).to.equal(0)
    const later = receiver.spans.slice(first.length)
    expect(later.length, 'the resumed session sent spans').to.be.greaterThan(0)
    expect(new Set(receiver.spans.map((s) => s.traceId)), 'both sessions in one trace').to.deep.equal(new Set([started.traceId]))
    const session = one(later, 'invoke_workflow notes')
    expect(session.parentSpanId, "under the run's first span").to.equal(started.spanId)
    expect(session.attributes).to.include({'pipe.run_id': runId, 'pipe.session': 'resumed', 'pipe.outcome': 'succeeded'})
    expect(one(later, 'step done').parentSpanId).to.equal(session.spanId)
    expect((await record(runId)).trace).to.deep.equal({trace_id: started.traceId, span_id: started.spanId})
  })

  it("http/protobuf: tokens summed over the trace are the run's, once; the provider named by the pipeline; the wait for a review a span of its own", async () => {
    receiver = await OtlpReceiver.start()
    server = await ModelServer.start()
    // A reply the schema refuses, then its repair: two model calls in one step.
    server.script(
      'draft',
      {content: JSON.stringify({items: 'not a list'}), usage: {prompt_tokens: 300, completion_tokens: 50}},
      {content: JSON.stringify({items: ['CSV export']}), usage: {prompt_tokens: 400, completion_tokens: 100}},
    )
    await writeFile(path.join(dir, 'named.yaml'), MODEL_STEP.replace('name: notes\nprovider: {', 'name: notes\nprovider: {name: ollama, '))
    const otel = {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf'}
    const paused = await cli(['run', 'named.yaml', '--json'], otel)
    expect(paused.code, paused.stderr).to.equal(10)
    const {run_id: runId} = json<RunJson>(paused)
    const resumed = await cli(['resume', runId, '--decision', 'go', '--json'], otel)
    expect(resumed.code, resumed.stderr).to.equal(0)
    const {spans} = receiver
    expect(new Set(spans.map((s) => s.encoding)), 'every span came as protobuf').to.deep.equal(new Set(['protobuf']))
    expect(new Set(spans.map((s) => s.traceId)).size, 'one trace').to.equal(1)
    const chats = spans.filter((s) => s.name === 'chat gpt-4o-mini')
    expect(chats).to.have.length(2)
    for (const chat of chats) expect(chat.attributes['gen_ai.provider.name']).to.equal('ollama')
    // What a backend does: sum the usage attributes over every span of the trace.
    const sum = (key: string): number => spans.reduce((n, s) => n + (typeof s.attributes[key] === 'number' ? s.attributes[key] : 0), 0)
    const shown = json<{usage: {prompt_tokens: number; completion_tokens: number; calls: number}}>(await cli(['runs', 'show', runId, '--json']))
    expect(shown.usage).to.include({prompt_tokens: 700, completion_tokens: 150, calls: 2})
    expect(sum('gen_ai.usage.input_tokens'), 'input tokens counted once').to.equal(shown.usage.prompt_tokens)
    expect(sum('gen_ai.usage.output_tokens'), 'output tokens counted once').to.equal(shown.usage.completion_tokens)
    // The time the run waited for its review, from the pause to the decision, beside the session that resumed it.
    const root = spans.find((s) => s.name === 'invoke_workflow notes' && s.parentSpanId === undefined)!
    const wait = one(spans, 'await review')
    expect(wait.parentSpanId).to.equal(root.spanId)
    expect(wait.attributes).to.include({'pipe.wait': 'person', 'pipe.awaiting': 'review', 'pipe.step': 'check'})
    const resumedSession = spans.find((s) => s.name === 'invoke_workflow notes' && s.attributes['pipe.session'] === 'resumed')!
    expect(wait.start).to.be.at.least(root.start)
    expect(wait.end).to.be.at.least(wait.start)
    expect(wait.end).to.be.at.most(resumedSession.end)
  })

  it("an agent step's tool calls are execute_tool spans under its invoke_agent span", async () => {
    receiver = await OtlpReceiver.start()
    server = await ModelServer.start()
    const repo = path.join(dir, 'repo')
    await mkdir(repo)
    await writeFile(path.join(repo, 'calc.js'), 'export const one = 1\n')
    execFileSync('git', ['init', '-q'], {cwd: repo})
    await writeFile(
      path.join(dir, 'agent.yaml'),
      'version: 1\nname: helper\nsteps:\n  - id: look\n    kind: agent\n    prompt: notes.md\n    tools: [read_file]\n',
    )
    server.script('look', {tool_calls: [{id: 'c1', name: 'read_file', arguments: {path: 'calc.js'}}]}, {content: 'It exports one.'})
    const result = await pipe(['run', path.join(dir, 'agent.yaml'), '--json'], {
      cwd: repo,
      env: {...NO_OTEL, PIPE_HOME: path.join(dir, 'home'), OPENAI_BASE_URL: server.url, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url},
      timeoutMs: 60000,
    })
    expect(result.code, result.stderr).to.equal(0)
    const agent = one(receiver.spans, 'invoke_agent look')
    expect(agent.attributes).to.include({'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'look', 'pipe.tool_calls': 1})
    const tool = one(receiver.spans, 'execute_tool read_file')
    expect(tool.parentSpanId).to.equal(agent.spanId)
    expect(tool.attributes).to.include({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'read_file',
      'gen_ai.tool.call.id': 'c1',
      'pipe.tool.level': 'safe',
      'pipe.tool.decision': 'auto',
      'pipe.tool.ok': true,
    })
    const chats = receiver.spans.filter((s) => s.name.startsWith('chat '))
    expect(chats.length, 'two turns').to.equal(2)
    for (const chat of chats) expect(chat.parentSpanId).to.equal(agent.spanId)
  })

  it('a collector that refuses connections, or takes them and never answers, neither fails nor hangs a run', async () => {
    // A port that was just free: nothing listens there.
    const gone = await OtlpReceiver.start()
    const closed = gone.url
    await gone.close()
    const refused = await cli(['run', 'two.yaml', '--json'], {OTEL_EXPORTER_OTLP_ENDPOINT: closed, OTEL_EXPORTER_OTLP_TIMEOUT: '500'})
    expect(refused.code, refused.stderr).to.equal(0)
    expect(json<RunJson>(refused).status).to.equal('succeeded')
    expect(refused.stderr).to.contain('Warning: traces were not delivered to').and.contain('the run itself is not affected')

    receiver = await OtlpReceiver.start({answer: false})
    const silent = await cli(['run', 'two.yaml', '--json'], {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_TIMEOUT: '500'})
    expect(silent.signal, 'the process ended by itself').to.equal(null)
    expect(silent.code, silent.stderr).to.equal(0)
    expect(json<RunJson>(silent).status).to.equal('succeeded')
    expect(silent.stderr).to.contain('no answer within 500 ms')
  })

  it("a collector that answers and then drips its body for ever costs the bound once, then the CLI exits with the run's code", async () => {
    receiver = await OtlpReceiver.start({answer: 'drip'})
    const dripped = await cli(['run', 'two.yaml', '--json'], {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_TIMEOUT: '1000'})
    expect(dripped.signal, 'the process ended by itself (not killed by the helper)').to.equal(null)
    expect(dripped.code, dripped.stderr).to.equal(0)
    expect(json<RunJson>(dripped).status).to.equal('succeeded')
    expect(dripped.stderr).to.contain('Warning: traces were not delivered to').and.contain('no answer within 1000 ms')
  })

  it('a run with no collector configured loads no OpenTelemetry module (and one with a collector does)', async () => {
    const log = path.join(dir, 'loaded.txt')
    // A module resolution hook (node --import) that writes down every module the process loads.
    await writeFile(
      path.join(dir, 'hooks.mjs'),
      `import {appendFileSync} from 'node:fs'\nexport async function resolve(specifier, context, next) {\n  const resolved = await next(specifier, context)\n  appendFileSync(${JSON.stringify(log)}, resolved.url + '\\n')\n  return resolved\n}\n`,
    )
    await writeFile(
      path.join(dir, 'register.mjs'),
      `import {register} from 'node:module'\nregister(${JSON.stringify(pathToFileURL(path.join(dir, 'hooks.mjs')).href)})\n`,
    )
    const traced = (env: Record<string, string | undefined>): Promise<CliResult> =>
      node(['--import', pathToFileURL(path.join(dir, 'register.mjs')).href, bin, 'run', 'two.yaml', '--json'], {
        cwd: dir,
        env: {...NO_OTEL, PIPE_HOME: path.join(dir, 'home'), ...env},
      })

    const plain = await traced({})
    expect(plain.code, plain.stderr).to.equal(0)
    const loaded = (await readFile(log, 'utf8')).split('\n').filter(Boolean)
    expect(loaded.length, 'the hook saw the modules the run loaded').to.be.greaterThan(0)
    expect(loaded.filter((url) => /opentelemetry/i.test(url))).to.deep.equal([])

    receiver = await OtlpReceiver.start()
    await writeFile(log, '')
    const withCollector = await traced({OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url})
    expect(withCollector.code, withCollector.stderr).to.equal(0)
    expect(
      (await readFile(log, 'utf8')).split('\n').filter((url) => /opentelemetry/i.test(url)).length,
      'the same hook sees the exporter load',
    ).to.be.greaterThan(0)
    expect(receiver.spans.length).to.be.greaterThan(0)
  })
})
