/**
 * Evaluating expressions at run time with cel-js: a CEL interpreter over a parsed tree, so no
 * JavaScript is generated or eval'd, and nothing is ever handed to a shell. Each distinct
 * expression is parsed once per evaluator. Values cross the boundary through values.ts: JSON in
 * (ints as BigInt where the schema says integer), JSON out (BigInt back to number, or an error).
 */
import {Environment, EvaluationError, ParseError, type ParseResult} from '@marcbachmann/cel-js'
import {PipeError} from '../errors.js'
import {registerPipeFunctions} from './functions.js'
import {CEL_LIMITS, DEFAULT_LIMITS, type ExprLimits} from './limits.js'
import {BudgetExceeded, PROBE_SIGNATURE, charge, instrument, metered, probeHandler} from './meter.js'
import {RegexError, regexMatches} from './regex.js'
import {DYN, type SchemaRef} from './schema.js'
import {POLICY_FIELDS, ROOT_NAMES, aliasProblem, buildScope, type ExprDeclarations, type RecordNode, type ScopeNode} from './scope.js'
import {parseTemplate, type Template} from './template.js'
import {ConversionError, fromCel, stringify, toCel, type JsonValue} from './values.js'

/** The values an expression reads at run time. Absent parts read as "no such key" errors. */
export interface ExprContext {
  readonly inputs?: Readonly<Record<string, unknown>>
  /** Per step id, the latest snapshot's outputs, outcome and reason; a step that has not run is absent. */
  readonly steps?: Readonly<Record<string, {readonly outputs?: unknown; readonly outcome?: string; readonly reason?: string}>>
  readonly spec?: unknown
  readonly run?: {readonly id: string; readonly feature_id: string; readonly parent: string | null}
  /** Secret values by name: only the names the pipeline lists. */
  readonly secrets?: Readonly<Record<string, string>>
  /** The policy the run is under: its numbers a pipeline may read (POLICY_FIELDS). */
  readonly policy?: Readonly<Record<(typeof POLICY_FIELDS)[number], number>>
  /** The values of the names the pipeline declares besides the roots (ExprDeclarations.aliases: an inline step's foreach item). */
  readonly aliases?: Readonly<Record<string, unknown>>
}

/** A value bound for one expression only (a foreach item), with its schema when known. */
export interface AliasValue {
  readonly value: unknown
  readonly schema?: SchemaRef | undefined
}

/** An expression failed: syntax, a limit, a missing key, a type mismatch at run time, a result that is not JSON. */
export class ExpressionError extends PipeError {
  readonly expression: string
  /** Where in the expression (for reason `template`: in the text) it went wrong, when known. */
  readonly offset: number | undefined
  /** cel-js's error code (`no_such_key`, `division_by_zero`, …), or pipe's (`limit`, `not_json`, `template`, `async`). `expression` is the whole text for `template`. */
  readonly reason: string

  constructor(expression: string, message: string, reason: string, offset?: number, cause?: unknown) {
    const what = reason === 'template' ? `text ${JSON.stringify(clip(expression))} is not a valid template` : `expression \${{ ${clip(expression)} }} failed`
    super('E_CONFIG', `${what}: ${message}`, {
      hint: 'Run pipe validate on the pipeline; compare the expression with the values the step received (its snapshot records them).',
      details: {expression, reason, ...(offset === undefined ? {} : {offset})},
      cause,
    })
    this.expression = expression
    this.offset = offset
    this.reason = reason
  }
}

function clip(expression: string): string {
  return expression.length > 200 ? `${expression.slice(0, 200)}…` : expression
}

const MAX_CACHED = 5000

/**
 * What `matches` calls are renamed to once parsed (cel-js's own matches, JavaScript's backtracking
 * RegExp, cannot be replaced): the same signature, evaluated by RE2 (regex.ts). No user writes it:
 * the checker does not know it, so an expression that names it fails validation.
 */
const LINEAR_MATCHES = 'pipeMatchesRe2'

function linearMatches(text: string, pattern: string): boolean {
  charge(text.length >>> 4)
  try {
    return regexMatches(text, pattern)
  } catch (error) {
    if (error instanceof RegexError) throw new EvaluationError({code: 'invalid_regular_expression', message: `matches(): ${error.message}`})
    throw error
  }
}

