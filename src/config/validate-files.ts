/** Validates files of any pipe format, telling the format from the $schema line or the file name. */
import {open, stat} from 'node:fs/promises'
import path from 'node:path'
import type {Diagnostic} from './diagnostics.js'
import {validateDocument} from './document.js'
import {loadPipeline, type KindCatalog} from './pipeline.js'
import {loadPolicyFile} from './policy.js'

export type FileKind = 'pipeline' | 'policy' | 'answers'

export interface FileReport {
  file: string
  kind: FileKind
  valid: boolean
  diagnostics: Diagnostic[]
}

export interface ValidateResult {
  valid: boolean
  error_count: number
  files: FileReport[]
}

async function readHead(file: string, bytes: number): Promise<string> {
  const handle = await open(file, 'r')
  try {
    const {buffer, bytesRead} = await handle.read(Buffer.alloc(bytes), 0, bytes, 0)
    return buffer.subarray(0, bytesRead).toString('utf8')
  } finally {
    await handle.close()
  }
}

export async function detectKind(file: string): Promise<FileKind> {
  // Only a regular file is peeked at: a FIFO would lose what is read, a device would never end.
  const regular = await stat(file).then((info) => info.isFile(), () => false)
  const head = regular ? await readHead(file, 2000).catch(() => '') : ''
  const schemaLine = /#\s*yaml-language-server:\s*\$schema=(\S+)/.exec(head)?.[1] ?? ''
  for (const kind of ['policy', 'answers', 'pipeline'] as const) if (schemaLine.includes(`${kind}.schema.json`)) return kind
  const base = path.basename(file).toLowerCase()
  if (/^policy.*\.ya?ml$/.test(base)) return 'policy'
  if (/answers.*\.ya?ml$/.test(base)) return 'answers'
  return 'pipeline'
}

export async function validateFile(file: string, catalog: KindCatalog): Promise<FileReport> {
  const kind = await detectKind(file)
  let diagnostics: Diagnostic[] = []
  if (kind === 'pipeline') {
    const result = await loadPipeline(file, catalog)
    if (!result.ok) diagnostics = result.diagnostics
  } else if (kind === 'policy') {
    const result = await loadPolicyFile(file)
    if (!result.ok) diagnostics = result.diagnostics
  } else {
    const result = await validateDocument(file, 'answers', 'answers file')
    if (!result.ok) diagnostics = result.diagnostics
  }
  return {file, kind, valid: diagnostics.length === 0, diagnostics}
}

export async function validateFiles(files: string[], catalog: KindCatalog): Promise<ValidateResult> {
  const reports: FileReport[] = []
  for (const file of files) reports.push(await validateFile(file, catalog))
  const errorCount = reports.reduce((n, r) => n + r.diagnostics.length, 0)
  return {valid: errorCount === 0, error_count: errorCount, files: reports}
}
