/**
 * A real HTTP server on 127.0.0.1 that speaks the chat-completions API, answering each request
 * from a script (or a fallback), and recording what it was sent.
 */
import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'

export interface ModelRequest {
  path: string
  headers: IncomingMessage['headers']
  body: {
    model: string
    messages: Array<{role: string; content: string; tool_call_id?: string; tool_calls?: Array<{id: string; function: {name: string; arguments: string}}>}>
    response_format?: {type: string; json_schema?: {name: string}}
    tools?: Array<{type: string; function: {name: string; parameters: unknown}}>
  }
  kind: string
}

export interface Scripted {
  status?: number
  /** Reply content (the model's message), or a raw body for error replies. */
  content?: string
  body?: unknown
  delayMs?: number
  usage?: {prompt_tokens: number; completion_tokens: number}
  /** A reply that calls tools (arguments as an object, or as raw text for malformed ones). */
  tool_calls?: Array<{id?: string; name: string; arguments: unknown}>
  /** Never answered: the request hangs until the client goes (a process killed mid-request). */
  hang?: boolean
  /** Its connection closed with no reply, once the request was read (a kept-alive connection the server shut as the request came). */
  reset?: boolean
  /** Answered once this settles (a test lets the reply go when it has frozen the client). */
  until?: Promise<unknown>
}

/** A completion whose message calls tools. */
export function toolCompletion(calls: NonNullable<Scripted['tool_calls']>, usage = {prompt_tokens: 100, completion_tokens: 50}): unknown {
  const toolCalls = calls.map((c, i) => ({
    id: c.id ?? `call_${i + 1}`,
    type: 'function',
    function: {name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments)},
  }))
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'test-model',
    choices: [{index: 0, message: {role: 'assistant', content: null, tool_calls: toolCalls}, finish_reason: 'tool_calls', logprobs: null}],
    usage: {...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens},
  }
}

export function completion(content: string, usage = {prompt_tokens: 100, completion_tokens: 50}): unknown {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'test-model',
    choices: [{index: 0, message: {role: 'assistant', content}, finish_reason: 'stop', logprobs: null}],
    usage: {...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens},
  }
}

/** The step a request is for, from its response_format name or its system message. */
function kindOf(body: ModelRequest['body']): string {
  const named = body.response_format?.json_schema?.name
  if (named) return named
  const system = body.messages[0]?.content ?? ''
  const own = /(?:model|agent) step "([a-z][a-z0-9_]*)"/.exec(system)
  if (own) return own[1]!
  return /compile step/.test(system)
    ? 'compile'
    : /clarify step/.test(system)
      ? 'clarify_questions'
      : /apply-answers/.test(system)
        ? 'apply_answers'
        : /planning step/.test(system)
          ? 'plan_tasks'
          : 'generate_vv'
}

export class ModelServer {
  readonly requests: ModelRequest[] = []
  private readonly scripts = new Map<string, Scripted[]>()
  private readonly sockets = new Set<import('node:net').Socket>()
  private readonly waiters: Array<{count: number; resolve: () => void}> = []
  /** While set, every reply waits for it (holdReplies). */
  private held: Promise<void> | undefined

  private constructor(
    private readonly server: Server,
    readonly url: string,
    private readonly fallback: (request: ModelRequest) => Scripted,
  ) {
    server.on('connection', (socket) => {
      this.sockets.add(socket)
      socket.on('close', () => this.sockets.delete(socket))
    })
  }

  /** `port` 0 picks a free one; a port a closed server had brings an endpoint that was down back up. */
  static async start(
    fallback: (request: ModelRequest) => Scripted = () => ({status: 500, body: {error: {message: 'no script'}}}),
    port = 0,
  ): Promise<ModelServer> {
    const holder: {self?: ModelServer} = {}
    const server = createServer((req, res) => void holder.self!.handle(req, res))
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
    const {port: bound} = server.address() as AddressInfo
    holder.self = new ModelServer(server, `http://127.0.0.1:${bound}/v1`, fallback)
    return holder.self
  }

  /** Replies for the next requests of one step kind ('*' for any), in order. */
  script(kind: string, ...replies: Scripted[]): this {
    this.scripts.set(kind, [...(this.scripts.get(kind) ?? []), ...replies])
    return this
  }

