/**
 * Static checking of expressions before a run: syntax, references (unknown names, inputs, step
 * ids, secrets, fields a step's declared outputs do not have, each with a did-you-mean), then
 * types, with cel-js's checker over CEL types derived from the same JSON Schemas.
 */
import {Environment, ParseError, type ASTNode, type ParseResult} from '@marcbachmann/cel-js'
import {closest} from '../util/suggest.js'
import {registerPipeFunctions} from './functions.js'
import {CEL_LIMITS, DEFAULT_LIMITS, type ExprLimits} from './limits.js'
import {regexProblem} from './regex.js'
import {DYN, closedFields, elementSchema, lookupField, mapValueSchema, resolve, schemaKind, schemaKinds, type SchemaRef} from './schema.js'
import {aliasProblem, buildScope, withAliases, type AliasTypes, type ExprDeclarations, type RecordNode, type ScopeNode} from './scope.js'
import {parseTemplate, type Template} from './template.js'

/** A problem in one expression; `offset` and `length` are in the expression's text (or the scalar's, for template checks). */
export interface ExprDiagnostic {
  /** The whole message, did-you-mean included, ready to print after file:line:col. */
  readonly message: string
  readonly offset: number
  readonly length: number
  /** The name the did-you-mean proposes, for editors and tests. */
  readonly suggestion?: string
}

export interface CheckResult {
  readonly diagnostics: readonly ExprDiagnostic[]
  /** What the expression reads, deepest paths only: `steps.log.outputs.lines`, `inputs.since`, `item.title`, `steps.x.outputs.items[].id`. */
  readonly references: readonly string[]
  /** The CEL type of the result when it checked (`string`, `list<string>`, `dyn`, …). */
  readonly type: string | undefined
  /** The JSON Schema of the result when the expression is a plain reference (`steps.draft.outputs.value.items`), else DYN. */
  readonly schema: SchemaRef
}

export interface CheckOptions {
  /** Names bound for this expression only, like a foreach's `as:` name. */
  readonly aliases?: AliasTypes
  /** Require the result type (for `when:` conditions: `bool`); `dyn` passes and is checked at run time. */
  readonly expect?: 'bool' | 'string' | 'list' | 'map' | 'int'
}

export interface TemplateCheckResult {
  readonly template: Template
  /** Offsets are in the scalar's value: an expression's diagnostics are shifted by its expressionOffset. */
  readonly diagnostics: readonly ExprDiagnostic[]
  readonly references: readonly string[]
}

/** Identifiers that are CEL type names, valid wherever a value is (`type(x) == string`). */
const TYPE_NAMES = new Set(['int', 'uint', 'double', 'bool', 'string', 'bytes', 'list', 'map', 'null_type', 'type', 'dyn'])
const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one', 'map', 'filter'])
const MAX_TYPE_DEPTH = 12

/** Checks expressions against one pipeline's declarations. Build once per pipeline; it caches per alias set. */
export class ExprChecker {
  private readonly scope: RecordNode
  private readonly limits: ExprLimits
  private readonly base: Environment
  private readonly envs = new Map<string, {env: Environment; parsed: Map<string, ParseResult>}>()
  private readonly typeNames = new Set<string>()
  private parses = 0

  constructor(declarations: ExprDeclarations, limits: Partial<ExprLimits> = {}) {
    this.scope = buildScope(declarations)
    this.limits = {...DEFAULT_LIMITS, ...limits}
    const env = new Environment({homogeneousAggregateLiterals: false, limits: CEL_LIMITS})
    registerPipeFunctions(env)
    for (const [name, node] of this.scope.fields) env.registerVariable(name, this.celType(env, node, `pipe.${name}`, 0))
    this.base = env
  }

  /** How many times an expression was parsed (each distinct expression once per alias set). */
  get parseCount(): number {
    return this.parses
  }

