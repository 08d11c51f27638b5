/**
 * argv against a command's declarations (cli/flags.ts): `--name value`, `--name=value`, `-c value`,
 * `-cvalue`, `--no-name` (allowNo), repeated flags, `--` ending the flags, and the checks between
 * flags. Its rules are oclif's, which pipe's commands were written against: a flag's value may start
 * with `-` unless it is one of the command's flags, a value after a repeatable flag belongs to it
 * until the next flag, an unknown flag is an error (after `--` it is a word), and a command that is
 * not strict takes any number of words. Every
 * mistake is an E_INVALID_ARGS whose hint names the command's help.
 */
import {PipeError} from '../errors.js'
import type {ArgDefinitions, Flag, FlagDefinitions} from './flags.js'

export interface ParseInput {
  /** The command's id in words (`runs list`), for the hint. */
  command: string
  flags: FlagDefinitions
  args: ArgDefinitions
  strict: boolean
}

export interface Parsed {
  flags: Record<string, unknown>
  args: Record<string, string | undefined>
  /** The positional words, the declared arguments' first. */
  argv: string[]
}

export function usageError(command: string, message: string): PipeError {
  return new PipeError('E_INVALID_ARGS', message, {hint: `Run pipe ${command} --help for usage.`.replace(/ +/g, ' ')})
}

/** Parses `argv` (the words after the command's id) against the declarations. */
export function parseArgv(argv: readonly string[], input: ParseInput): Parsed {
  const fail = (message: string): never => {
    throw usageError(input.command, message)
  }
  const byName = new Map(Object.entries(input.flags))
  const byChar = new Map([...byName].filter(([, f]) => f.char !== undefined).map(([name, f]) => [f.char!, name]))
  /** The flag a word names (`--name`, `--no-name`, `-c`), with whether it was negated. */
  const flagOf = (word: string): {name: string; negated: boolean} | undefined => {
    if (word.startsWith('--')) {
      const name = word.slice(2)
      if (byName.has(name)) return {name, negated: false}
      const positive = name.startsWith('no-') ? name.slice(3) : undefined
      const flag = positive === undefined ? undefined : byName.get(positive)
      return flag?.type === 'boolean' && flag.allowNo ? {name: positive!, negated: true} : undefined
    }
    const name = word.length >= 2 && word[0] === '-' ? byChar.get(word[1]!) : undefined
    return name === undefined ? undefined : {name, negated: false}
  }
  const given = new Map<string, unknown[]>()
  const words: string[] = []
  const unknown: string[] = []
  let repeatable: string | undefined
  const rest = [...argv]
  while (rest.length > 0) {
    const word = rest.shift()!
    if (word === '--') {
      words.push(...rest)
      break
    }
    if (word.startsWith('-') && word !== '-') {
      repeatable = undefined
      const eq = word.startsWith('--') ? word.indexOf('=') : -1
      const found = flagOf(eq === -1 ? word : word.slice(0, eq))
      if (found === undefined) {
        if (isNegativeNumber(word)) {
          words.push(word)
          continue
        }
        unknown.push(word)
        continue
      }
      const flag = input.flags[found.name]!
      const values = given.get(found.name) ?? []
      if (flag.type === 'boolean') {
        if (eq !== -1) fail(`--${found.name} takes no value`)
        // -ab: the rest of the letters are flags of their own.
        if (!word.startsWith('--') && word.length > 2) rest.unshift(`-${word.slice(2)}`)
        given.set(found.name, [...values, !found.negated])
        continue
      }
      if (values.length > 0 && !flag.multiple) fail(`--${found.name} can only be given once`)
      const value = eq !== -1 ? word.slice(eq + 1) : word.startsWith('--') || word.length === 2 ? rest.shift() : word.slice(word[2] === '=' ? 3 : 2)
      // A flag's value may start with -, but a word that is one of the command's flags is no value.
      if (value === undefined || (eq === -1 && value !== '-' && value.startsWith('-') && flagOf(value.split('=')[0]!) !== undefined))
        fail(
          flag.kind === 'string' && flag.options
            ? `--${found.name} expects one of these values: ${flag.options.join(', ')}`
            : `--${found.name} expects a value`,
        )
      given.set(found.name, [...values, valueOf(found.name, flag, value!, fail)])
      if (flag.multiple) repeatable = found.name
      continue
    }
    if (repeatable !== undefined) {
      const flag = input.flags[repeatable]!
      given.get(repeatable)!.push(valueOf(repeatable, flag, word, fail))
      continue
    }
    words.push(word)
  }
  if (unknown.length > 0) fail(`Nonexistent flag${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`)
  const flags = flagValues(input, given, fail)
  const args: Record<string, string | undefined> = {}
  const names = Object.keys(input.args)
  const missing: string[] = []
  names.forEach((name, i) => {
    const arg = input.args[name]!
    const value = words[i] ?? arg.default
    if (value === undefined && arg.required) missing.push(`${name}${arg.description ? ` — ${arg.description}` : ''}`)
    args[name] = value
  })
  if (missing.length > 0) fail(`Missing ${missing.length} required arg${missing.length > 1 ? 's' : ''}: ${missing.join('; ')}`)
  if (input.strict && words.length > names.length)
    fail(`Unexpected argument${words.length - names.length > 1 ? 's' : ''}: ${words.slice(names.length).join(', ')}`)
  return {flags, args, argv: words}
}

