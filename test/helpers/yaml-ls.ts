/**
 * Drives the real yaml-language-server (the server editors run for YAML) over stdio LSP: opens a
 * document and asks for completion at a position, as an editor does when the user types.
 */
import {spawn, spawnSync, type ChildProcessWithoutNullStreams} from 'node:child_process'
import {pathToFileURL} from 'node:url'

/** The server's command, or null when it is not installed (`npm i -g yaml-language-server`). */
export function yamlLanguageServer(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v yaml-language-server'], {encoding: 'utf8'})
  return found.status === 0 && found.stdout.trim() !== '' ? found.stdout.trim() : null
}

interface Message {
  id?: number
  method?: string
  result?: unknown
  error?: unknown
}

export class YamlLs {
  private readonly child: ChildProcessWithoutNullStreams
  private buffer = Buffer.alloc(0)
  private nextId = 0
  private readonly waiting = new Map<number, (m: Message) => void>()

  constructor(command: string) {
    this.child = spawn(command, ['--stdio'], {stdio: ['pipe', 'pipe', 'pipe']})
    this.child.stdout.on('data', (chunk: Buffer) => this.receive(chunk))
  }

  private receive(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk])
    for (;;) {
      const head = this.buffer.indexOf('\r\n\r\n')
      if (head < 0) return
      const length = Number(/Content-Length: (\d+)/i.exec(this.buffer.subarray(0, head).toString('latin1'))?.[1])
      if (this.buffer.length < head + 4 + length) return
      const message = JSON.parse(this.buffer.subarray(head + 4, head + 4 + length).toString('utf8')) as Message
      this.buffer = this.buffer.subarray(head + 4 + length)
      if (message.method === undefined && message.id !== undefined) {
        this.waiting.get(message.id)?.(message)
        this.waiting.delete(message.id)
      } else if (message.method !== undefined && message.id !== undefined) {
        // A request from the server (workspace/configuration and the like): answer with defaults.
        this.send({id: message.id, result: message.method === 'workspace/configuration' ? [{}] : null})
      }
    }
  }

  private send(message: object): void {
    const body = Buffer.from(JSON.stringify({jsonrpc: '2.0', ...message}))
    this.child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`)
    this.child.stdin.write(body)
  }

  private request(method: string, params: unknown): Promise<Message> {
    const id = ++this.nextId
    return new Promise((resolve) => {
      this.waiting.set(id, resolve)
      this.send({id, method, params})
    })
  }

  async start(): Promise<void> {
    await this.request('initialize', {
      processId: process.pid,
      rootUri: null,
      capabilities: {textDocument: {completion: {completionItem: {snippetSupport: true}}}},
    })
    this.send({method: 'initialized', params: {}})
    this.send({method: 'workspace/didChangeConfiguration', params: {settings: {yaml: {completion: true, validate: true, schemas: {}}}}})
  }

  /** The labels the server offers at `line`:`character` (0-based) of `text`, saved as `file`. */
  async completion(file: string, text: string, line: number, character: number): Promise<string[]> {
    const uri = pathToFileURL(file).href
    this.send({method: 'textDocument/didOpen', params: {textDocument: {uri, languageId: 'yaml', version: 1, text}}})
    const reply = await this.request('textDocument/completion', {textDocument: {uri}, position: {line, character}})
    const result = reply.result as {items?: Array<{label: string}>} | Array<{label: string}> | null
    const items = Array.isArray(result) ? result : (result?.items ?? [])
    return items.map((item) => item.label)
  }

  stop(): void {
    this.child.kill()
  }
}