  check(expression: string, options: CheckOptions = {}): CheckResult {
    const aliases = options.aliases ?? {}
    const failed = (diagnostics: ExprDiagnostic[]): CheckResult => ({diagnostics, references: [], type: undefined, schema: DYN})
    for (const name of Object.keys(aliases)) {
      const problem = aliasProblem(name)
      if (problem !== undefined) return failed([{message: `alias ${problem}`, offset: 0, length: expression.length}])
    }
    if (expression.length > this.limits.maxExpressionLength) {
      return failed([
        {message: `expression is ${expression.length} characters long; the limit is ${this.limits.maxExpressionLength}`, offset: 0, length: expression.length},
      ])
    }
    const slot = this.envFor(aliases)
    let parsed = slot.parsed.get(expression)
    if (parsed === undefined) {
      try {
        parsed = slot.env.parse(expression)
      } catch (error) {
        if (error instanceof ParseError) return failed([fromCelError('syntax error', error, expression)])
        throw error
      }
      this.parses++
      slot.parsed.set(expression, parsed)
    }
    const walker = new Walker(withAliases(this.scope, aliases))
    const top = walker.visit(parsed.ast, new Map())
    const schema = top?.kind === 'schema' ? top.ref : DYN
    const references = maximal(walker.references)
    if (walker.diagnostics.length > 0) return {diagnostics: walker.diagnostics, references, type: undefined, schema}
    const typed = parsed.check()
    if (!typed.valid) {
      const diagnostic = typed.error ? fromCelError('type error', typed.error, expression) : {message: 'type error', offset: 0, length: expression.length}
      return {diagnostics: [diagnostic], references, type: undefined, schema}
    }
    const type = typed.type
    const diagnostics: ExprDiagnostic[] = []
    if (options.expect !== undefined && type !== undefined && type !== 'dyn' && !matchesExpected(type, options.expect)) {
      diagnostics.push({
        message: `expected ${options.expect === 'int' ? 'an' : 'a'} ${options.expect}, but this expression gives ${type}`,
        offset: 0,
        length: expression.length,
      })
    }
    return {diagnostics, references, type, schema}
  }

  /** Checks every expression in one scalar; a whole-scalar expression is checked with `options.expect`, the others without. */
  checkTemplate(text: string, options: CheckOptions = {}): TemplateCheckResult {
    const template = parseTemplate(text)
    const diagnostics: ExprDiagnostic[] = [...template.diagnostics]
    const references = new Set<string>()
    for (const part of template.parts) {
      if (part.kind !== 'expr' || part.expression === '') continue
      const result = this.check(part.expression, part === template.whole ? options : {aliases: options.aliases ?? {}})
      for (const d of result.diagnostics) diagnostics.push({...d, offset: d.offset + part.expressionOffset})
      for (const r of result.references) references.add(r)
    }
    if (options.expect !== undefined && options.expect !== 'string' && template.whole === undefined && template.diagnostics.length === 0) {
      diagnostics.push({
        message: `expected a ${options.expect}: write the value as one \${{ … }} and nothing else (text around it makes a string)`,
        offset: 0,
        length: text.length,
      })
    }
    return {template, diagnostics, references: [...references]}
  }

  private envFor(aliases: AliasTypes): {env: Environment; parsed: Map<string, ParseResult>} {
    const key = JSON.stringify(Object.entries(aliases).map(([name, ref]) => [name, ref?.schema, ref && ref.root !== ref.schema ? ref.root : null]))
    let slot = this.envs.get(key)
    if (slot === undefined) {
      let env = this.base
      if (Object.keys(aliases).length > 0) {
        env = this.base.clone()
        for (const [name, ref] of Object.entries(aliases)) {
          // Already bound for the whole pipeline (an inline step's foreach reusing its parent's alias): the walker types the inner one.
          if (this.scope.fields.has(name)) continue
          env.registerVariable(name, this.celType(env, {kind: 'schema', path: name, ref: ref ?? DYN}, `pipe.alias.${name}`, 0))
        }
      }
      slot = {env, parsed: new Map()}
      this.envs.set(key, slot)
    }
    return slot
  }