function isNegativeNumber(word: string): boolean {
  return /^-\d+(\.\d+)?$/.test(word)
}

function valueOf(name: string, flag: Flag, value: string, fail: (message: string) => never): unknown {
  if (flag.type === 'boolean') return true
  if (flag.kind === 'integer') {
    if (!/^-?\d+$/.test(value)) fail(`Expected an integer but received: ${value} (--${name})`)
    const n = Number.parseInt(value, 10)
    if (flag.min !== undefined && n < flag.min) fail(`Expected an integer greater than or equal to ${flag.min} but received: ${value} (--${name})`)
    if (flag.max !== undefined && n > flag.max) fail(`Expected an integer less than or equal to ${flag.max} but received: ${value} (--${name})`)
    return n
  }
  if (flag.options && !flag.options.includes(value)) fail(`Expected --${name}=${value} to be one of: ${flag.options.join(', ')}`)
  return value
}

/** Each flag's value (its default when not given), after the checks between flags. */
function flagValues(input: ParseInput, given: Map<string, unknown[]>, fail: (message: string) => never): Record<string, unknown> {
  const flags: Record<string, unknown> = {}
  for (const [name, flag] of Object.entries(input.flags)) {
    const values = given.get(name)
    if (values === undefined) {
      if (flag.required) fail(`Missing required flag --${name}`)
      if (flag.default !== undefined) flags[name] = flag.type === 'option' && flag.multiple ? [flag.default] : flag.default
      continue
    }
    flags[name] = flag.type === 'option' && flag.multiple ? values : values[values.length - 1]
  }
  const has = (name: string): boolean => given.has(name)
  for (const name of given.keys()) {
    const flag = input.flags[name]!
    for (const other of flag.exclusive ?? []) if (has(other)) fail(`--${name} cannot also be given with --${other}`)
    const absent = (flag.dependsOn ?? []).filter((other) => !has(other))
    if (absent.length > 0) fail(`--${name} needs ${absent.map((f) => `--${f}`).join(' and ')}`)
    for (const relation of flag.relationships ?? []) {
      const present = relation.flags.filter(has)
      if (relation.type === 'some' && present.length === 0) fail(`--${name} needs one of ${relation.flags.map((f) => `--${f}`).join(', ')}`)
      if (relation.type === 'all' && present.length < relation.flags.length) fail(`--${name} needs ${relation.flags.map((f) => `--${f}`).join(' and ')}`)
      if (relation.type === 'none' && present.length > 0) fail(`--${name} cannot also be given with --${present[0]}`)
    }
  }
  return flags
}
