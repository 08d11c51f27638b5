/**
 * The flag and argument declarations commands make (`Flags.string({...})`, `Args.string({...})`),
 * in the shapes oclif's had, so a command file declares its flags as it always did. A declaration
 * is plain data: the build writes it into the command manifest (cli/manifest.ts) that help and
 * completion read without loading any command, and cli/parser.ts reads argv against it.
 */

/** A constraint between flags: `some` — at least one of `flags` must be given with this one. */
export interface Relationship {
  type: 'some' | 'all' | 'none'
  flags: string[]
}

/** What every flag may say of itself; FlagMeta (manifest.ts) carries the describing part of it. */
export interface Common {
  /** Set from the key of the flags object when the command is described or parsed. */
  name?: string
  char?: string
  description?: string
  summary?: string
  helpValue?: string
  hidden?: boolean
  required?: boolean
  /** Flags that may not be given with this one. */
  exclusive?: string[]
  /** Flags that must all be given with this one. */
  dependsOn?: string[]
  relationships?: Relationship[]
}

export interface BooleanFlagOptions extends Common {
  default?: boolean
  /** `--no-NAME` sets it false. */
  allowNo?: boolean
}

export interface StringFlagOptions extends Common {
  default?: string
  multiple?: boolean
  /** The values the flag accepts. */
  options?: readonly string[]
}

export interface IntegerFlagOptions extends Common {
  default?: number
  multiple?: boolean
  min?: number
  max?: number
}

/** A declared flag; V is the type the command reads from `flags.NAME` (a type only: never set). */
export type Flag<V = unknown> = (
  (BooleanFlagOptions & {type: 'boolean'}) | (StringFlagOptions & {type: 'option'; kind: 'string'}) | (IntegerFlagOptions & {type: 'option'; kind: 'integer'})
) & {
  readonly __value?: V
}

export type FlagDefinitions = Record<string, Flag>

/** What `this.parse` gives for a set of declarations: each flag's value as its declaration says. */
export type InferredFlags<T> = {[K in keyof T]: T[K] extends Flag<infer V> ? V : never}

/** Typed boolean, as oclif typed it, though a flag neither given nor defaulted is undefined: read it as true or not. */
export function boolean(options: BooleanFlagOptions = {}): Flag<boolean> {
  return {...options, type: 'boolean'}
}

export function string(options: StringFlagOptions & {multiple: true; required: true}): Flag<string[]>
export function string(options: StringFlagOptions & {multiple: true}): Flag<string[] | undefined>
export function string(options: StringFlagOptions & ({required: true} | {default: string})): Flag<string>
export function string(options?: StringFlagOptions): Flag<string | undefined>
export function string(options: StringFlagOptions = {}): Flag<unknown> {
  return {...options, type: 'option', kind: 'string'}
}

export function integer(options: IntegerFlagOptions & {multiple: true}): Flag<number[] | undefined>
export function integer(options: IntegerFlagOptions & ({required: true} | {default: number})): Flag<number>
export function integer(options?: IntegerFlagOptions): Flag<number | undefined>
export function integer(options: IntegerFlagOptions = {}): Flag<unknown> {
  return {...options, type: 'option', kind: 'integer'}
}

/** A positional argument; V as for flags. */
export interface Arg<V = unknown> {
  name?: string
  description?: string
  required?: boolean
  default?: string
  readonly __value?: V
}

export type ArgDefinitions = Record<string, Arg>

export type InferredArgs<T> = {[K in keyof T]: T[K] extends Arg<infer V> ? V : never}

export interface StringArgOptions {
  description?: string
  required?: boolean
  default?: string
}

export function stringArg(options: StringArgOptions & ({required: true} | {default: string})): Arg<string>
export function stringArg(options?: StringArgOptions): Arg<string | undefined>
export function stringArg(options: StringArgOptions = {}): Arg<unknown> {
  return {...options}
}