  /**
   * The CEL type for a scope node. Closed objects become message types, so the checker knows
   * their fields; open objects become map<string, T>; a value that may be null, or may be one of
   * several kinds, is dyn (checked at run time).
   */
  private celType(env: Environment, node: ScopeNode, name: string, depth: number): string {
    if (depth > MAX_TYPE_DEPTH) return 'dyn'
    if (node.kind === 'record') {
      const fields: Record<string, string> = {}
      for (const [field, child] of node.fields) fields[field] = this.celType(env, child, `${name}.${sanitize(field)}`, depth + 1)
      return this.registerMessage(env, name, fields)
    }
    const ref = node.ref
    const {kinds, nullable} = schemaKinds(ref)
    if (nullable) return 'dyn'
    switch (schemaKind(ref)) {
      case 'string':
        return 'string'
      case 'integer':
        return 'int'
      case 'number':
        return kinds.includes('integer') ? 'dyn' : 'double'
      case 'boolean':
        return 'bool'
      case 'array':
        return `list<${this.celType(env, {kind: 'schema', path: node.path, ref: elementSchema(ref)}, `${name}.item`, depth + 1)}>`
      case 'object': {
        const fields = closedFields(ref)
        if (fields === undefined)
          return `map<string, ${this.celType(env, {kind: 'schema', path: node.path, ref: mapValueSchema(ref)}, `${name}.value`, depth + 1)}>`
        const types: Record<string, string> = {}
        for (const [field, child] of Object.entries(fields))
          types[field] = this.celType(env, {kind: 'schema', path: node.path, ref: child}, `${name}.${sanitize(field)}`, depth + 1)
        return this.registerMessage(env, name, types)
      }
      default:
        return 'dyn'
    }
  }

  private registerMessage(env: Environment, name: string, fields: Record<string, string>): string {
    // An empty message type cannot be registered; an object with no fields reads nothing anyway.
    if (Object.keys(fields).length === 0) return 'map<string, dyn>'
    let unique = name
    for (let n = 2; this.typeNames.has(unique); n++) unique = `${name}_${n}`
    this.typeNames.add(unique)
    env.registerType({name: unique, fields})
    return unique
  }
}

function sanitize(segment: string): string {
  const clean = segment.replace(/[^A-Za-z0-9_]/g, '_')
  return /^[A-Za-z_]/.test(clean) ? clean : `_${clean}`
}

function matchesExpected(type: string, expected: NonNullable<CheckOptions['expect']>): boolean {
  if (expected === 'list') return type === 'list' || type.startsWith('list<')
  if (expected === 'map') return type === 'map' || type.startsWith('map<') || type.startsWith('pipe.')
  // A double may still hold a whole number (JSON has one number type): its value is checked when evaluated.
  if (expected === 'int') return type === 'int' || type === 'uint' || type === 'double'
  return type === expected
}

function fromCelError(kind: string, error: Error & {summary?: string; range?: {start: number; end: number}}, expression: string): ExprDiagnostic {
  const summary = error.summary ?? error.message.split('\n')[0] ?? error.message
  const start = Math.min(error.range?.start ?? 0, expression.length)
  const end = Math.max(start, Math.min(error.range?.end ?? expression.length, expression.length))
  return {message: `${kind}: ${summary}${mixHint(summary)}`, offset: start, length: end - start}
}

function mixHint(summary: string): string {
  if (/\bint\b.*\bdouble\b|\bdouble\b.*\bint\b/.test(summary))
    return ' (CEL does not mix int and double: write 2.0 for a double, or convert with int(…) or double(…))'
  return ''
}

/** Drops every path that is a prefix of another: `steps.a` when `steps.a.outputs.x` is there. */
function maximal(paths: Set<string>): string[] {
  const list = [...paths].filter((p) => p !== '')
  return list.filter((p) => !list.some((q) => q !== p && (q.startsWith(`${p}.`) || q.startsWith(`${p}[`)))).sort()
}

type Node = ASTNode & {readonly args: unknown}
type Locals = ReadonlyMap<string, ScopeNode | undefined>

/** Walks a parsed expression, resolving every reference against the scope. */
class Walker {
  readonly diagnostics: ExprDiagnostic[] = []
  readonly references = new Set<string>()

  constructor(private readonly scope: RecordNode) {}

