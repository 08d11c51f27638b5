/** Request keys, the cassette reader and writer, and the reply transport (in process, real files). */
import {expect} from 'chai'
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {PipeError} from '../../src/errors.js'
import type {ChatCall, ChatReply, ChatRequest, ChatTransport} from '../../src/providers/chat.js'
import {Cassette, MAX_CASSETTE_BYTES, normaliseRequest, parseCassette, requestKey, serialiseCassette, stableRequest} from '../../src/providers/cassette.js'
import {ReplyLog, ReplyTransport} from '../../src/providers/reply-transport.js'
import {requestKeyV2} from '../../src/providers/request-key.js'
import {hashJson} from '../../src/util/hash.js'
import {planProvider} from '../../src/providers/select.js'
import {ReplyCache} from '../../src/store/replies.js'
import {addSecret} from '../../src/util/redact.js'

const base: ChatRequest = {
  model: 'm',
  messages: [
    {role: 'system', content: 'You answer.'},
    {role: 'user', content: 'Hello'},
  ],
  temperature: 0,
  response_format: {
    type: 'json_schema',
    json_schema: {name: 'draft', schema: {type: 'object', properties: {a: {type: 'string'}, b: {type: 'number'}}}, strict: false},
  },
}

function call(step = 'draft', run = 'R-20260101-0001'): ChatCall {
  return {signal: new AbortController().signal, step, run}
}

/** A live endpoint in process: counts requests, answers with the request's last message echoed. */
class Echo implements ChatTransport {
  readonly endpointHost = '127.0.0.1:1'
  count = 0
  gate: Promise<void> = Promise.resolve()
  async complete(request: ChatRequest): Promise<ChatReply> {
    this.count++
    await this.gate
    return {
      model: 'echo',
      message: {role: 'assistant', content: `${this.count}:${request.messages.at(-1)!.content}`},
      finish_reason: 'stop',
      usage: {prompt_tokens: 1, completion_tokens: 1},
    }
  }
}

let dir: string
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pipe-cassette-unit-'))
})
afterEach(async () => {
  await rm(dir, {recursive: true, force: true})
})

describe('request keys', () => {
  it('do not depend on key order, absent fields or extra fields pipe does not send', () => {
    const reordered = JSON.parse(
      JSON.stringify({
        response_format: {
          json_schema: {strict: false, schema: {properties: {b: {type: 'number'}, a: {type: 'string'}}, type: 'object'}, name: 'draft'},
          type: 'json_schema',
        },
        temperature: 0,
        messages: base.messages,
        model: 'm',
      }),
    ) as ChatRequest
    expect(requestKey(reordered)).to.equal(requestKey(base))
    expect(requestKey({...base, tools: [], max_tokens: undefined} as unknown as ChatRequest)).to.equal(requestKey(base))
    expect(requestKey({...base, stream: false} as unknown as ChatRequest)).to.equal(requestKey(base))
    expect(requestKey(base)).to.match(/^sha256:[0-9a-f]{64}$/)
  })

  it('change with the model, each message, the temperature, max_tokens, the schema, tools and tool_choice', () => {
    const variants: ChatRequest[] = [
      {...base, model: 'n'},
      {...base, messages: [base.messages[0]!, {role: 'user', content: 'Hello!'}]},
      {
        ...base,
        messages: [
          {role: 'system', content: 'You answer.'},
          {role: 'assistant', content: 'Hello'},
        ],
      },
      {...base, temperature: 0.2},
      (({temperature: _t, ...rest}) => rest)(base),
      {...base, max_tokens: 100},
      {...base, response_format: {type: 'json_object'}},
      {...base, tools: [{type: 'function', function: {name: 'read_file', parameters: {type: 'object'}}}]},
      {...base, tool_choice: 'required'},
    ]
    const keys = new Set([requestKey(base), ...variants.map(requestKey)])
    expect(keys.size).to.equal(variants.length + 1)
  })

  it('keep tool calls and tool results of a conversation', () => {
    const conversation: ChatRequest = {
      model: 'm',
      messages: [
        {role: 'user', content: 'Read a.txt'},
        {role: 'assistant', content: null, tool_calls: [{id: 'call_1', type: 'function', function: {name: 'read_file', arguments: '{"path":"a.txt"}'}}]},
        {role: 'tool', tool_call_id: 'call_1', content: 'hello'},
      ],
      tools: [{type: 'function', function: {name: 'read_file', description: 'Reads a file', parameters: {type: 'object'}}}],
    }
    expect(normaliseRequest(conversation)).to.deep.equal(conversation)
    const other = structuredClone(conversation)
    ;(other.messages[1] as {tool_calls: Array<{function: {arguments: string}}>}).tool_calls[0]!.function.arguments = '{"path":"b.txt"}'
    expect(requestKey(other)).to.not.equal(requestKey(conversation))
  })

  it('are computed over the redacted request: a secret never shapes the key, and its value does not matter', () => {
    addSecret('s3cret-value-one')
    addSecret('s3cret-value-two')
    const a = {...base, messages: [{role: 'user' as const, content: 'token s3cret-value-one'}]}
    const b = {...base, messages: [{role: 'user' as const, content: 'token s3cret-value-two'}]}
    expect(normaliseRequest(a).messages[0]!.content).to.equal('token [REDACTED]')
    expect(requestKey(a)).to.equal(requestKey(b))
  })
})

