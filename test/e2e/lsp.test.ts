import {expect} from 'chai'
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection} from 'vscode-jsonrpc/node.js'
import {bin, pipe, repoRoot, tempDir, testHome} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-lsp-e2e-')))
afterEach(async () => cleanup())

interface Position {
  line: number
  character: number
}
interface LspDiagnostic {
  range: {start: Position; end: Position}
  message: string
  severity: number
  source: string
  code: string
}
interface Published {
  uri: string
  version?: number
  diagnostics: LspDiagnostic[]
}
interface CompletionItem {
  label: string
  detail?: string
}

/** The position just after the first `marker` in `text` (the cursor where the author typed it). */
function after(text: string, marker: string): Position {
  const index = text.indexOf(marker)
  if (index === -1) throw new Error(`no ${marker} in the buffer`)
  const before = text.slice(0, index + marker.length).split('\n')
  return {line: before.length - 1, character: before.at(-1)!.length}
}

/**
 * A real LSP client (vscode-jsonrpc) talking to `pipe lsp --stdio`, the built CLI as a process.
 * Its PATH holds node and the system's tools only: no yaml-language-server is needed.
 */
class Client {
  readonly child: ChildProcess
  readonly connection: MessageConnection
  readonly exited: Promise<number | null>
  stderr = ''
  private readonly published: Published[] = []
  private readonly waiting: Array<{match: (p: Published) => boolean; resolve: (p: Published) => void}> = []

  constructor(cwd: string) {
    this.child = spawn(process.execPath, [bin, 'lsp', '--stdio'], {
      cwd,
      env: {PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: dir, PIPE_HOME: testHome, NO_COLOR: '1'},
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.stderr += d))
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)))
    this.connection = createMessageConnection(new StreamMessageReader(this.child.stdout!), new StreamMessageWriter(this.child.stdin!))
    this.connection.onNotification('textDocument/publishDiagnostics', (p: Published) => {
      this.published.push(p)
      for (const w of [...this.waiting]) if (w.match(p)) (this.waiting.splice(this.waiting.indexOf(w), 1), w.resolve(p))
    })
    this.connection.listen()
  }

  /** The diagnostics published for `uri` at `version`: waits for them, never for a time. */
  diagnostics(uri: string, version: number): Promise<Published> {
    const match = (p: Published): boolean => p.uri === uri && p.version === version
    const seen = this.published.find(match)
    if (seen) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      this.waiting.push({match, resolve})
      void this.exited.then((code) => reject(new Error(`the server exited (${code}) before publishing version ${version}:\n${this.stderr}`)))
    })
  }

  async complete(uri: string, position: Position): Promise<string[]> {
    const items = await this.connection.sendRequest<CompletionItem[] | {items: CompletionItem[]}>('textDocument/completion', {textDocument: {uri}, position})
    return (Array.isArray(items) ? items : items.items).map((i) => i.label).sort()
  }
}

interface RawMessage {
  id?: number
  method?: string
  result?: unknown
  params?: unknown
}

