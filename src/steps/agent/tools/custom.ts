/**
 * A tool the pipeline declares (its top-level `tools:` map; seed 004's symbol_lookup, seed 003's
 * registry): the model's arguments, checked against the tool's JSON Schema, fill an argv template
 * whose `${{ args.… }}` elements are pipe's expressions, each element exactly one argument. The
 * vector then goes the way every command goes (policy/exec.ts runCommand: allowed_commands, the
 * sandbox, the timeout that kills the process tree, the output cap): there is no second path.
 *
 * What a template cannot do for its author: tell an argument from an option. A value such as
 * `--output=/etc/x` stays one argument, but a program reads it as an option wherever it takes
 * options; so an argument built from an expression may not start with "-" unless the tool says
 * allow_leading_dash (put it after `--`, or after an option that takes it, such as `-e`).
 */
import type {ExprEvaluator} from '../../../expr/evaluate.js'
import type {SchemaRef} from '../../../expr/schema.js'
import type {ToolLevel} from '../../../policy/tools.js'
import {runCommand, type CapturedStream} from '../../../policy/exec.js'
import {checkCommand} from '../../../policy/rules.js'
import type {CustomTool} from '../../../types/pipeline.js'
import {stableText} from '../../../util/stable-text.js'
import {denied, failed, withError, type AgentTool, type ToolPlace} from './tool.js'

/** What the model reads of each stream by default, in bytes (head and tail kept). */
export const DEFAULT_TOOL_OUTPUT_BYTES = 8000
/** All of a built vector, in bytes: far below what the kernel takes (ARG_MAX), so a huge argument is refused, not an E2BIG. */
export const MAX_ARGV_BYTES = 65536

/** The argv a call's arguments give, or why they give none (nothing runs then). */
export type BuiltArgv = {ok: true; argv: string[]} | {ok: false; error: string}

function build(def: CustomTool, evaluator: ExprEvaluator, schemaRefOf: (s: unknown) => SchemaRef, args: Record<string, unknown>): BuiltArgv {
  const bound = evaluator.bind({}, {args: {value: args, schema: schemaRefOf(def.parameters)}})
  const argv: string[] = []
  let bytes = 0
  for (const [i, element] of def.argv.entries()) {
    if (!element.includes('${{')) {
      argv.push(element)
      continue
    }
    let value: unknown
    try {
      value = bound.render(element)
    } catch (error) {
      return {ok: false, error: `argv[${i}] ${element} could not be built from the arguments: ${(error as Error).message}; nothing was run`}
    }
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
      return {
        ok: false,
        error: `argv[${i}] ${element} gave ${value === null ? 'null' : Array.isArray(value) ? 'a list' : 'a map'}, not one argument; nothing was run`,
      }
    const text = String(value)
    if (text.startsWith('-') && def.allow_leading_dash !== true)
      return {
        ok: false,
        error: `argv[${i}] would be ${JSON.stringify(text.slice(0, 80))}, which starts with "-" and would be read as an option; this tool takes no options from its arguments; nothing was run`,
      }
    argv.push(text)
    bytes += Buffer.byteLength(text)
    if (bytes > MAX_ARGV_BYTES) return {ok: false, error: `the arguments make more than ${MAX_ARGV_BYTES} bytes of command line; nothing was run`}
  }
  return {ok: true, argv}
}

/** Head and tail of a stream, at most `limit` bytes of text in all, with what was left out said. */
function capped(stream: CapturedStream, limit: number): string {
  const whole = stream.omitted_bytes > 0 ? `${stream.head}\n[… ${stream.omitted_bytes} bytes omitted …]\n${stream.tail}` : stream.head + stream.tail
  if (Buffer.byteLength(whole) <= limit) return whole
  const half = Math.floor(limit / 2)
  const bytes = Buffer.from(whole)
  // Cut on bytes, then drop a character split at either cut.
  const head = bytes
    .subarray(0, half)
    .toString('utf8')
    .replace(/\uFFFD$/, '')
  const tail = bytes
    .subarray(bytes.length - half)
    .toString('utf8')
    .replace(/^\uFFFD/, '')
  return `${head}\n[… ${bytes.length - 2 * half} bytes omitted …]\n${tail}`
}

