/**
 * Typed pipeline inputs: their declarations, `-i key=value` pairs from the command line, a
 * values file, defaults. Pure: no files, no process; every problem is collected, not only the
 * first, so one `pipe run` tells the user everything that is wrong with what they gave.
 *
 * Coercion is strict, because a guessed value is worse than a clear error:
 * - integer: an optional sign and digits ("5", "-3"); "5.5", "5e2", "0x10", "" are errors.
 * - number: a decimal number ("5", "-0.5", "1e3"); "inf", "NaN", "" are errors.
 * - boolean: exactly "true" or "false" (yes/no/1/0/on/off are errors: YAML 1.1 and shells disagree on them).
 * - string: the text as given; `key=` is the empty string.
 * - object, array: JSON text of a mapping or a list (`-i task='{"id": "T-1"}'`); these types exist
 *   so a pipeline or foreach step can hand a child pipeline structured data (a task and its DoD).
 * A values file is YAML, so its values are already typed: a string input given 1.10 there is an
 * error (quote it), an integer input given 5.0 is accepted (YAML and JSON do not tell 5.0 from 5).
 * Precedence: command line over values file over default.
 */
import {closest} from '../util/suggest.js'

export type InputType = 'string' | 'number' | 'integer' | 'boolean' | 'object' | 'array'
export type InputValue = string | number | boolean | {[key: string]: unknown} | unknown[]

export interface InputDeclaration {
  readonly type: InputType
  readonly description?: string
  readonly required?: boolean
  readonly default?: InputValue
  readonly enum?: readonly InputValue[]
  readonly minimum?: number
  readonly maximum?: number
}

export interface InputProblem {
  /** The input concerned, when there is one. */
  readonly input?: string
  /** Where the bad value came from. */
  readonly source: 'declaration' | 'cli' | 'file' | 'default'
  readonly message: string
}

export interface ResolvedInputs {
  /** The value of every input that has one (given or defaulted); an optional input without a default and not given is absent. */
  readonly values: Record<string, InputValue>
  /** Where each value came from. */
  readonly sources: Record<string, 'cli' | 'file' | 'default'>
  readonly problems: readonly InputProblem[]
}