  visit(node: Node, locals: Locals): ScopeNode | undefined {
    switch (node.op) {
      case 'value':
        return undefined
      case 'id':
        return this.identifier(node.args, node, locals)
      case '.':
      case '.?': {
        const [left, field] = node.args as [Node, string]
        const parent = this.visit(left, locals)
        return this.field(parent, field, node.range.end - field.length, field.length)
      }
      case '[]':
      case '[?]': {
        const [left, index] = node.args as [Node, Node]
        const parent = this.visit(left, locals)
        this.visit(index, locals)
        return this.index(parent, index)
      }
      case 'rcall':
        return this.methodCall(node, locals)
      case '==':
      case '!=':
      case 'in':
        this.comparison(node, locals)
        return undefined
      default:
        this.visitChildren(node.args, locals)
        return undefined
    }
  }

  private visitChildren(args: unknown, locals: Locals): void {
    if (Array.isArray(args)) {
      for (const item of args) this.visitChildren(item, locals)
    } else if (isNode(args)) {
      this.visit(args, locals)
    }
  }

  private identifier(name: string, node: Node, locals: Locals): ScopeNode | undefined {
    if (locals.has(name)) return locals.get(name)
    const found = this.scope.fields.get(name)
    if (found !== undefined) {
      this.reference(found)
      return found
    }
    if (TYPE_NAMES.has(name)) return undefined
    this.report(this.scope.unknown(name), node.range.start, name.length, name, [...this.scope.fields.keys(), ...locals.keys()])
    return undefined
  }

  private field(parent: ScopeNode | undefined, name: string, offset: number, length: number): ScopeNode | undefined {
    if (parent === undefined) return undefined
    if (parent.kind === 'record') {
      const child = parent.fields.get(name)
      if (child === undefined) {
        this.report(parent.unknown(name), offset, length, name, parent.fields.keys())
        return undefined
      }
      this.reference(child)
      return child
    }
    const found = lookupField(parent.ref, name)
    const path = `${parent.path}.${name}`
    switch (found.found) {
      case 'field':
        return this.reference({kind: 'schema', path, ref: found.ref})
      case 'dyn':
        return this.reference({kind: 'schema', path, ref: DYN})
      case 'none': {
        const has = found.known.length === 0 ? 'it declares no fields' : `it has ${found.known.slice(0, 12).join(', ')}${found.known.length > 12 ? ', …' : ''}`
        this.report(`${parent.path} has no field "${name}" (${has})`, offset, length, name, found.known)
        return undefined
      }
      default:
        // Reading a field of a list or a scalar: the type checker says what is wrong.
        return undefined
    }
  }

  private index(parent: ScopeNode | undefined, index: Node): ScopeNode | undefined {
    if (parent === undefined) return undefined
    if (index.op === 'value' && typeof index.args === 'string') {
      return this.field(parent, index.args, index.range.start, index.range.end - index.range.start)
    }
    if (parent.kind === 'record') return undefined
    const kind = schemaKind(parent.ref)
    if (kind === 'array') return this.reference({kind: 'schema', path: `${parent.path}[]`, ref: elementSchema(parent.ref)})
    if (kind === 'object') return this.reference({kind: 'schema', path: `${parent.path}[]`, ref: mapValueSchema(parent.ref)})
    return this.reference({kind: 'schema', path: `${parent.path}[]`, ref: DYN})
  }

  /** `x == 'lit'`, `'lit' != x`, `x in ['a', 'b']` where x has a declared enum: each literal must be one of it. */
  private comparison(node: Node, locals: Locals): void {
    const [left, right] = node.args as [Node, Node]
    const l = this.visit(left, locals)
    const r = this.visit(right, locals)
    if (node.op === 'in') {
      if (right.op === 'list') for (const item of right.args as Node[]) this.enumLiteral(l, item)
      return
    }
    this.enumLiteral(l, right)
    this.enumLiteral(r, left)
  }