const RESULT = withError({
  type: 'object',
  required: ['argv', 'exit_code', 'stdout', 'stderr'],
  properties: {
    argv: {type: 'array', items: {type: 'string'}},
    exit_code: {type: ['integer', 'null']},
    stdout: {type: 'string'},
    stderr: {type: 'string'},
    timed_out: {type: 'boolean'},
  },
})

/**
 * The agent tools a pipeline declares, by name. The expression evaluator (cel-js) is loaded here,
 * when a step offers one, so no other command pays for it.
 */
export async function customTools(declared: Readonly<Record<string, CustomTool | undefined>>, names: readonly string[]): Promise<Map<string, AgentTool>> {
  const out = new Map<string, AgentTool>()
  const wanted = names.filter((n) => declared[n] !== undefined)
  if (wanted.length === 0) return out
  const [{ExprEvaluator}, {schemaRef}, regex] = await Promise.all([
    import('../../../expr/evaluate.js'),
    import('../../../expr/schema.js'),
    import('../../../expr/regex.js'),
  ])
  const evaluator = new ExprEvaluator({})
  for (const name of wanted) {
    const def = declared[name]!
    if (regex.mayUseRegex(JSON.stringify(def.argv))) await regex.loadRegexEngine()
    out.set(
      name,
      customTool(name, def, (args) => build(def, evaluator, (s) => schemaRef(s as Record<string, unknown>), args)),
    )
  }
  return out
}

function customTool(name: string, def: CustomTool, argvOf: (args: Record<string, unknown>) => BuiltArgv): AgentTool {
  const level: ToolLevel = def.level ?? 'dangerous'
  const limit = def.max_output_bytes ?? DEFAULT_TOOL_OUTPUT_BYTES
  return {
    name,
    description: def.description,
    parameters: def.parameters,
    resultSchema: RESULT,
    level,
    // A tool declared safe is a read (its results are cached within the step); any other may change the repository.
    mutates: level !== 'safe',
    plan: (args) => argvOf(args),
    async run(args, place: ToolPlace) {
      const built = argvOf(args)
      if (!built.ok) return failed(built.error)
      const verdict = checkCommand(place.policy, built.argv, {root: place.root})
      if (!verdict.allowed) {
        const why = `${JSON.stringify(built.argv)} is not allowed (${verdict.rule}): ${verdict.reason}; nothing was run`
        return {ok: false, denied: true, result: {error: why}, summary: `denied: ${why}`}
      }
      const policyTimeout = place.policy.policy.resource_limits.command_timeout_ms ?? 300000
      try {
        const result = await runCommand(place.policy, place.root, {
          argv: built.argv,
          signal: place.signal,
          slotsDir: place.slotsDir,
          timeoutMs: Math.min(def.timeout_ms ?? policyTimeout, policyTimeout),
        })
        // What the model reads is stable (no folder, timing or clock): a recorded conversation replays anywhere.
        return {
          ok: result.exit_code === 0,
          result: {
            argv: built.argv,
            exit_code: result.exit_code,
            stdout: stableText(capped(result.stdout, limit), place.root),
            stderr: stableText(result.spawn_error ?? capped(result.stderr, limit), place.root),
            ...(result.timed_out ? {timed_out: true} : {}),
          },
          summary: `${built.argv.join(' ')} ${result.timed_out ? 'timed out' : `exited ${result.exit_code ?? 'by a signal'}`}`,
          commands: [result],
        }
      } catch (error) {
        return denied(error) ?? failed((error as Error).message)
      }
    },
  }
}