/** `pipe lsp --stdio` written to byte by byte (what no well-behaved client sends), its messages read as a client reads them. */
function rawServer(): {
  child: ChildProcess & {stdin: NonNullable<ChildProcess['stdin']>}
  exited: Promise<number | null>
  readonly stderr: string
  seen: RawMessage[]
  send(data: string | Buffer): Promise<void>
  message(match: (m: RawMessage) => boolean): Promise<RawMessage>
} {
  const child = spawn(process.execPath, [bin, 'lsp', '--stdio'], {
    cwd: dir,
    env: {PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: dir, PIPE_HOME: testHome, NO_COLOR: '1'},
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const seen: RawMessage[] = []
  const waiting: Array<{match: (m: RawMessage) => boolean; resolve: (m: RawMessage) => void}> = []
  const reader = new StreamMessageReader(child.stdout)
  reader.listen((m) => {
    seen.push(m as RawMessage)
    for (const w of [...waiting]) if (w.match(m as RawMessage)) (waiting.splice(waiting.indexOf(w), 1), w.resolve(m as RawMessage))
  })
  return {
    child,
    exited,
    get stderr() {
      return stderr
    },
    seen,
    send: (data) => new Promise((resolve, reject) => child.stdin.write(data, (error) => (error ? reject(error) : resolve()))),
    message(match) {
      const found = seen.find(match)
      if (found) return Promise.resolve(found)
      return new Promise((resolve, reject) => {
        waiting.push({match, resolve})
        void exited.then((code) => reject(new Error(`the server exited (${code}) before the message:\n${stderr}\n${JSON.stringify(seen)}`)))
      })
    },
  }
}

// On disk the pipeline is valid; the editor's buffer (never saved) has one error of each stage.
const SAVED = `version: 1
name: review
steps:
  - id: diff
    kind: noop
`

const BROKEN = `version: 1
name: review
inputs:
  since: {type: string, default: HEAD~1, description: where the diff starts}
  base: {type: string, default: main}
steps:
  - id: diff
    kind: command
    run: [git, diff, "\${{ inputs.since }}"]
    timeout_minute: 5
    next: classify
    on:
      failure: dne
  - id: classify
    kind: model
    prompt: prompts/classify.md
    output_schema: schemas/triage.schema.json
    vars:
      diff: "\${{ steps.diff.outputs.stdot }}"
    next: summarise
  - id: done
    kind: end
    status: succeeded
`

/** The buffer with its errors fixed; the cursor positions of the completions are in it. */
const FIXED = BROKEN.replace('    timeout_minute: 5\n', '')
  .replace('failure: dne', 'failure: done')
  .replace('outputs.stdot', 'outputs.stdout')
  .replace('next: summarise', 'next: done')

describe('pipe lsp --stdio (the built CLI, a real LSP client)', function () {
  this.timeout(120000)

  it('publishes every error of the unsaved buffer in one pass, completes step ids, kinds and expressions, and clears the errors once they are fixed', async () => {
    const pipelines = path.join(dir, 'pipelines')
    await mkdir(path.join(pipelines, 'prompts'), {recursive: true})
    await mkdir(path.join(pipelines, 'schemas'), {recursive: true})
    await writeFile(path.join(pipelines, 'prompts', 'classify.md'), 'Classify this diff: {{diff}}\n')
    await writeFile(
      path.join(pipelines, 'schemas', 'triage.schema.json'),
      await import('node:fs/promises').then((fs) => fs.readFile(path.join(repoRoot, 'examples', 'triage', 'schemas', 'triage.schema.json'))),
    )
    const file = path.join(pipelines, 'review.yaml')
    await writeFile(file, SAVED)
    const uri = pathToFileURL(file).href
    // Started elsewhere than the document's folder: prompts/ and schemas/ resolve beside the document.
    const work = path.join(dir, 'elsewhere')
    await mkdir(work)
    const client = new Client(work)

    const init = await client.connection.sendRequest<{capabilities: {completionProvider?: unknown; hoverProvider?: boolean; textDocumentSync?: unknown}}>(
      'initialize',
      {
        processId: null,
        rootUri: pathToFileURL(dir).href,
        capabilities: {},
      },
    )
    expect(init.capabilities.completionProvider).to.be.an('object')
    expect(init.capabilities.hoverProvider).to.equal(true)
    await client.connection.sendNotification('initialized', {})

    await client.connection.sendNotification('textDocument/didOpen', {textDocument: {uri, languageId: 'yaml', version: 1, text: BROKEN}})
    const first = await client.diagnostics(uri, 1)
    const shown = first.diagnostics.map(
      (d) => `${d.range.start.line}:${d.range.start.character}-${d.range.end.line}:${d.range.end.character} ${d.code}: ${d.message}`,
    )
    expect(
      first.diagnostics.every((d) => d.source === 'pipe' && d.severity === 1),
      shown.join('\n'),
    ).to.equal(true)
    // The schema's error, the routes' and the expression's: all of them, each at its place.
    expect(
      shown.find((s) => s.includes('timeout_minute')),
      shown.join('\n'),
    ).to.match(/^9:4-9:18 schema: /)
    expect(
      shown.find((s) => s.includes('"dne"')),
      shown.join('\n'),
    ).to.match(/^12:15-12:18 /)
    expect(
      shown.find((s) => s.includes('"summarise"')),
      shown.join('\n'),
    ).to.match(/^19:10-19:19 /)
    expect(
      shown.find((s) => s.includes('stdot')),
      shown.join('\n'),
    ).to.match(/^18:/)
    // The prompt and schema beside the document were found: no missing-file error.
    expect(
      shown.filter((s) => /prompt|output_schema|does not exist|not found/.test(s)),
      shown.join('\n'),
    ).to.deep.equal([])

    await client.connection.sendNotification('textDocument/didChange', {textDocument: {uri, version: 2}, contentChanges: [{text: FIXED}]})
    expect((await client.diagnostics(uri, 2)).diagnostics).to.deep.equal([])

    // Completion at the places an author types a step id, a kind or an expression.
    const ids = ['classify', 'diff', 'done']
    expect(await client.complete(uri, after(FIXED, 'next: '))).to.deep.equal(ids)
    expect(await client.complete(uri, after(FIXED, '      failure: '))).to.deep.equal(ids)
    expect(await client.complete(uri, after(FIXED, '    kind: '))).to.include.members(['command', 'model', 'end', 'foreach', 'choice'])
    expect(await client.complete(uri, after(FIXED, '"${{ '))).to.include.members(['inputs', 'steps', 'spec', 'run', 'secrets', 'policy'])
    expect(await client.complete(uri, after(FIXED, '"${{ inputs.'))).to.deep.equal(['base', 'since'])
    expect(await client.complete(uri, after(FIXED, '"${{ steps.'))).to.deep.equal(ids)
    expect(await client.complete(uri, after(FIXED, '"${{ steps.diff.'))).to.deep.equal(['outcome', 'outputs', 'reason'])
    expect(await client.complete(uri, after(FIXED, '"${{ steps.diff.outputs.'))).to.include.members(['exit_code', 'stdout', 'stderr'])
    // Not a place for either: nothing.
    expect(await client.complete(uri, after(FIXED, 'name: rev'))).to.deep.equal([])

    // A model step's outputs as its output_schema (beside the document) types them.
    const typed = FIXED.replace('outputs.stdout }}', 'outputs.stdout }} ${{ steps.classify.outputs.value.')
    await client.connection.sendNotification('textDocument/didChange', {textDocument: {uri, version: 3}, contentChanges: [{text: typed}]})
    await client.diagnostics(uri, 3)
    expect(await client.complete(uri, after(typed, 'steps.classify.outputs.value.'))).to.deep.equal(['area', 'rationale', 'severity'])

    // Hover over a kind: its contract.
    const hover = await client.connection.sendRequest<{contents: {value: string}} | null>('textDocument/hover', {
      textDocument: {uri},
      position: after(FIXED, '    kind: com'),
    })
    expect(hover?.contents.value).to.match(/^\*\*command\*\*: /)
    expect(hover?.contents.value).to.contain('`failure`').and.contain('`stdout`')

    // Malformed YAML is a diagnostic, and the server goes on answering.
    const malformed = `${FIXED}  - id: [oops\n`
    await client.connection.sendNotification('textDocument/didChange', {textDocument: {uri, version: 4}, contentChanges: [{text: malformed}]})
    const yaml = await client.diagnostics(uri, 4)
    expect(yaml.diagnostics.length).to.be.greaterThan(0)
    expect(yaml.diagnostics[0]!.code).to.equal('yaml')
    expect(yaml.diagnostics[0]!.range.start.line).to.be.greaterThan(20)
    expect(await client.complete(uri, after(malformed, 'next: '))).to.deep.equal(ids)

    // Another YAML file the editor opens (a compose file) is not a pipeline: nothing is said about it.
    const compose = pathToFileURL(path.join(dir, 'compose.yaml')).href
    const services = 'services:\n  web:\n    image: nginx\n    next: 1\n'
    await client.connection.sendNotification('textDocument/didOpen', {textDocument: {uri: compose, languageId: 'yaml', version: 1, text: services}})
    expect((await client.diagnostics(compose, 1)).diagnostics).to.deep.equal([])
    expect(await client.complete(compose, after(services, 'next: '))).to.deep.equal([])

    await client.connection.sendRequest('shutdown')
    await client.connection.sendNotification('exit')
    expect(await client.exited, client.stderr).to.equal(0)
    client.connection.dispose()
  })

  it("a buffer past pipe validate's 5 MiB limit gets validate's error, not a clean bill", async () => {
    const client = new Client(dir)
    await client.connection.sendRequest('initialize', {processId: null, rootUri: pathToFileURL(dir).href, capabilities: {}})
    const uri = pathToFileURL(path.join(dir, 'big.yaml')).href
    const text = `${SAVED}# ${'x'.repeat(5 * 1024 * 1024)}\n`
    await client.connection.sendNotification('textDocument/didOpen', {textDocument: {uri, languageId: 'yaml', version: 1, text}})
    const published = await client.diagnostics(uri, 1)
    expect(published.diagnostics.map((d) => `${d.code}: ${d.message}`)).to.deep.equal([
      `file: file is ${Buffer.byteLength(text)} bytes; the limit is 5242880 bytes`,
    ])
    await client.connection.sendRequest('shutdown')
    await client.connection.sendNotification('exit')
    expect(await client.exited, client.stderr).to.equal(0)
    client.connection.dispose()
  })

  it('a header it cannot frame ends it with E_INVALID_ARGS: it does not sit deaf to every later message', async () => {
    const child = spawn(process.execPath, [bin, 'lsp', '--stdio'], {
      cwd: dir,
      env: {PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: dir, PIPE_HOME: testHome, NO_COLOR: '1'},
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.stdout.resume()
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    const shutdown = JSON.stringify({jsonrpc: '2.0', id: 1, method: 'shutdown'})
    child.stdin.write(`Content-Length: abc\r\n\r\n{}Content-Length: ${shutdown.length}\r\n\r\n${shutdown}`)
    expect(await exited, stderr).to.equal(2)
    expect(stderr).to.contain('E_INVALID_ARGS').and.contain('Content-Length')
  })

  it('a message over 64 MiB is thrown away as it arrives, the editor is told, and the next message is answered', async () => {
    const server = rawServer()
    const shutdown = JSON.stringify({jsonrpc: '2.0', id: 1, method: 'shutdown'})
    const huge = 64 * 1024 * 1024 + 1
    await server.send(`Content-Length: ${huge}\r\n\r\n`)
    await server.send(Buffer.alloc(huge, 0x20))
    await server.send(`Content-Length: ${shutdown.length}\r\n\r\n${shutdown}`)
    const answered = await server.message((m) => m.id === 1)
    expect(answered.result, server.stderr).to.equal(null)
    const told = server.seen.filter((m) => m.method === 'window/showMessage')
    expect(told.map((m) => (m.params as {message: string}).message)).to.deep.equal([
      `pipe lsp dropped a message of ${huge} bytes: it reads messages of up to 67108864 bytes (64 MiB); a request in it gets no answer.`,
    ])
    expect(server.seen.indexOf(told[0]!)).to.be.lessThan(server.seen.indexOf(answered))
    await server.send(`Content-Length: 33\r\n\r\n{"jsonrpc":"2.0","method":"exit"}`)
    expect(await server.exited, server.stderr).to.equal(0)
  })

  it('a Content-Length of 9999999999 is refused at its header, before any of its body is read', async () => {
    const server = rawServer()
    await server.send('Content-Length: 9999999999\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"shutdown"}')
    const told = await server.message((m) => m.method === 'window/showMessage')
    expect((told.params as {message: string}).message).to.contain('dropped a message of 9999999999 bytes')
    server.child.stdin.end()
    await server.exited
    expect(server.stderr).not.to.match(/E_INTERNAL|\n\s+at /)
  })

  it('a header that never ends is refused past 8 KiB with E_INVALID_ARGS, not buffered without bound', async () => {
    const server = rawServer()
    server.child.stdin.on('error', () => {})
    server.child.stdin.end(`Content-Type: ${'a'.repeat(100_000)}`)
    expect(await server.exited, server.stderr).to.equal(2)
    expect(server.stderr)
      .to.contain('E_INVALID_ARGS')
      .and.contain('longer than 8192 bytes')
      .and.not.match(/\n\s+at /)
  })

  it('without --stdio it says how an editor starts it (E_INVALID_ARGS)', async () => {
    const result = await pipe(['lsp'], {cwd: dir})
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('E_INVALID_ARGS').and.contain('pipe lsp --stdio')
  })
})
