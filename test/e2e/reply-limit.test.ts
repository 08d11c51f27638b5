/**
 * A model reply read over HTTP has a ceiling (8 MiB): an endpoint that sends without end fails the
 * step with E_MODEL, and pipe closes the connection. A cassette file has one too (64 MiB).
 */
import {expect} from 'chai'
import {createServer, type Server, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'
import {open, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {sendWithoutEnd} from '../helpers/endless.js'

const prd = path.join(examples, 'full-prd.md')

/** A chat-completions endpoint that answers every request with a body that never ends, until the client goes. */
class EndlessServer {
  /** Bytes written to each response before its client closed the connection. */
  readonly written: number[] = []
  private readonly closed: Array<() => void> = []
  private server!: Server
  url = ''

  constructor(
    private readonly headers: Record<string, string>,
    private readonly status = 200,
  ) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      req.resume()
      req.on('end', () => this.pump(res))
    })
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve))
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`
    return this
  }

  private pump(res: ServerResponse): void {
    sendWithoutEnd(res, {
      status: this.status,
      headers: this.headers,
      head: '{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"',
      closed: (bytes) => {
        this.written.push(bytes)
        for (const resolve of this.closed.splice(0)) resolve()
      },
    })
  }

  /** Resolves once a response's connection has closed (or at once if one already has). */
  clientGone(): Promise<void> {
    if (this.written.length > 0) return Promise.resolve()
    return new Promise((resolve) => this.closed.push(resolve))
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

let dir: string
let cleanup: () => Promise<void>
let server: EndlessServer | undefined

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-limit-'))
})
afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup()
})

describe('the size limit on a model reply (a real HTTP server on 127.0.0.1 that never stops sending)', function () {
  this.timeout(120000)

  for (const [what, headers] of [
    ['a chunked body without end', {}],
    ['a body whose Content-Length is 1 GiB', {'content-length': String(1024 * 1024 * 1024)}],
  ] as const) {
    it(`fails the step with E_MODEL naming the 8 MiB limit, and closes the connection, on ${what}`, async () => {
      server = await new EndlessServer(headers).start()
      const result = await pipe(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--provider', 'openai'], {
        cwd: dir,
        env: {OPENAI_BASE_URL: server.url, OPENAI_API_KEY: 'sk-test-limit-000000000000', PIPE_HOME: path.join(dir, 'home')},
        timeoutMs: 100000,
      })
      expect(result.signal, result.stderr).to.equal(null)
      expect(result.code, result.stderr).to.equal(1)
      expect(result.stderr).to.contain('Error [E_MODEL]: the model endpoint 127.0.0.1:')
      expect(result.stderr).to.contain('sent a reply larger than 8 MiB')
      expect(result.stderr).to.match(/Try this: .*provider\.max_tokens.*8 MiB a reply/)
      expect(result.stdout).to.match(/run R-\S+ +failed/)
      await server.clientGone()
      expect(server.written.length).to.be.greaterThan(0)

      // The failure is recorded as the step's error, with the limit, and is not retried (the same endpoint would send the same).
      const runId = /run (R-\S+)/.exec(result.stdout)![1]!
      const snapshots = json<
        Array<{step: {name: string; attempts?: number}; errors: Array<{code: string; message: string; details?: {limit_bytes?: number}}>}>
      >(await pipe(['snapshot', 'show', runId, '--json'], {cwd: dir}))
      const compile = snapshots.find((s) => s.step.name === 'compile')!
      expect(compile.errors[0]).to.include({code: 'E_MODEL'})
      expect(compile.errors[0]!.details?.limit_bytes).to.equal(8 * 1024 * 1024)
      expect(compile.step.attempts ?? 1).to.equal(1)
    })
  }

  it('refuses a cassette file larger than 64 MiB without reading it', async () => {
    const cassette = path.join(dir, 'huge.jsonl')
    await writeFile(cassette, '')
    // A sparse file: its size is past the limit, without the disk space.
    const handle = await open(cassette, 'r+')
    await handle.truncate(64 * 1024 * 1024 + 1)
    await handle.close()
    const result = await pipe(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--replay', cassette], {
      cwd: dir,
      env: {PIPE_HOME: path.join(dir, 'home')},
    })
    expect(result.code, result.stderr).to.not.equal(0)
    expect(result.stderr).to.contain('Error [E_CONFIG]: the cassette')
    expect(result.stderr).to.contain('more than the 64 MiB a cassette may hold')
    expect(result.stderr).to.contain('Try this:')
  })
})
