/**
 * A detached run's trace on a real PostgreSQL store, sent to a real OTLP receiver on 127.0.0.1: pipe
 * run --detach sends its enqueue (the span the run keeps as its trace's root), and the worker that
 * drives it, in another process, sends the time the run was queued and its session into the same
 * trace, under the enqueue. Waits are for a worker's line, never a sleep.
 */
import {expect} from 'chai'
import path from 'node:path'
import {json, pipe, repoRoot} from '../helpers/cli.js'
import {OtlpReceiver} from '../helpers/otlp-receiver.js'
import {until, useWorkerSuite} from '../helpers/workers.js'

const fixtures = path.join(repoRoot, 'test', 'fixtures', 'postgres')

describe('traces of a detached run (PostgreSQL store, a worker, a real OTLP receiver)', function () {
  this.timeout(120000)
  let dir: string
  let url: string
  let receiver: OtlpReceiver | undefined
  const team = useWorkerSuite('pipe-otel-queue-', (suite) => ({dir, url} = suite))
  afterEach(async () => {
    await receiver?.close()
    receiver = undefined
  })

  it("the enqueue, the time queued and the worker's session are one trace, rooted at the enqueue the run keeps", async () => {
    receiver = await OtlpReceiver.start()
    // A long flush bound: the default 3 s was passed by a loaded machine, dropping the spans looked for.
    const otel = {OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_EXPORTER_OTLP_TIMEOUT: '120000'}
    const detached = await pipe(
      ['run', path.join(fixtures, 'fast.yaml'), '--policy', path.join(fixtures, 'policy.yaml'), '--detach', '--store', url, '--json'],
      {
        cwd: dir,
        env: otel,
      },
    )
    expect(detached.code, detached.stderr).to.equal(0)
    const runId = json<{run_id: string}>(detached).run_id
    const enqueue = receiver.spans.find((s) => s.name === 'enqueue fast')
    expect(enqueue, 'pipe run --detach sent its enqueue').to.not.equal(undefined)
    expect(enqueue!.parentSpanId).to.equal(undefined)
    expect(enqueue!.kind, 'PRODUCER').to.equal(4)
    expect(enqueue!.attributes).to.include({'pipe.run_id': runId, 'pipe.session': 'enqueued', 'pipe.queue': 'default', 'pipe.outcome': 'queued'})
    const shown = json<{run: {trace?: {trace_id: string; span_id: string}}}>(await pipe(['runs', 'show', runId, '--json', '--store', url], {cwd: dir}))
    expect(shown.run.trace, 'the run keeps its enqueue as its trace').to.deep.equal({trace_id: enqueue!.traceId, span_id: enqueue!.spanId})

    const worker = team.start(url, [], {cwd: dir, env: otel})
    // Logged once the run's session has ended, its spans sent.
    await until('the worker drove the run', async () => worker.stderr().includes(`pipe worker: ${runId} succeeded`))
    const spans = receiver.spans
    expect(new Set(spans.map((s) => s.traceId)), 'one trace').to.deep.equal(new Set([enqueue!.traceId]))
    const queued = spans.find((s) => s.name === 'queued')
    expect(queued, 'the time on the queue is a span').to.not.equal(undefined)
    expect(queued!.parentSpanId).to.equal(enqueue!.spanId)
    expect(queued!.attributes).to.include({'pipe.wait': 'queue'})
    expect(queued!.start).to.be.at.most(enqueue!.end)
    const session = spans.find((s) => s.name === 'invoke_workflow fast')
    expect(session!.parentSpanId, "the worker's session is under the enqueue").to.equal(enqueue!.spanId)
    expect(session!.attributes).to.include({'pipe.run_id': runId, 'pipe.outcome': 'succeeded'})
    expect(queued!.end).to.be.at.least(queued!.start)
    expect(queued!.end).to.be.at.most(session!.end)
  })
})