export interface InputSources {
  /** The raw `-i` flag values, in order: ["since=v1.2", "max_items=5"]. */
  readonly cli?: readonly string[]
  /** The parsed values file (its top level must be a mapping), and its name for messages. */
  readonly file?: {readonly name: string; readonly data: unknown}
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/

/** Problems in the declarations themselves (what `pipe validate` reports): a default or enum that does not fit its type, a required input with a default. */
export function checkDeclarations(declarations: Readonly<Record<string, InputDeclaration>>): InputProblem[] {
  const problems: InputProblem[] = []
  for (const [name, decl] of Object.entries(declarations)) {
    const add = (message: string): void => {
      problems.push({input: name, source: 'declaration', message: `input "${name}": ${message}`})
    }
    if (!NAME.test(name)) add('the name must be letters, digits and _, starting with a letter or _, so expressions can read inputs.' + name)
    if (decl.enum !== undefined) {
      for (const value of decl.enum) {
        const problem = typeProblem(value, decl.type)
        if (problem !== undefined) add(`enum value ${JSON.stringify(value)} ${problem}`)
      }
    }
    if (decl.minimum !== undefined && decl.maximum !== undefined && decl.minimum > decl.maximum)
      add(`minimum ${decl.minimum} is greater than maximum ${decl.maximum}`)
    if ((decl.minimum !== undefined || decl.maximum !== undefined) && decl.type !== 'integer' && decl.type !== 'number')
      add(`minimum and maximum apply to numbers, not to a ${decl.type}`)
    if (decl.default !== undefined) {
      if (decl.required === true) add('a required input cannot have a default (drop one of them)')
      for (const problem of valueProblems(decl.default, decl)) add(`default ${JSON.stringify(decl.default)} ${problem}`)
    }
  }
  return problems
}

/**
 * Parses `-i key=value` pairs: the key is up to the first `=`, the value is the rest (so
 * `-i q=a=b` gives "a=b"). A pair without `=`, an undeclared key or a repeated key is a problem.
 */
export function parseInputPairs(
  pairs: readonly string[],
  declarations: Readonly<Record<string, InputDeclaration>>,
): {values: Record<string, string>; problems: InputProblem[]} {
  const values: Record<string, string> = {}
  const problems: InputProblem[] = []
  const seen = new Set<string>()
  for (const pair of pairs) {
    const eq = pair.indexOf('=')
    if (eq <= 0) {
      problems.push({source: 'cli', message: eq === 0 ? `-i ${pair}: the name before = is missing` : `-i ${pair}: expected name=value`})
      continue
    }
    const key = pair.slice(0, eq)
    const value = pair.slice(eq + 1)
    if (!Object.hasOwn(declarations, key)) {
      problems.push({input: key, source: 'cli', message: `-i ${key}: ${unknownInput(key, declarations)}`})
      continue
    }
    if (seen.has(key)) {
      problems.push({input: key, source: 'cli', message: `-i ${key}: given more than once; give each input once`})
      continue
    }
    seen.add(key)
    setOwn(values, key, value)
  }
  return {values, problems}
}

/** Resolves every declared input from the command line, a values file and defaults. */
export function resolveInputs(declarations: Readonly<Record<string, InputDeclaration>>, sources: InputSources = {}): ResolvedInputs {
  const values: Record<string, InputValue> = {}
  const from: Record<string, 'cli' | 'file' | 'default'> = {}
  const parsed = parseInputPairs(sources.cli ?? [], declarations)
  const problems: InputProblem[] = [...parsed.problems]
  const fileValues = readValuesFile(sources.file, declarations, problems)
  const missing: string[] = []
  for (const [name, decl] of Object.entries(declarations)) {
    let value: InputValue | undefined
    let source: 'cli' | 'file' | 'default' | undefined
    let where = ''
    if (Object.hasOwn(parsed.values, name)) {
      const coerced = coerce(parsed.values[name]!, decl.type)
      if (coerced.problem !== undefined) {
        problems.push({input: name, source: 'cli', message: `-i ${name}=${parsed.values[name]}: ${coerced.problem}`})
        continue
      }
      value = coerced.value
      source = 'cli'
      where = `-i ${name}`
    } else if (fileValues !== undefined && Object.hasOwn(fileValues, name)) {
      const raw = fileValues[name]
      const problem = typeProblem(raw, decl.type)
      if (problem !== undefined) {
        problems.push({
          input: name,
          source: 'file',
          message: `${sources.file!.name}: ${name}: ${JSON.stringify(raw) ?? String(raw)} ${problem}${decl.type === 'string' && raw !== null ? ' (quote it in the file)' : ''}`,
        })
        continue
      }
      value = raw as InputValue
      source = 'file'
      where = `${sources.file!.name}: ${name}`
    } else if (decl.default !== undefined) {
      value = decl.default
      source = 'default'
      where = `default of ${name}`
    } else {
      if (decl.required === true) missing.push(name)
      continue
    }
    const bad = valueProblems(value, decl)
    if (bad.length > 0) {
      for (const problem of bad) problems.push({input: name, source, message: `${where}: ${JSON.stringify(value)} ${problem}`})
      continue
    }
    setOwn(values, name, value)
    setOwn(from, name, source)
  }
  if (missing.length > 0) {
    const list = missing.map((name) => describe(name, declarations[name]!)).join('; ')
    problems.push({
      source: 'cli',
      message: `missing required input${missing.length > 1 ? 's' : ''}: ${list}. Give ${missing.map((m) => `-i ${m}=…`).join(' ')}`,
    })
  }
  return {values, sources: from, problems}
}

/** Plain assignment of "__proto__" would change the prototype instead of adding a key. */
function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(target, key, {value, enumerable: true, writable: true, configurable: true})
}

function describe(name: string, decl: InputDeclaration): string {
  return `${name} (${decl.type}${decl.description ? `, ${decl.description}` : ''})`
}

function readValuesFile(
  file: InputSources['file'],
  declarations: Readonly<Record<string, InputDeclaration>>,
  problems: InputProblem[],
): Record<string, unknown> | undefined {
  if (file === undefined) return undefined
  const data = file.data
  if (data === null || data === undefined) return {}
  if (typeof data !== 'object' || Array.isArray(data)) {
    problems.push({source: 'file', message: `${file.name}: expected a mapping of input names to values, got ${Array.isArray(data) ? 'a list' : typeof data}`})
    return undefined
  }
  for (const key of Object.keys(data)) {
    if (!Object.hasOwn(declarations, key)) problems.push({input: key, source: 'file', message: `${file.name}: ${unknownInput(key, declarations)}`})
  }
  return data as Record<string, unknown>
}