describe('keys that do not depend on when or where a request was made', () => {
  const ask = (content: string): ChatRequest => ({
    model: 'm',
    messages: [
      {role: 'system', content: 'step s'},
      {role: 'user', content},
    ],
  })

  it('the same request with other run, spec, feature and evidence ids and other times pipe wrote has the same key', () => {
    const today = ask('run R-20261124-0002 (child of R-20261124-0001) read S-20261124-0007 of F-2026-003, evidence E-0042, at 2026-11-24T22:08:08.123Z')
    const later = ask('run R-20310709-0013 (child of R-20310709-0012) read S-20310709-0001 of F-2031-001, evidence E-0007, at 2031-07-09T04:05:06.000Z')
    expect(requestKey(later)).to.equal(requestKey(today))
    expect(stableRequest(today).messages[1]!.content).to.equal('run R-#1 (child of R-#2) read S-#1 of F-#1, evidence E-#1, at <time>')
  })

  it('a date or time a person wrote is content: two requirements with other deadlines are two requests', () => {
    for (const [a, b] of [
      ['ship by 2026-12-01', 'ship by 2027-03-01'],
      ['the outage began 2026-11-24T22:08:08Z', 'the outage began 2026-11-25T01:00:00Z'],
      ['meet at 2026-11-24 10:00:00+02:00', 'meet at 2026-11-24 18:30:00+02:00'],
    ]) {
      expect(requestKey(ask(a!)), `${a} / ${b}`).to.not.equal(requestKey(ask(b!)))
    }
    // Only the form pipe writes (toISOString: milliseconds and Z) is masked.
    expect(stableRequest(ask('created 2026-11-24T22:08:08.123Z, due 2026-12-01T00:00:00Z')).messages[1]!.content).to.equal(
      'created <time>, due 2026-12-01T00:00:00Z',
    )
  })

  it('which mentions name the same id still counts: one id twice is not two ids', () => {
    expect(requestKey(ask('R-20261124-0001 then R-20261124-0001'))).to.not.equal(requestKey(ask('R-20261124-0001 then R-20261124-0002')))
    // Aliases run across the whole conversation, not per message.
    const two = (a: string, b: string): ChatRequest => ({
      model: 'm',
      messages: [
        {role: 'user', content: a},
        {role: 'user', content: b},
      ],
    })
    expect(requestKey(two('R-20261124-0001', 'R-20261124-0001'))).to.not.equal(requestKey(two('R-20261124-0001', 'R-20261124-0002')))
  })

  it('other text still counts, and a key is the hash of the redacted, stable request', () => {
    expect(requestKey(ask('R-20261124-0001 failed'))).to.not.equal(requestKey(ask('R-20261124-0001 passed')))
    expect(requestKey(ask('plain'))).to.equal(hashJson(normaliseRequest(ask('plain'))))
  })

  it('reads a pipe-cassette/1 file by its old keys and writes it back as /2 under the new ones', () => {
    const request: ChatRequest = {model: 'm', messages: [{role: 'user', content: 'summarise R-20261122-0002'}]}
    const v1 = [
      '{"type":"header","format":"pipe-cassette/1"}',
      JSON.stringify({
        type: 'interaction',
        key: hashJson(normaliseRequest(request)),
        step: 's',
        request,
        reply: {model: 'm', message: {role: 'assistant', content: 'ok'}, finish_reason: 'stop'},
      }),
    ].join('\n')
    const parsed = parseCassette(v1, 'old.jsonl')
    expect([...parsed.interactions.keys()]).to.deep.equal([requestKey({...request, messages: [{role: 'user', content: 'summarise R-20310101-0009'}]})])
    const out = serialiseCassette(parsed)
    expect(out.split('\n')[0]).to.equal('{"format":"pipe-cassette/3","type":"header"}')
    expect(serialiseCassette(parseCassette(out, 'new.jsonl'))).to.equal(out)
    // An edited /1 line is still caught by its own key.
    expect(() => parseCassette(v1.replace('R-20261122-0002', 'R-20261122-0003'), 'old.jsonl')).to.throw(/old\.jsonl:2: the key .* is not the hash/)
  })

  it("reads a pipe-cassette/2 file (every ISO time masked in its keys) and writes it back as /3, where a person's dates count", () => {
    const request: ChatRequest = {model: 'm', messages: [{role: 'user', content: 'ship by 2026-12-01T00:00:00Z'}]}
    const v2 = [
      '{"type":"header","format":"pipe-cassette/2"}',
      JSON.stringify({
        type: 'interaction',
        key: requestKeyV2(request),
        step: 's',
        request,
        reply: {model: 'm', message: {role: 'assistant', content: 'ok'}, finish_reason: 'stop'},
      }),
    ].join('\n')
    expect(requestKeyV2(request), 'the /2 key masked the deadline').to.not.equal(requestKey(request))
    const parsed = parseCassette(v2, 'v2.jsonl')
    expect([...parsed.interactions.keys()]).to.deep.equal([requestKey(request)])
    const out = serialiseCassette(parsed)
    expect(out.split('\n')[0]).to.equal('{"format":"pipe-cassette/3","type":"header"}')
    expect(serialiseCassette(parseCassette(out, 'v3.jsonl'))).to.equal(out)
    // Another deadline is another request under /3: the recording does not answer it.
    expect(parsed.interactions.has(requestKey({...request, messages: [{role: 'user', content: 'ship by 2027-03-01T00:00:00Z'}]}))).to.equal(false)
    expect(() => parseCassette(v2.replace('ship by', 'ship on'), 'v2.jsonl')).to.throw(/v2\.jsonl:2: the key .* is not the hash/)
  })
})

