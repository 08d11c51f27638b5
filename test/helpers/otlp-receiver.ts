/**
 * A real OTLP/HTTP traces receiver on 127.0.0.1, as an OpenTelemetry Collector's is: it takes
 * POST /v1/traces in either of OTLP's encodings — JSON, or protobuf (decoded with protobufjs by the
 * OTLP messages in test/fixtures/otlp/trace.proto, not by the exporter's own code) — answers 200
 * with an empty partial success, and keeps every span with its resource, ids, times and attributes
 * decoded. It records a request before it answers, so once the exporting process has ended its
 * spans are here.
 */
import {createServer, type Server} from 'node:http'
import type {AddressInfo, Socket} from 'node:net'
import path from 'node:path'
import protobuf from 'protobufjs'
import {repoRoot} from './cli.js'

type AnyValue = {stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: {values?: AnyValue[]}}

/** A span as OTLP's JSON encoding has it (the protobuf one is turned into the same shape). */
interface WireSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  startTimeUnixNano?: string
  endTimeUnixNano?: string
  status?: {code?: number; message?: string}
  attributes?: KeyValue[]
}
type WireRequest = {resourceSpans?: Array<{resource?: {attributes?: KeyValue[]}; scopeSpans?: Array<{spans?: WireSpan[]}>}>}

let request: protobuf.Type | undefined

/** A protobuf ExportTraceServiceRequest in the shape of its JSON encoding: ids as hex, 64-bit numbers as strings. */
function fromProtobuf(bytes: Buffer): WireRequest {
  request ??= protobuf.loadSync(path.join(repoRoot, 'test', 'fixtures', 'otlp', 'trace.proto')).lookupType('otlp.ExportTraceServiceRequest')
  const object = request.toObject(request.decode(bytes), {longs: String, bytes: Buffer, defaults: false, oneofs: false}) as Record<string, unknown>
  const hex = (b: unknown): string => (b instanceof Uint8Array ? Buffer.from(b).toString('hex') : '')
  type Decoded = Record<string, unknown>
  return {
    resourceSpans: ((object.resourceSpans as Decoded[] | undefined) ?? []).map((rs) => ({
      resource: {attributes: ((rs.resource as Decoded | undefined)?.attributes as KeyValue[] | undefined) ?? []},
      scopeSpans: ((rs.scopeSpans as Decoded[] | undefined) ?? []).map((ss) => ({
        spans: ((ss.spans as Decoded[] | undefined) ?? []).map((s) => ({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name as string,
          kind: (s.kind as number | undefined) ?? 0,
          startTimeUnixNano: s.startTimeUnixNano as string,
          endTimeUnixNano: s.endTimeUnixNano as string,
          status: (s.status as WireSpan['status']) ?? {},
          attributes: (s.attributes as KeyValue[] | undefined) ?? [],
        })),
      })),
    })),
  }
}
type KeyValue = {key: string; value: AnyValue}

export type AttributeValue = string | number | boolean | AttributeValue[] | null

export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string | undefined
  name: string
  kind: number
  status: {code?: number; message?: string}
  /** When it started and ended, in ms since the epoch (to the ms). */
  start: number
  end: number
  attributes: Record<string, AttributeValue>
  resource: Record<string, AttributeValue>
  /** The encoding it came in: the request's content type. */
  encoding: 'json' | 'protobuf'
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
        const protobufBody = (req.headers['content-type'] ?? '').startsWith('application/x-protobuf')
        const raw = Buffer.concat(chunks)
        const body = protobufBody ? fromProtobuf(raw) : (JSON.parse(raw.toString('utf8')) as WireRequest)
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
                start: Number(BigInt(s.startTimeUnixNano ?? '0') / 1000000n),
                end: Number(BigInt(s.endTimeUnixNano ?? '0') / 1000000n),
                attributes: attributesOf(s.attributes),
                resource,
                encoding: protobufBody ? 'protobuf' : 'json',
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
