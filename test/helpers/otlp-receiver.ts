/**
 * A real OTLP/HTTP traces receiver on 127.0.0.1, as an OpenTelemetry Collector's is: it takes
 * POST /v1/traces in OTLP's JSON encoding, answers 200 with an empty partial success, and keeps
 * every span with its resource, ids and attributes decoded. It records a request before it
 * answers, so once the exporting process has ended its spans are here.
 */
import {createServer, type Server} from 'node:http'
import type {AddressInfo, Socket} from 'node:net'

type AnyValue = {stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: {values?: AnyValue[]}}
type KeyValue = {key: string; value: AnyValue}

export type AttributeValue = string | number | boolean | AttributeValue[] | null

export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string | undefined
  name: string
  kind: number
  status: {code?: number; message?: string}
  attributes: Record<string, AttributeValue>
  resource: Record<string, AttributeValue>
}

function valueOf(value: AnyValue): AttributeValue {
  if (value.stringValue !== undefined) return value.stringValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf)
  return null
}

const attributesOf = (list: KeyValue[] | undefined): Record<string, AttributeValue> => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]))

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = []
  /** What was posted, by path (the exporter's URL path). */
  readonly paths: string[] = []
  private readonly sockets = new Set<Socket>()

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {
    server.on('connection', (socket) => {
      this.sockets.add(socket)
      socket.on('close', () => this.sockets.delete(socket))
    })
  }

  /**
   * `answer: false`: a collector that takes the connection and never replies; `'drip'`: one that
   * answers 200 and then sends its body a byte at a time, never finishing it (until close()).
   */
  static async start(options: {answer?: boolean | 'drip'} = {}): Promise<OtlpReceiver> {
    const holder: {self?: OtlpReceiver} = {}
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        if (options.answer === false) return
        if (options.answer === 'drip') {
          res.writeHead(200, {'content-type': 'application/json', 'content-length': String(1 << 30)})
          // Faster than any bound a test sets: the exporter's idle timeout is renewed by every byte.
          const drip = setInterval(() => res.write(' '), 20)
          res.on('close', () => clearInterval(drip))
          return
        }
        const self = holder.self!
        self.paths.push(req.url ?? '')
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans?: Array<{
            resource?: {attributes?: KeyValue[]}
            scopeSpans?: Array<{
              spans?: Array<{
                traceId: string
                spanId: string
                parentSpanId?: string
                name: string
                kind: number
                status?: {code?: number; message?: string}
                attributes?: KeyValue[]
              }>
            }>
          }>
        }
        for (const rs of body.resourceSpans ?? []) {
          const resource = attributesOf(rs.resource?.attributes)
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              self.spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                name: s.name,
                kind: s.kind,
                status: s.status ?? {},
                attributes: attributesOf(s.attributes),
                resource,
              })
            }
          }
        }
        res.writeHead(200, {'content-type': 'application/json'})
        res.end('{}')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const {port} = server.address() as AddressInfo
    holder.self = new OtlpReceiver(server, `http://127.0.0.1:${port}`)
    return holder.self
  }

  /** The spans whose attribute `key` is `value`. */
  where(key: string, value: AttributeValue): ReceivedSpan[] {
    return this.spans.filter((s) => s.attributes[key] === value)
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
