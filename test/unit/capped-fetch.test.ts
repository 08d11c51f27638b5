import {expect} from 'chai'
import {createServer, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import {gzipSync} from 'node:zlib'
import {cappedFetch, MAX_ERROR_BODY_BYTES} from '../../src/providers/openai/capped-fetch.js'
import {LiveTransport} from '../../src/providers/openai/transport.js'

/** A real server on 127.0.0.1: `status`, then `bytes` bytes of body ('-1': until the client goes). */
async function serve(
  status: number,
  bytes: number,
  headers: Record<string, string> = {},
  body?: Buffer,
): Promise<{url: string; server: Server; gone: Promise<void>}> {
  let markGone!: () => void
  const gone = new Promise<void>((resolve) => (markGone = resolve))
  const server = createServer((req, res) => {
    req.resume()
    res.on('close', markGone)
    res.writeHead(status, {'content-type': 'application/json', ...headers})
    if (body) return void res.end(body)
    const chunk = Buffer.alloc(16 * 1024, 'a')
    let left = bytes
    const more = (): void => {
      while (!res.destroyed && (bytes < 0 || left > 0)) {
        const part = bytes < 0 ? chunk : chunk.subarray(0, Math.min(chunk.length, left))
        left -= part.length
        if (!res.write(part)) return void res.once('drain', more)
      }
      if (!res.destroyed) res.end()
    }
    more()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server, gone}
}

describe('cappedFetch (a real HTTP server on 127.0.0.1)', () => {
  const servers: Server[] = []
  afterEach(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections()
      await new Promise((resolve) => s.close(resolve))
    }
  })

  it('passes a reply within the limit through unchanged', async () => {
    const {url, server} = await serve(200, 1000)
    servers.push(server)
    const text = await (await cappedFetch('host', 4096)(url)).text()
    expect(text).to.equal('a'.repeat(1000))
  })

  it('errors a reply past the limit with E_MODEL naming it, and closes the connection', async () => {
    const {url, server, gone} = await serve(200, -1)
    servers.push(server)
    const response = await cappedFetch('example:1', 1024 * 1024)(url)
    const error = await response.text().then(
      () => null,
      (e: unknown) => e,
    )
    expect(error).to.have.property('code', 'E_MODEL')
    expect((error as Error).message).to.contain('the model endpoint example:1 sent a reply larger than 1 MiB')
    await gone
  })

  it('counts the decoded bytes of a compressed reply', async () => {
    const {url, server} = await serve(200, 0, {'content-encoding': 'gzip'}, gzipSync(Buffer.alloc(512 * 1024, 'a')))
    servers.push(server)
    const error = await (await cappedFetch('host', 256 * 1024)(url)).text().then(
      () => null,
      (e: unknown) => e,
    )
    expect(error).to.have.property('code', 'E_MODEL')
  })

  it('says a request that gets no answer at all as the same bound: one timer decides, not the client racing it', async function () {
    this.timeout(60000)
    let markGone!: () => void
    const gone = new Promise<void>((resolve) => (markGone = resolve))
    const server = createServer((req, res) => {
      req.resume()
      res.on('close', markGone)
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const transport = new LiveTransport({baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'sk-test', timeoutMs: 300})
    const error = await transport.complete({model: 'm', messages: [{role: 'user', content: 'hi'}]}, {signal: new AbortController().signal, step: 'draft'}).then(
      () => null,
      (e: unknown) => e,
    )
    expect(error).to.have.property('code', 'E_TOOL_TIMEOUT')
    expect((error as Error).message).to.match(/the model endpoint 127\.0\.0\.1:\d+ did not finish its reply within 300 ms/)
    await gone
  })

  it('bounds the whole reply by timeout_ms, not only its headers: a body that stalls fails with E_TOOL_TIMEOUT and the connection is closed', async function () {
    // The openai client's timeout ends when the headers arrive; a body that then drips or stalls was bounded only by the step's.
    this.timeout(60000)
    let markGone!: () => void
    const gone = new Promise<void>((resolve) => (markGone = resolve))
    const server = createServer((req, res) => {
      req.resume()
      res.on('close', markGone)
      res.writeHead(200, {'content-type': 'application/json'})
      res.write('{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"')
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const transport = new LiveTransport({baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'sk-test', timeoutMs: 500})
    const error = await transport.complete({model: 'm', messages: [{role: 'user', content: 'hi'}]}, {signal: new AbortController().signal, step: 'draft'}).then(
      () => null,
      (e: unknown) => e,
    )
    expect(error).to.have.property('code', 'E_TOOL_TIMEOUT')
    expect(error).to.have.property('retryable', true)
    expect((error as Error).message).to.match(/the model endpoint 127\.0\.0\.1:\d+ did not finish its reply within 500 ms/)
    await gone
  })

  it('cuts an error reply at 64 KiB instead of failing, so its status and message still arrive', async () => {
    const {url, server, gone} = await serve(500, -1)
    servers.push(server)
    const response = await cappedFetch('host')(url)
    expect(response.status).to.equal(500)
    expect((await response.text()).length).to.equal(MAX_ERROR_BODY_BYTES)
    await gone
  })
})
