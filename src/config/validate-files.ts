/** Validates files of any pipe format, telling the format from the $schema line or the file name. */
import {closeSync, openSync, readSync} from 'node:fs'
import {stat} from '../util/fs-async.js'
import path from 'node:path'
import type {Diagnostic} from './diagnostics.js'
import {validateDocument} from './document.js'
import type {KindCatalog} from './kind-contract.js'
import type {LoadedPipeline} from './loaded.js'
import {loadPipeline} from './pipeline.js'
import {loadPolicyFile} from './policy.js'
import {loadTestFile, TEST_FILE_SUFFIX} from './test-file.js'

export type FileKind = 'pipeline' | 'policy' | 'answers' | 'test'

export interface FileReport {
  file: string
  kind: FileKind
  valid: boolean
  diagnostics: Diagnostic[]
  /** Problems that do not make the file invalid (an unrouted failure outcome, a path with no spec). */
  warnings: Diagnostic[]
}

export interface ValidateResult {
  valid: boolean
  error_count: number
  warning_count: number
  files: FileReport[]
}

/** Checks a valid pipeline against more than itself (the policy it will run under). */
export type PipelineCheck = (loaded: LoadedPipeline) => Diagnostic[]

/** The first `bytes` of a regular file, '' when it cannot be read. Synchronous: a FileHandle would load node:fs/promises (~2 ms) for 2 KB. */
function readHead(file: string, bytes: number): string {
  let fd: number | undefined
  try {
    fd = openSync(file, 'r')
    const buffer = Buffer.alloc(bytes)
    return buffer.toString('utf8', 0, readSync(fd, buffer, 0, bytes, 0))
  } catch {
    return ''
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

export async function detectKind(file: string): Promise<FileKind> {
  // Only a regular file is peeked at: a FIFO would lose what is read, a device would never end.
  const regular = await stat(file).then(
    (info) => info.isFile(),
    () => false,
  )
  return kindOf(file, regular ? readHead(file, 2000) : '')
}

/** The kind of a file whose first characters are `head`: from its $schema line, else from its name. */
export function kindOf(file: string, head: string): FileKind {
  const schemaLine = /#\s*yaml-language-server:\s*\$schema=(\S+)/.exec(head)?.[1] ?? ''
  if (schemaLine.includes('pipe-test.schema.json')) return 'test'
  for (const kind of ['policy', 'answers', 'pipeline'] as const) if (schemaLine.includes(`${kind}.schema.json`)) return kind
  const base = path.basename(file).toLowerCase()
  if (base.endsWith(TEST_FILE_SUFFIX)) return 'test'
  if (/^policy.*\.ya?ml$/.test(base)) return 'policy'
  if (/answers.*\.ya?ml$/.test(base)) return 'answers'
  return 'pipeline'
}

/** `text`, when given, is a pipeline's content instead of what is on disk (see loadPipeline). */
export async function validateFile(file: string, catalog: KindCatalog, check?: PipelineCheck, text?: string): Promise<FileReport> {
  const kind = text === undefined ? await detectKind(file) : kindOf(file, text.slice(0, 2000))
  let diagnostics: Diagnostic[] = []
  let warnings: Diagnostic[] = []
  // A file kind, not a step kind: tested as policy and answers so the step kind named pipeline is never compared here.
  if (kind === 'policy') {
    const result = await loadPolicyFile(file)
    if (!result.ok) diagnostics = result.diagnostics
  } else if (kind === 'test') {
    const result = await loadTestFile(file, catalog)
    if (!result.ok) diagnostics = result.diagnostics
  } else if (kind === 'answers') {
    const result = await validateDocument(file, 'answers', 'answers file')
    if (!result.ok) diagnostics = result.diagnostics
  } else {
    const result = await loadPipeline(file, catalog, [], text)
    if (!result.ok) diagnostics = result.diagnostics
    else {
      const checked = check?.(result.loaded) ?? []
      warnings = [...result.warnings, ...checked.filter((d) => d.severity === 'warning')]
      diagnostics = checked.filter((d) => d.severity !== 'warning')
    }
  }
  return {file, kind, valid: diagnostics.length === 0, diagnostics, warnings}
}

export async function validateFiles(files: string[], catalog: KindCatalog, check?: PipelineCheck): Promise<ValidateResult> {
  const reports: FileReport[] = []
  for (const file of files) reports.push(await validateFile(file, catalog, check))
  const errorCount = reports.reduce((n, r) => n + r.diagnostics.length, 0)
  const warningCount = reports.reduce((n, r) => n + r.warnings.length, 0)
  return {valid: errorCount === 0, error_count: errorCount, warning_count: warningCount, files: reports}
}
