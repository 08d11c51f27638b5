/**
 * `pipe lsp`: a language server for pipeline files over one stream pair (an editor starts it with
 * --stdio). It checks each open document's unsaved text as `pipe validate` checks a file
 * (check.ts), after every change, and completes and explains (complete.ts). vscode-languageserver
 * is imported here, when the command runs: no other command loads it.
 */
import {fileURLToPath} from 'node:url'
import type {KindCatalog} from '../../config/kind-contract.js'
import {redact} from '../../util/redact.js'
import {checkBuffer, type BufferProblem} from './check.js'
import {completionsAt, hoverAt, type Offer} from './complete.js'
import {guardFrames, MAX_MESSAGE_BYTES} from './frames.js'

export interface LanguageServerStreams {
  input: NodeJS.ReadableStream
  /** Writes the framed messages (header and body) to the editor. */
  write(text: string): void
}

/** Serves until the editor says exit (or closes the input); the connection ends the process then. */
export async function serveLanguage(streams: LanguageServerStreams, catalog: KindCatalog): Promise<void> {
  const lsp = await import('vscode-languageserver/node')
  const {TextDocument} = await import('vscode-languageserver-textdocument')

  /**
   * Each message is redacted whole before it is framed: a redaction of the written bytes (what
   * every pipe output passes) would change a body's length under its Content-Length.
   */
  class RedactingWriter extends lsp.AbstractMessageWriter {
    write(message: unknown): Promise<void> {
      try {
        const body = redact(JSON.stringify(message))
        streams.write(`Content-Length: ${Buffer.byteLength(body, 'utf8')}\r\n\r\n${body}`)
        return Promise.resolve()
      } catch (error) {
        this.fireError(error, message as never, undefined)
        return Promise.reject(error instanceof Error ? error : new Error(String(error)))
      }
    }
    end(): void {}
  }

  const frames = guardFrames(streams.input)
  const reader = new lsp.StreamMessageReader(frames.stream)
  const connection = lsp.createConnection(reader, new RedactingWriter() as never)
  const documents = new lsp.TextDocuments(TextDocument)
  const toLsp = {
    step: lsp.CompletionItemKind.Reference,
    kind: lsp.CompletionItemKind.Class,
    field: lsp.CompletionItemKind.Field,
    input: lsp.CompletionItemKind.Variable,
    root: lsp.CompletionItemKind.Module,
  }

  connection.onInitialize(() => ({
    capabilities: {
      textDocumentSync: lsp.TextDocumentSyncKind.Incremental,
      completionProvider: {triggerCharacters: ['.', ' ', ':']},
      hoverProvider: true,
    },
    serverInfo: {name: 'pipe'},
  }))

  /** The newest check of each document wins: a slow check of an older text publishes nothing. */
  const pending = new Map<string, number>()
  const check = async (uri: string): Promise<void> => {
    const document = documents.get(uri)
    if (!document) return
    const version = document.version
    pending.set(uri, version)
    let problems: BufferProblem[]
    try {
      problems = await checkBuffer(fileOf(uri), document.getText(), catalog)
    } catch (error) {
      // A bug in a check is said in the editor, at the top of the file; the server goes on.
      const zero = {line: 0, character: 0}
      problems = [
        {
          range: {start: zero, end: zero},
          message: `pipe could not check this file: ${error instanceof Error ? error.message : String(error)}`,
          severity: 'error',
          code: 'internal',
        },
      ]
    }
    if (pending.get(uri) !== version) return
    await connection.sendDiagnostics({
      uri,
      version,
      diagnostics: problems.map((p) => ({
        range: p.range,
        message: p.message,
        severity: p.severity === 'warning' ? lsp.DiagnosticSeverity.Warning : lsp.DiagnosticSeverity.Error,
        source: 'pipe',
        code: p.code,
      })),
    })
  }
  documents.onDidOpen((event) => void check(event.document.uri))
  documents.onDidChangeContent((event) => void check(event.document.uri))
  documents.onDidClose((event) => {
    pending.delete(event.document.uri)
    void connection.sendDiagnostics({uri: event.document.uri, diagnostics: []})
  })

  connection.onCompletion((params) => {
    const document = documents.get(params.textDocument.uri)
    if (!document) return []
    const offers: Offer[] = safely(() => completionsAt(fileOf(params.textDocument.uri), document.getText(), params.position, catalog), [])
    return offers.map((o) => ({
      label: o.label,
      kind: toLsp[o.what],
      ...(o.detail ? {detail: o.detail} : {}),
      ...(o.documentation ? {documentation: {kind: lsp.MarkupKind.Markdown, value: o.documentation}} : {}),
    }))
  })
  connection.onHover((params) => {
    const document = documents.get(params.textDocument.uri)
    const text = document ? safely(() => hoverAt(fileOf(params.textDocument.uri), document.getText(), params.position, catalog), undefined) : undefined
    return text === undefined ? null : {contents: {kind: lsp.MarkupKind.Markdown, value: text}}
  })

  documents.listen(connection)
  // A message over the cap is thrown away unread: a request among it goes unanswered, so the editor is told.
  frames.onDropped((bytes) => {
    // By its method's name: the bundle's namespace of vscode-languageserver lacks the protocol's re-exported notification types.
    void connection.sendNotification('window/showMessage', {
      type: 1 /* MessageType.Error */,
      message: `pipe lsp dropped a message of ${bytes} bytes: it reads messages of up to ${MAX_MESSAGE_BYTES} bytes (64 MiB); a request in it gets no answer.`,
    })
  })
  const closed = new Promise<void>((resolve, reject) => {
    connection.onExit(() => resolve())
    // A header it cannot read loses the frames' boundaries for good: every later message would be
    // dropped unanswered and the editor left waiting. Ending says so; the editor restarts the server.
    frames.onBroken(reject)
  })
  connection.listen()
  await closed
}

/** The path of a document: a file: URI's; any other (an untitled buffer) resolves beside the working directory. */
function fileOf(uri: string): string {
  if (uri.startsWith('file:')) return fileURLToPath(uri)
  return uri.replace(/^[a-z]+:/i, '').replace(/[^\w.-]+/g, '_') || 'untitled.yaml'
}

function safely<T>(fn: () => T, fallback: T): T {
  try {
    return fn()
  } catch {
    return fallback
  }
}