/** Renames every `x.matches(p)` of a parsed expression to LINEAR_MATCHES, before cel-js checks it. */
function useLinearMatches(node: unknown, depth = 0): void {
  if (typeof node !== 'object' || node === null || depth > 1000) return
  if (Array.isArray(node)) {
    for (const item of node) useLinearMatches(item, depth + 1)
    return
  }
  const {op, args} = node as {op?: unknown; args?: unknown}
  if (typeof op !== 'string') return
  if (op === 'rcall' && Array.isArray(args) && args[0] === 'matches') args[0] = LINEAR_MATCHES
  if (typeof args === 'object') useLinearMatches(args, depth + 1)
}

interface Slot {
  readonly env: Environment
  readonly parsed: Map<string, ParseResult>
}

/** Evaluates expressions for one pipeline; build once, reuse for every step of every run. */
export class ExprEvaluator {
  private readonly scope: RecordNode
  private readonly limits: ExprLimits
  private readonly base: Environment
  private readonly slots = new Map<string, Slot>()
  private readonly templates = new Map<string, Template>()
  private parses = 0

  constructor(declarations: ExprDeclarations, limits: Partial<ExprLimits> = {}) {
    this.scope = buildScope(declarations)
    this.limits = {...DEFAULT_LIMITS, ...limits}
    // Every root is dyn here: the checker already proved the types, and the values are converted by schema.
    const env = new Environment({homogeneousAggregateLiterals: false, limits: CEL_LIMITS})
    for (const name of this.scope.fields.keys()) env.registerVariable(name, 'dyn')
    env.registerFunction(`string.${LINEAR_MATCHES}(string): bool`, linearMatches)
    env.registerFunction(PROBE_SIGNATURE, probeHandler)
    registerPipeFunctions(env)
    instrument(env)
    this.base = env
  }

  /** How many times an expression was parsed (each distinct expression once per alias set). */
  get parseCount(): number {
    return this.parses
  }

  /** Converts the context once, for evaluating several expressions against the same values. */
  bind(context: ExprContext, aliases: Readonly<Record<string, AliasValue>> = {}): BoundExpressions {
    const values: Record<string, unknown> = {}
    for (const [name, node] of this.scope.fields) {
      const value = (ROOT_NAMES as readonly string[]).includes(name) ? (context as Record<string, unknown>)[name] : context.aliases?.[name]
      if (value !== undefined) values[name] = convertByScope(value, node)
    }
    return new BoundExpressions(this, values, []).withAliases(aliases)
  }

  evaluate(expression: string, context: ExprContext, aliases: Readonly<Record<string, AliasValue>> = {}): JsonValue {
    return this.bind(context, aliases).evaluate(expression)
  }

  render(text: string, context: ExprContext, aliases: Readonly<Record<string, AliasValue>> = {}): JsonValue {
    return this.bind(context, aliases).render(text)
  }

  /** @internal */
  run(expression: string, values: Record<string, unknown>, aliasNames: readonly string[]): JsonValue {
    if (expression.length > this.limits.maxExpressionLength) {
      throw new ExpressionError(expression, `it is ${expression.length} characters long; the limit is ${this.limits.maxExpressionLength}`, 'limit')
    }
    const compiled = this.compile(expression, aliasNames)
    let raw: unknown
    try {
      raw = metered<unknown>({maxSteps: this.limits.maxEvaluationSteps, maxMs: this.limits.maxEvaluationMs}, () => compiled(values))
    } catch (error) {
      if (error instanceof BudgetExceeded) throw new ExpressionError(expression, `${error.message}; it was stopped`, 'limit', undefined, error)
      if (error instanceof EvaluationError) {
        const offset = error.range?.start
        const summary = error.summary.replaceAll(LINEAR_MATCHES, 'matches')
        throw new ExpressionError(
          expression,
          offset === undefined ? summary : `${summary} (at column ${offset + 1} of the expression)`,
          error.code,
          offset,
          error,
        )
      }
      // A string or list grown past what the engine can hold.
      if (error instanceof RangeError) throw new ExpressionError(expression, `the result grew too large (${error.message})`, 'limit', undefined, error)
      throw error
    }
    if (raw instanceof Promise) throw new ExpressionError(expression, 'it did not give a value synchronously', 'async')
    try {
      return fromCel(raw, this.limits.maxResultBytes)
    } catch (error) {
      if (error instanceof ConversionError) {
        const limit = error.message.startsWith('result is larger')
        const message = limit ? `${error.message} of ${this.limits.maxResultBytes} bytes` : error.message
        throw new ExpressionError(expression, message, limit ? 'limit' : 'not_json', undefined, error)
      }
      throw error
    }
  }

