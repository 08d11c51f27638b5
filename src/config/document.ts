/** Reads a YAML document and checks it against one of the schemas, collecting every error. */
import type {SchemaName} from '../schema/registry.js'
import {check, loadSchema} from '../schema/registry.js'
import {sortDiagnostics, type Diagnostic} from './diagnostics.js'
import {schemaDiagnostics} from './schema-errors.js'
import {readYamlFile, type YamlSource} from './yaml-source.js'

export type DocumentResult<T> = {ok: true; source: YamlSource; data: T} | {ok: false; diagnostics: Diagnostic[]}

export async function validateDocument<T>(file: string, schema: SchemaName, what: string): Promise<DocumentResult<T>> {
  const read = await readYamlFile(file)
  if (!read.ok) return read
  return validateSource<T>(read.source, schema, what)
}

export function validateSource<T>(source: YamlSource, schema: SchemaName, what: string): DocumentResult<T> {
  const result = check(schema, source.data)
  if (!result.valid) {
    return {ok: false, diagnostics: sortDiagnostics(schemaDiagnostics(source, result.errors, loadSchema(schema), what))}
  }
  return {ok: true, source, data: source.data as T}
}