function unknownInput(key: string, declarations: Readonly<Record<string, InputDeclaration>>): string {
  const names = Object.keys(declarations)
  if (names.length === 0) return `unknown input "${key}"; the pipeline declares no inputs`
  const match = closest(key, names)
  return `unknown input "${key}"${match === undefined ? '' : ` — did you mean "${match}"?`} (declared: ${names.join(', ')})`
}

const INTEGER = /^[+-]?\d+$/
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/

/** Converts a command-line string to the declared type, strictly. */
export function coerce(text: string, type: InputType): {value: InputValue; problem?: undefined} | {value?: undefined; problem: string} {
  switch (type) {
    case 'string':
      return {value: text}
    case 'integer': {
      if (!INTEGER.test(text)) return {problem: `expected an integer${DECIMAL.test(text) ? ' (no fraction or exponent)' : ''}`}
      const value = Number(text)
      if (!Number.isSafeInteger(value)) return {problem: `integer out of range (at most ${Number.MAX_SAFE_INTEGER} in size)`}
      return {value}
    }
    case 'number': {
      const value = Number(text)
      if (!DECIMAL.test(text) || !Number.isFinite(value)) return {problem: 'expected a number'}
      return {value}
    }
    case 'boolean':
      if (text === 'true') return {value: true}
      if (text === 'false') return {value: false}
      return {problem: 'expected true or false'}
    case 'object':
    case 'array': {
      let value: unknown
      try {
        value = JSON.parse(text)
      } catch {
        return {problem: `expected ${type === 'object' ? 'a JSON object' : 'a JSON list'}`}
      }
      const problem = typeProblem(value, type)
      return problem === undefined ? {value: value as InputValue} : {problem}
    }
  }
}

/** Why a typed value (from YAML or a declaration) is not of the declared type, or undefined. */
function typeProblem(value: unknown, type: InputType): string | undefined {
  switch (type) {
    case 'string':
      return typeof value === 'string' ? undefined : `is not a string (it is ${kindOf(value)})`
    case 'integer':
      return typeof value === 'number' && Number.isSafeInteger(value) ? undefined : `is not an integer (it is ${kindOf(value)})`
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? undefined : `is not a number (it is ${kindOf(value)})`
    case 'boolean':
      return typeof value === 'boolean' ? undefined : `is not true or false (it is ${kindOf(value)})`
    case 'object':
      return value !== null && typeof value === 'object' && !Array.isArray(value) ? undefined : `is not a mapping (it is ${kindOf(value)})`
    case 'array':
      return Array.isArray(value) ? undefined : `is not a list (it is ${kindOf(value)})`
  }
}

function kindOf(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'number') return Number.isInteger(value) ? 'an integer' : 'a number with a fraction'
  if (typeof value === 'object') return 'a mapping'
  return `a ${typeof value}`
}

/** Type, enum and range problems of a value for its declaration. */
function valueProblems(value: unknown, decl: InputDeclaration): string[] {
  const typed = typeProblem(value, decl.type)
  if (typed !== undefined) return [typed]
  const problems: string[] = []
  if (decl.enum !== undefined && (typeof value !== 'object' || value === null) && !decl.enum.includes(value as InputValue)) {
    const options = decl.enum.map((v) => JSON.stringify(v))
    const match =
      typeof value === 'string'
        ? closest(
            value,
            decl.enum.filter((v): v is string => typeof v === 'string'),
          )
        : undefined
    problems.push(`is not one of ${options.join(', ')}${match === undefined ? '' : ` — did you mean "${match}"?`}`)
  }
  if (typeof value === 'number') {
    if (decl.minimum !== undefined && value < decl.minimum) problems.push(`is less than the minimum ${decl.minimum}`)
    if (decl.maximum !== undefined && value > decl.maximum) problems.push(`is greater than the maximum ${decl.maximum}`)
  }
  return problems
}