  private enumLiteral(subject: ScopeNode | undefined, literal: Node): void {
    if (subject?.kind !== 'schema' || literal.op !== 'value' || typeof literal.args !== 'string') return
    const allowed = enumOf(subject.ref)
    if (allowed === undefined || allowed.includes(literal.args)) return
    const value = literal.args
    this.report(
      `${subject.path} is never "${value}"; it is one of ${allowed.map((a) => `"${a}"`).join(', ')}`,
      literal.range.start,
      literal.range.end - literal.range.start,
      value,
      allowed,
    )
  }

  /** Comprehensions and cel.bind bind names for their bodies; other method calls are plain calls. */
  private methodCall(node: Node, locals: Locals): ScopeNode | undefined {
    const [name, receiver, args] = node.args as [string, Node, Node[]]
    if (name === 'bind' && receiver.op === 'id' && receiver.args === 'cel' && args.length === 3 && args[0]!.op === 'id') {
      const bound = this.visit(args[1]!, locals)
      return this.visit(args[2]!, new Map(locals).set(args[0]!.args, bound))
    }
    if (COMPREHENSIONS.has(name) && args.length >= 2 && args[0]!.op === 'id') {
      const range = this.visit(receiver, locals)
      const twoVars = name !== 'map' && name !== 'filter' && args.length === 3 && args[1]!.op === 'id'
      const inner = new Map(locals)
      const isList = range?.kind === 'schema' && schemaKind(range.ref) === 'array'
      const isMap = range?.kind === 'record' || (range?.kind === 'schema' && schemaKind(range.ref) === 'object')
      const element = isList ? this.elementNode(range) : undefined
      const value = isMap ? this.valueNode(range) : undefined
      if (twoVars) {
        inner.set(args[0]!.args, undefined)
        inner.set(args[1]!.args as string, isList ? element : value)
      } else {
        inner.set(args[0]!.args, isList ? element : undefined)
      }
      for (const body of args.slice(twoVars ? 2 : 1)) this.visit(body, inner)
      // A filtered list holds the same elements: `xs.filter(…).map(x, x.field)` is checked like `xs.map(…)`.
      return name === 'filter' && isList ? range : undefined
    }
    if (name === 'matches' && args.length === 1) this.pattern(args[0]!)
    this.visit(receiver, locals)
    for (const arg of args) this.visit(arg, locals)
    return undefined
  }

  /** A literal pattern of matches() must be one RE2 takes; another is checked when evaluated. */
  private pattern(arg: Node): void {
    if (arg.op !== 'value' || typeof arg.args !== 'string') return
    const problem = regexProblem(arg.args)
    if (problem !== undefined) this.diagnostics.push({message: `matches(): ${problem}`, offset: arg.range.start, length: arg.range.end - arg.range.start})
  }

  private elementNode(range: ScopeNode | undefined): ScopeNode | undefined {
    if (range?.kind !== 'schema') return undefined
    return {kind: 'schema', path: `${range.path}[]`, ref: elementSchema(range.ref)}
  }

  private valueNode(range: ScopeNode | undefined): ScopeNode | undefined {
    if (range?.kind !== 'schema') return undefined
    return {kind: 'schema', path: `${range.path}[]`, ref: mapValueSchema(range.ref)}
  }

  private reference(node: ScopeNode): ScopeNode {
    this.references.add(node.path)
    return node
  }

  private report(message: string, offset: number, length: number, name: string, candidates: Iterable<string>): void {
    const suggestion = closest(
      name,
      [...candidates].filter((c) => c !== name),
    )
    this.diagnostics.push({
      message: suggestion === undefined ? message : `${message} — did you mean "${suggestion}"?`,
      offset,
      length,
      ...(suggestion === undefined ? {} : {suggestion}),
    })
  }
}

/** The string values of a schema's `enum`, when it has one made only of strings. */
function enumOf(ref: SchemaRef): string[] | undefined {
  const s = resolve(ref).schema
  if (typeof s !== 'object' || !Array.isArray(s['enum'])) return undefined
  const values = s['enum'] as unknown[]
  return values.every((v): v is string => typeof v === 'string') ? values : undefined
}

function isNode(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && typeof (value as {op?: unknown}).op === 'string' && 'range' in value
}
