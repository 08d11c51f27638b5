/**
 * What the language server offers where the cursor is: step ids where a route names a step
 * (`next:`, an `on:` outcome, `on_exhausted:`), step kinds after `kind:`, and inside `${{ }}` every
 * name the expression checker would accept there — the roots, step ids, a step's outputs (from its
 * kind's declared outputs, as the checker types them), input names — read from the same scope the
 * checker builds (buildScope of exprDeclarations).
 */
import path from 'node:path'
import {exprDeclarations} from '../../config/expressions.js'
import type {KindCatalog} from '../../config/kind-contract.js'
import {lookupField, resolve, type JsonSchema, type SchemaRef} from '../../expr/schema.js'
import {buildScope, type ScopeNode} from '../../expr/scope.js'
import {isRecord, readBuffer, type BufferView} from './buffer.js'
import {isPipelineText, type Position} from './check.js'

export interface Offer {
  label: string
  what: 'step' | 'kind' | 'field' | 'input' | 'root'
  detail?: string
  documentation?: string
}

/** Keys whose value is one step id. */
const ROUTE_KEY = /^\s*(?:-\s+)?(?:next|on_exhausted):\s*["']?([a-z0-9_]*)$/
const KIND_KEY = /^\s*(?:-\s+)?kind:\s*["']?([a-z0-9_-]*)$/

export function completionsAt(file: string, text: string, at: Position, catalog: KindCatalog): Offer[] {
  if (!isPipelineText(file, text)) return []
  const view = readBuffer(text)
  const before = (view.lines[at.line] ?? '').slice(0, at.character)
  const open = before.lastIndexOf('${{')
  if (open !== -1 && !before.slice(open).includes('}}')) return expressionOffers(file, view, before.slice(open + 3), catalog)
  if (KIND_KEY.test(before)) return kindOffers(catalog)
  if (ROUTE_KEY.test(before) || inOnMapping(view, at.line, before)) return stepOffers(view)
  return []
}

/** The contract of the kind named under the cursor (`kind: model`), as Markdown; undefined elsewhere. */
export function hoverAt(file: string, text: string, at: Position, catalog: KindCatalog): string | undefined {
  if (!isPipelineText(file, text)) return undefined
  const line = text.split(/\r?\n/)[at.line] ?? ''
  const match = /^(\s*(?:-\s+)?kind:\s*["']?)([a-z0-9_-]+)/.exec(line)
  if (!match || at.character < match[1]!.length || at.character > match[0].length) return undefined
  const kind = match[2]!
  return catalog[kind] ? kindContract(kind, catalog) : undefined
}

function kindOffers(catalog: KindCatalog): Offer[] {
  return Object.keys(catalog)
    .sort()
    .map((kind): Offer => ({label: kind, what: 'kind', detail: catalog[kind]!.summary ?? '', documentation: kindContract(kind, catalog)}))
}

function kindContract(kind: string, catalog: KindCatalog): string {
  const entry = catalog[kind]!
  const lines = [`**${kind}**: ${entry.summary}`]
  const failures = Object.keys(entry.failures ?? {})
  if (failures.length > 0) lines.push(`Failure outcomes (route them with \`on:\`): ${failures.map((f) => `\`${f}\``).join(', ')}`)
  const stops = Object.entries(entry.stops ?? {})
  if (stops.length > 0) lines.push(`Outcomes that stop the run: ${stops.map(([o, s]) => `\`${o}\` (${s})`).join(', ')}`)
  const fields = outputFields({id: 'step', kind} as never, '.', catalog)
  if (fields.length > 0) lines.push(`Outputs (\`steps.<id>.outputs.…\`): ${fields.map((f) => `\`${f}\``).join(', ')}`)
  if (entry.needsSpec) lines.push('Needs a spec version written by a step before it.')
  return lines.join('\n\n')
}

function outputFields(step: never, dir: string, catalog: KindCatalog): string[] {
  try {
    const schema = catalog[(step as {kind: string}).kind]?.outputsSchema?.(step, {dir})
    const properties = isRecord(schema) && isRecord(schema['properties']) ? schema['properties'] : {}
    return Object.keys(properties).sort()
  } catch {
    return []
  }
}

function stepOffers(view: BufferView): Offer[] {
  return view.steps.map((step) => ({label: step.id, what: 'step' as const, detail: step.kind ? `${step.kind} step` : 'step'}))
}

/** Whether the cursor is at an outcome's value inside an `on:` mapping (block or flow). */
function inOnMapping(view: BufferView, line: number, before: string): boolean {
  if (/\bon:\s*\{[^}]*:\s*["']?[a-z0-9_]*$/.test(before)) return true
  const entry = /^(\s+)[\w-]+:\s*["']?[a-z0-9_]*$/.exec(before)
  if (!entry) return false
  const indent = entry[1]!.length
  // The nearest line above with less indentation is the key that holds this mapping.
  for (let i = line - 1; i >= 0; i--) {
    const text = view.lines[i] ?? ''
    if (text.trim() === '' || text.trim().startsWith('#')) continue
    const own = /^(\s*)(?:-\s+)?/.exec(text)!
    if (own[1]!.length >= indent) continue
    return /^\s*(?:-\s+)?on:\s*(#.*)?$/.test(text)
  }
  return false
}

/** Inside `${{ … }}`: the names the scope has at the dotted path being typed. */
function expressionOffers(file: string, view: BufferView, expression: string, catalog: KindCatalog): Offer[] {
  const typed = /((?:[A-Za-z_][A-Za-z0-9_]*\.)*)([A-Za-z_][A-Za-z0-9_]*)?$/.exec(expression)
  const segments = (typed?.[1] ?? '').split('.').filter(Boolean)
  let scope: ScopeNode
  try {
    scope = buildScope(exprDeclarations(view.pipeline, path.dirname(path.resolve(file)), catalog))
  } catch {
    return []
  }
  let node: ScopeNode | SchemaRef | undefined = scope
  for (const segment of segments) node = node === undefined ? undefined : child(node, segment)
  if (node === undefined) return []
  const root = segments.length === 0
  const parent = segments[0]
  return names(node).map(([label, detail]) => ({
    label,
    what: root ? 'root' : parent === 'steps' && segments.length === 1 ? 'step' : parent === 'inputs' ? 'input' : 'field',
    ...(detail ? {detail} : {}),
  }))
}

function isScopeNode(node: ScopeNode | SchemaRef): node is ScopeNode {
  return 'kind' in node && (node.kind === 'record' || node.kind === 'schema')
}

function child(node: ScopeNode | SchemaRef, name: string): ScopeNode | SchemaRef | undefined {
  if (isScopeNode(node)) {
    if (node.kind === 'record') return node.fields.get(name)
    node = node.ref
  }
  const found = lookupField(node, name)
  return found.found === 'field' ? found.ref : undefined
}

/** The fields under a node, each with a one-line description of what it holds. */
function names(node: ScopeNode | SchemaRef): Array<[string, string]> {
  if (isScopeNode(node) && node.kind === 'record') return [...node.fields.entries()].map(([name, value]) => [name, describe(value)])
  const ref = isScopeNode(node) ? node.ref : node
  const schema = resolve(ref).schema
  const properties = isRecord(schema) && isRecord(schema['properties']) ? schema['properties'] : {}
  return Object.entries(properties).map(([name, value]) => [name, describe({schema: value as JsonSchema, root: ref.root})])
}

function describe(node: ScopeNode | SchemaRef): string {
  if (isScopeNode(node) && node.kind === 'record') return node.path
  const schema = resolve(isScopeNode(node) ? node.ref : node).schema
  if (!isRecord(schema)) return ''
  const type = Array.isArray(schema['type']) ? (schema['type'] as string[]).join(' | ') : typeof schema['type'] === 'string' ? schema['type'] : ''
  const description = typeof schema['description'] === 'string' ? schema['description'].split('\n')[0]! : ''
  return [type, description].filter(Boolean).join(': ')
}