describe('the cassette reader and writer', () => {
  const interaction = (step: string, content: string): string => {
    const request: ChatRequest = {model: 'm', messages: [{role: 'user', content}]}
    return JSON.stringify({
      type: 'interaction',
      key: requestKey(request),
      step,
      request,
      reply: {model: 'm', message: {role: 'assistant', content: 'ok'}, finish_reason: 'stop'},
    })
  }

  it('reads a header and interactions, and writes them back canonically: header first, by step and key, keys sorted', () => {
    const text = ['{"format":"pipe-cassette/3","type":"header","note":"n"}', interaction('b', 'two'), interaction('a', 'one')].join('\n')
    const parsed = parseCassette(text, 'c.jsonl')
    expect(parsed.note).to.equal('n')
    expect(parsed.interactions.size).to.equal(2)
    const out = serialiseCassette(parsed)
    const lines = out.trimEnd().split('\n')
    expect(lines[0]).to.equal('{"format":"pipe-cassette/3","note":"n","type":"header"}')
    expect(lines.slice(1).map((l) => (JSON.parse(l) as {step: string}).step)).to.deep.equal(['a', 'b'])
    expect(lines[1]!.startsWith('{"key":"sha256:')).to.equal(true)
    expect(serialiseCassette(parseCassette(out, 'c.jsonl'))).to.equal(out)
  })

  it('names the line of each problem', () => {
    const header = '{"type":"header","format":"pipe-cassette/3"}'
    const cases: Array<[string, RegExp]> = [
      ['', /c\.jsonl:1: the cassette is empty/],
      ['not json', /c\.jsonl:1: not a JSON line/],
      ['{"type":"interaction"}', /c\.jsonl:1: the first line is not a cassette header/],
      ['{"type":"header","format":"pipe-cassette/4"}', /c\.jsonl:1: cassette format pipe-cassette\/4/],
      ['{"type":"header","format":"pipe-cassette/3","extra":1}', /c\.jsonl:1: does not match the cassette schema/],
      [`${header}\n${interaction('a', 'one')}\n${header}`, /c\.jsonl:3: a second header line/],
      [`${header}\n${interaction('a', 'one')}\n{"type":"interaction","key":"x"`, /c\.jsonl:3: not a JSON line/],
      [`${header}\n${interaction('a', 'one').replace('"one"', '"edited"')}`, /c\.jsonl:2: the key .* is not the hash of the line's request/],
    ]
    for (const [text, pattern] of cases) {
      let error: unknown
      try {
        parseCassette(text, 'c.jsonl')
      } catch (e) {
        error = e
      }
      expect(error, text).to.be.instanceOf(PipeError)
      expect((error as PipeError).code).to.equal('E_CONFIG')
      expect((error as PipeError).message, text).to.match(pattern)
    }
  })
})

describe('the reply transport', () => {
  it('records each request once, answers a repeat from the recording, and loses nothing when many ask at once', async () => {
    const file = path.join(dir, 'c.jsonl')
    const live = new Echo()
    const log = new ReplyLog()
    const cassette = await Cassette.open({file, mode: 'record'})
    const transport = new ReplyTransport({live, cassette, log})
    const ask = (content: string, step: string, run: string): Promise<ChatReply> =>
      transport.complete({...base, messages: [{role: 'user', content}]}, call(step, run))
    // 20 different requests from concurrent child runs, and the same request from two steps at once.
    const replies = await Promise.all([
      ...Array.from({length: 20}, (_, i) => ask(`item ${i}`, 'check', `R-20260101-${String(i + 10).padStart(4, '0')}`)),
      ask('same', 'zeta', 'R-20260101-0001'),
      ask('same', 'alpha', 'R-20260101-0002'),
    ])
    expect(live.count, 'identical requests in flight share one live call').to.equal(21)
    expect(replies[20]!.message.content).to.equal(replies[21]!.message.content)
    const parsed = parseCassette(await readFile(file, 'utf8'), file)
    expect(parsed.interactions.size).to.equal(21)
    expect([...parsed.interactions.values()].find((i) => i.request.messages[0]!.content === 'same')!.step, 'the first step by name').to.equal('alpha')
    expect(log.take('R-20260101-0001', 'zeta')).to.deep.equal([{key: requestKey({...base, messages: [{role: 'user', content: 'same'}]}), source: 'live'}])
    expect(log.take('R-20260101-0002', 'alpha')[0]!.source).to.equal('cassette')
    expect(log.take('R-20260101-0002', 'alpha'), 'taken once').to.deep.equal([])

    // Asked again later in the same session: the recorded reply, no live call.
    const again = await ask('item 3', 'check', 'R-20260101-0099')
    expect(again.source).to.equal('cassette')
    expect(live.count).to.equal(21)
  })

  it('two sessions recording one file at once keep both sets; a fresh recording drops what the old file held', async () => {
    const file = path.join(dir, 'c.jsonl')
    const request = (content: string): ChatRequest => ({...base, messages: [{role: 'user', content}]})
    const old = await Cassette.open({file, mode: 'record'})
    await new ReplyTransport({live: new Echo(), cassette: old, log: new ReplyLog()}).complete(request('stale'), call())
    const a = new ReplyTransport({live: new Echo(), cassette: await Cassette.open({file, mode: 'record'}), log: new ReplyLog()})
    const b = new ReplyTransport({live: new Echo(), cassette: await Cassette.open({file, mode: 'record'}), log: new ReplyLog()})
    await Promise.all([
      ...['a1', 'a2', 'a3'].map((c) => a.complete(request(c), call('a'))),
      ...['b1', 'b2', 'b3'].map((c) => b.complete(request(c), call('b'))),
    ])
    const contents = [...parseCassette(await readFile(file, 'utf8'), file).interactions.values()].map((i) => i.request.messages[0]!.content).sort()
    expect(contents).to.deep.equal(['a1', 'a2', 'a3', 'b1', 'b2', 'b3'])
  })

  it('replaying: answers from the file with no endpoint; a missing request names the step and shows the changed line', async () => {
    const file = path.join(dir, 'c.jsonl')
    const recorder = new ReplyTransport({live: new Echo(), cassette: await Cassette.open({file, mode: 'record'}), log: new ReplyLog()})
    const prompt = (word: string): ChatRequest => ({
      ...base,
      messages: [
        {role: 'system', content: 'You answer.'},
        {role: 'user', content: `line one\n${word}\nline three`},
      ],
    })
    const recorded = await recorder.complete(prompt('alpha'), call())
    const replay = new ReplyTransport({live: null, cassette: await Cassette.open({file, mode: 'replay', missing: 'error'}), log: new ReplyLog()})
    const replayed = await replay.complete(prompt('alpha'), call())
    expect(replayed.message).to.deep.equal(recorded.message)
    expect(replayed.source).to.equal('cassette')
    let error: PipeError | undefined
    try {
      await replay.complete({...prompt('beta'), temperature: 0.7}, call())
    } catch (e) {
      error = e as PipeError
    }
    expect(error?.code).to.equal('E_MODEL')
    expect(error?.retryable).to.equal(false)
    expect(error?.message).to.contain('step draft').and.contain('-alpha').and.contain('+beta').and.contain('temperature: recorded 0, now 0.7')
    let other: PipeError | undefined
    try {
      await replay.complete(prompt('x'), call('summary'))
    } catch (e) {
      other = e as PipeError
    }
    expect(other?.message).to.contain('no recording for step summary at all').and.contain('steps draft')
  })

  it('never records a cassette past the 64 MiB it may hold (it could not be replayed): the reply that would pass it fails with E_CONFIG, the file stays as it was', async () => {
    expect(MAX_CASSETTE_BYTES, 'the limit').to.equal(64 * 1024 * 1024)
    // The same at a thousandth of the scale (the limit is the cassette's seam): ten rewrites of up to
    // 64 MiB each, every line parsed, hashed and redacted, were half of test/unit's CPU.
    // (test/e2e/reply-limit.test.ts reads a cassette past the real 64 MiB.)
    const maxBytes = MAX_CASSETTE_BYTES / 1024
    const file = path.join(dir, 'c.jsonl')
    // Replies of 6/64 of the limit (at 64 MiB, replies of 6 MiB, as an endpoint may send: the limit on
    // one is 8 MiB; the lines' own bytes, nothing at that scale, are a tenth of them at this one): the
    // tenth passes it.
    const big = 'x'.repeat((6 * maxBytes) / 64)
    const live: ChatTransport = {
      endpointHost: '127.0.0.1:1',
      complete: async () => ({model: 'big', message: {role: 'assistant', content: big}, finish_reason: 'stop'}),
    }
    const transport = new ReplyTransport({live, cassette: await Cassette.open({file, mode: 'record', maxBytes}), log: new ReplyLog()})
    const ask = (i: number): Promise<ChatReply> => transport.complete({...base, messages: [{role: 'user', content: `item ${i}`}]}, call())
    for (let i = 0; i < 9; i++) await ask(i)
    const before = await readFile(file, 'utf8')
    expect(Buffer.byteLength(before)).to.be.below(maxBytes)
    const error = await ask(9).then(
      () => null,
      (e: unknown) => e as PipeError,
    )
    expect(error?.code).to.equal('E_CONFIG')
    expect(error?.message).to.contain('more than the 0.0625 MiB a cassette may hold')
    expect(await readFile(file, 'utf8'), 'the cassette as it was').to.equal(before)
    // What was recorded replays.
    const replay = await Cassette.open({file, mode: 'replay', missing: 'error', maxBytes})
    expect(replay.steps()).to.deep.equal(['draft'])
  })

  it('the reply cache keeps live replies and answers from them only with reuse; an edited request is an integrity error', async () => {
    const cache = new ReplyCache(dir)
    const live = new Echo()
    const log = new ReplyLog()
    await new ReplyTransport({live, cache: {store: cache, reuse: false}, log}).complete(base, call())
    await new ReplyTransport({live, cache: {store: cache, reuse: false}, log}).complete(base, call())
    expect(live.count).to.equal(2)
    const hit = await new ReplyTransport({live, cache: {store: cache, reuse: true}, log}).complete(base, call())
    expect(live.count).to.equal(2)
    expect(hit.source).to.equal('cache')
    const file = cache.fileOf(requestKey(base))
    const record = JSON.parse(await readFile(file, 'utf8')) as {request: ChatRequest; seal: string}
    record.request.model = 'other'
    // Re-sealed by someone without an audit key: the seal holds, the name does not.
    const {sealRecord} = await import('../../src/store/trail/integrity.js')
    const {seal: _s, ...body} = record
    await writeFile(file, JSON.stringify(sealRecord(body)))
    let error: PipeError | undefined
    try {
      await new ReplyTransport({live, cache: {store: cache, reuse: true}, log}).complete(base, call())
    } catch (e) {
      error = e as PipeError
    }
    expect(error?.code).to.equal('E_INTEGRITY')
    expect(error?.message).to.contain('holds a request whose hash is')
  })
})

describe('provider selection with a cassette', () => {
  it('auto picks openai answered by a replayed cassette alone when no endpoint is set; recording needs one', async () => {
    const file = path.join(dir, 'c.jsonl')
    await writeFile(file, '{"type":"header","format":"pipe-cassette/1"}\n')
    const replay = await Cassette.open({file, mode: 'replay'})
    const plan = planProvider('auto', undefined, {}, {cassette: replay})
    expect(plan.record).to.deep.include({kind: 'openai', endpoint_host: null})
    expect(plan.record.cassette).to.deep.include({mode: 'replay', missing: 'error'})
    expect(planProvider('auto', undefined, {}).record.kind).to.equal('offline')
    expect(() => planProvider('auto', undefined, {}, {cassette: replay, cache: 'reuse'})).to.not.throw()
    const record = await Cassette.open({file: path.join(dir, 'new.jsonl'), mode: 'record'})
    expect(() => planProvider('auto', undefined, {}, {cassette: record})).to.throw(PipeError, /needs an endpoint to record from/)
    expect(() => planProvider('offline', undefined, {}, {cassette: replay})).to.throw(PipeError, /offline rules provider/)
    const live = planProvider('auto', undefined, {OPENAI_BASE_URL: 'http://127.0.0.1:9/v1'}, {cassette: replay})
    expect(live.record.endpoint_host, 'a replay that never asks the endpoint does not name it').to.equal(null)
  })
})
