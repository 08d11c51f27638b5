/** A real HTTP server on 127.0.0.1 that receives webhooks, answering from a script, and counts deliveries. */
import {createServer, type IncomingHttpHeaders, type Server, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'
import {sendWithoutEnd} from './endless.js'

export interface Received {
  path: string
  headers: IncomingHttpHeaders
  body: Record<string, unknown>
}

export interface Reply {
  status?: number
  body?: unknown
  /** Answer with the request's headers as the client sent them (names in their case): `{"headers": {...}}`. */
  echoHeaders?: boolean
  delayMs?: number
  /** Answer once this settles: the test says when, instead of a delay. */
  until?: Promise<unknown>
  /** Never answer: the client's timeout decides (the connection is closed with the server). */
  hang?: boolean
  /** Read the whole request, then break the connection without answering: it may have acted, no one can tell. */
  drop?: boolean
  /**
   * Answer 200 with a body that never ends: written while the socket takes it, until the client
   * closes the connection or `endless` bytes are written (then it holds, still unended, so that a
   * client that reads without a limit waits for its timeout instead of filling the machine's memory).
   */
  endless?: number
}

export class WebhookServer {
  readonly received: Received[] = []
  /** Every request as it arrived, answered or not: what the target may have acted on. */
  readonly arrived: Received[] = []
  /** Bytes of each endless answer written before its connection closed. */
  readonly endlessWritten: number[] = []
  private readonly replies: Reply[] = []
  private readonly endlessDone: Array<() => void> = []
  private readonly arrivals: Array<{count: number; resolve: () => void}> = []

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<WebhookServer> {
    const holder: {self?: WebhookServer} = {}
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const self = holder.self!
        const reply = self.replies.shift() ?? {}
        self.arrived.push({path: req.url ?? '', headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>})
        for (const waiter of self.arrivals.filter((w) => self.arrived.length >= w.count)) {
          self.arrivals.splice(self.arrivals.indexOf(waiter), 1)
          waiter.resolve()
        }
        if (reply.hang) return
        if (reply.drop) return void req.socket.destroy()
        if (reply.endless !== undefined) return self.pump(res, reply.endless)
        const answer = (): void => {
          const status = reply.status ?? 200
          // Only requests answered with success count as delivered.
          if (status >= 200 && status < 300)
            self.received.push({path: req.url ?? '', headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>})
          res.writeHead(status, {'content-type': 'application/json'})
          const headers: Record<string, string> = {}
          for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers[req.rawHeaders[i]!] = req.rawHeaders[i + 1]!
          res.end(JSON.stringify(reply.echoHeaders ? {headers} : (reply.body ?? {ok: true})))
        }
        if (reply.until) void reply.until.then(answer, answer)
        else if (reply.delayMs) setTimeout(answer, reply.delayMs)
        else answer()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const {port} = server.address() as AddressInfo
    holder.self = new WebhookServer(server, `http://127.0.0.1:${port}`)
    return holder.self
  }

  private pump(res: ServerResponse, budget: number): void {
    sendWithoutEnd(res, {
      head: '{"id":"',
      budget,
      closed: (bytes) => {
        this.endlessWritten.push(bytes)
        for (const resolve of this.endlessDone.splice(0)) resolve()
      },
    })
  }

  /** Resolves once an endless answer's connection has closed. */
  endlessClosed(): Promise<void> {
    if (this.endlessWritten.length > 0) return Promise.resolve()
    return new Promise((resolve) => this.endlessDone.push(resolve))
  }

  /** Resolves once `count` requests have arrived, answered or not. */
  arrival(count: number): Promise<void> {
    if (this.arrived.length >= count) return Promise.resolve()
    return new Promise((resolve) => this.arrivals.push({count, resolve}))
  }

  reply(...replies: Reply[]): this {
    this.replies.push(...replies)
    return this
  }

  requests(path?: string): Received[] {
    return this.arrived.filter((r) => path === undefined || r.path === path)
  }

  deliveries(path?: string): Received[] {
    return this.received.filter((r) => path === undefined || r.path === path)
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