  /** @internal */
  template(text: string): Template {
    let template = this.templates.get(text)
    if (template === undefined) {
      template = parseTemplate(text)
      if (this.templates.size >= MAX_CACHED) this.templates.clear()
      this.templates.set(text, template)
    }
    return template
  }

  /** @internal */
  get maxResultBytes(): number {
    return this.limits.maxResultBytes
  }

  private compile(expression: string, aliasNames: readonly string[]): ParseResult {
    const slot = this.slot(aliasNames)
    let compiled = slot.parsed.get(expression)
    if (compiled === undefined) {
      try {
        compiled = slot.env.parse(expression)
        useLinearMatches(compiled.ast)
      } catch (error) {
        if (error instanceof ParseError) throw new ExpressionError(expression, `syntax error: ${error.summary}`, error.code, error.range?.start, error)
        throw error
      }
      this.parses++
      // Pipelines hold a bounded number of expressions; the cap only guards a long-lived process.
      if (slot.parsed.size >= MAX_CACHED) slot.parsed.clear()
      slot.parsed.set(expression, compiled)
    }
    return compiled
  }

  private slot(aliasNames: readonly string[]): Slot {
    const key = aliasNames.join(',')
    let slot = this.slots.get(key)
    if (slot === undefined) {
      let env = this.base
      if (aliasNames.length > 0) {
        env = this.base.clone()
        // A name the pipeline already binds (an inline step's own foreach reusing its parent's alias) is registered once.
        for (const name of aliasNames) if (!this.scope.fields.has(name)) env.registerVariable(name, 'dyn')
        instrument(env)
      }
      slot = {env, parsed: new Map()}
      this.slots.set(key, slot)
    }
    return slot
  }
}

/** One set of values, converted once, against which expressions and templates evaluate. */
export class BoundExpressions {
  constructor(
    private readonly evaluator: ExprEvaluator,
    private readonly values: Record<string, unknown>,
    private readonly aliasNames: readonly string[],
  ) {}

  /**
   * The same converted context with these aliases bound (a foreach item): only the aliases are
   * converted, so evaluating per item does not convert the whole context again for each item.
   */
  withAliases(aliases: Readonly<Record<string, AliasValue>>): BoundExpressions {
    const names = Object.keys(aliases)
    if (names.length === 0) return this
    const values = {...this.values}
    for (const [name, alias] of Object.entries(aliases)) {
      const problem = aliasProblem(name)
      if (problem !== undefined) throw new PipeError('E_CONFIG', `alias ${problem}`)
      values[name] = toCel(alias.value, alias.schema ?? DYN)
    }
    return new BoundExpressions(this.evaluator, values, [...new Set([...this.aliasNames, ...names])].sort())
  }

  evaluate(expression: string): JsonValue {
    return this.evaluator.run(expression, this.values, this.aliasNames)
  }

  /**
   * The value of a YAML scalar: a whole-scalar expression gives its typed value, text with
   * expressions inside gives a string, text without expressions gives itself (escapes undone).
   */
  render(text: string): JsonValue {
    const template = this.evaluator.template(text)
    const problem = template.diagnostics[0]
    if (problem !== undefined) throw new ExpressionError(text, problem.message, 'template', problem.offset)
    if (template.whole !== undefined) return this.evaluate(template.whole.expression)
    let out = ''
    let bytes = 0
    for (const part of template.parts) {
      const piece = part.kind === 'text' ? part.text : stringify(this.evaluate(part.expression))
      out += piece
      bytes += Buffer.byteLength(piece)
      if (bytes > this.evaluator.maxResultBytes) {
        throw new ExpressionError(
          part.kind === 'expr' ? part.expression : text,
          `the rendered string is larger than the limit of ${this.evaluator.maxResultBytes} bytes`,
          'limit',
        )
      }
    }
    return out
  }
}

/** Converts one root's value by its scope node: records field by field, schemas by toCel. */
function convertByScope(value: unknown, node: ScopeNode): unknown {
  if (node.kind === 'schema') return toCel(value, node.ref)
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return toCel(value, DYN)
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => {
      const child = node.fields.get(key)
      return [key, child === undefined ? toCel(item, DYN) : convertByScope(item, child)]
    }),
  )
}