  /** Resolves once `count` requests have arrived (whatever their kind). */
  waitForRequests(count: number): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve()
    return new Promise((resolve) => this.waiters.push({count, resolve}))
  }

  /**
   * Holds every reply until the returned function is called: requests that arrive meanwhile stay
   * under way at once, so a test sees which of them a client sent while the others waited.
   */
  holdReplies(): () => void {
    let release!: () => void
    this.held = new Promise<void>((resolve) => (release = resolve))
    return () => {
      this.held = undefined
      release()
    }
  }

  count(kind?: string): number {
    return this.requests.filter((r) => kind === undefined || r.kind === kind).length
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as ModelRequest['body']
    const request: ModelRequest = {path: req.url ?? '', headers: req.headers, body, kind: kindOf(body)}
    this.requests.push(request)
    for (const waiter of this.waiters.filter((w) => this.requests.length >= w.count)) {
      this.waiters.splice(this.waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
    const queue = this.scripts.get(request.kind)?.length ? this.scripts.get(request.kind)! : (this.scripts.get('*') ?? [])
    const reply = queue.shift() ?? this.fallback(request)
    if (reply.hang) return
    if (reply.reset) {
      req.socket.destroy()
      return
    }
    if (this.held) await this.held
    if (reply.until) await reply.until
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs))
    if (res.destroyed) return
    const status = reply.status ?? 200
    const payload = reply.tool_calls
      ? toolCompletion(reply.tool_calls, reply.usage)
      : reply.content !== undefined
        ? completion(reply.content, reply.usage)
        : (reply.body ?? {})
    res.writeHead(status, {'content-type': 'application/json'})
    res.end(JSON.stringify(payload))
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

/** Valid replies for every model step of the default pipeline, for the full PRD example. */
export function cannedReply(request: ModelRequest): Scripted {
  const replies: Record<string, unknown> = {
    compile: {
      title: 'Team Expense Tracker',
      goal: 'Give small teams a shared place to record expenses and see who owes whom.',
      features: [
        {title: 'Create a group and invite members by email', priority: 'P0'},
        {title: 'Add an expense shared by members', priority: 'P0'},
        {title: 'Export expenses as CSV', priority: 'P1'},
      ],
      constraints: ['Must use the existing PostgreSQL 15 database.'],
      non_functional: [{category: 'performance', text: 'Balance pages load in under 300 ms at the 95th percentile.'}],
      acceptance_criteria: [
        {
          text: 'Given a group with three members, when one adds a 30 EUR expense shared by all, then each other member owes 10 EUR.',
          given: 'a group with three members',
          when: 'one adds a 30 EUR expense shared by all',
          then: 'each other member owes 10 EUR',
        },
      ],
      open_questions: [],
      citations: [
        {spec_path: 'features[0]', excerpt: 'Users can create a group and invite members by email.'},
        {spec_path: 'constraints[0]', excerpt: 'Must use the existing PostgreSQL 15 database.'},
        {spec_path: 'goal', excerpt: 'This sentence is not in the input at all.'},
      ],
    },
    clarify_questions: {questions: [{field: 'acceptance_criteria', question: 'What must be true when it works?'}]},
    apply_answers: {goal: '', features: [], constraints: [], non_functional: [], acceptance_criteria: [{text: 'A PDF is written'}], citations: []},
    plan_tasks: {
      tasks: [
        {
          title: 'Groups and invitations',
          goal: 'Create groups and invite by email',
          type: 'create_file',
          priority: 'P0',
          feature_ids: ['FR-001'],
          acceptance_criteria: [],
          depends_on: [],
          files_touched: ['src/groups.ts'],
          static_checks: ['npm run lint'],
          unit_tests: ['npm test'],
          smoke_tests: [],
          expected_signals: ['an invitation email is sent'],
        },
        {
          title: 'Shared expenses',
          goal: 'Record shared expenses',
          type: 'create_file',
          priority: 'P0',
          feature_ids: ['FR-002'],
          acceptance_criteria: ['AC-001', 'AC-999'],
          depends_on: ['Groups and invitations'],
          files_touched: ['src/expenses.ts'],
          static_checks: [],
          unit_tests: ['npm test'],
          smoke_tests: [],
          expected_signals: ['balances update'],
        },
      ],
    },
    generate_vv: {
      vv: [
        {
          kind: 'verification',
          method: 'test',
          description: 'Test the split of a shared expense',
          acceptance_criteria: ['AC-001'],
          tasks: ['T-002'],
          requirements: ['FR-002'],
        },
      ],
    },
  }
  return {content: JSON.stringify(replies[request.kind]), usage: {prompt_tokens: 120, completion_tokens: 80}}
}
