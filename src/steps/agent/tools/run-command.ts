/**
 * run_command: a command line without a shell, each `&&`/`||`/`;` segment allowed by the policy
 * before anything runs, answered with each segment's exit code and the tail of its output.
 */
import {runCommand, type CommandResult} from '../../../policy/exec.js'
import {checkCommand} from '../../../policy/rules.js'
import {splitCommandLine, type Segment} from '../../../policy/shell-line.js'
import {stableText} from '../../../util/stable-text.js'
import {denied, failed, withError, type AgentTool, type ToolPlace} from './tool.js'

/** The argv segments of a run_command call, or why it cannot run (nothing runs unless every segment is allowed). */
export function commandSegments(
  args: Record<string, unknown>,
  place: Pick<ToolPlace, 'policy' | 'root'>,
): {ok: true; segments: Segment[]} | {ok: false; error: string; denied: boolean} {
  const split = splitCommandLine(args['command'] as string)
  if (!split.ok) return {ok: false, error: split.error, denied: false}
  for (const [i, segment] of split.segments.entries()) {
    if (segment.after === '|')
      return {
        ok: false,
        error: `pipes (|) are not run: run_command runs each command on its own; run ${JSON.stringify(segment.argv)} separately`,
        denied: false,
      }
    const verdict = checkCommand(place.policy, segment.argv, {root: place.root})
    if (!verdict.allowed)
      return {
        ok: false,
        error: `segment ${i + 1} ${JSON.stringify(segment.argv)} is not allowed (${verdict.rule}): ${verdict.reason}; nothing was run`,
        denied: true,
      }
  }
  return {ok: true, segments: split.segments}
}

function tail(stream: CommandResult['stdout']): string {
  const text = stream.omitted_bytes > 0 ? `${stream.head}\n[… ${stream.omitted_bytes} bytes omitted …]\n${stream.tail}` : stream.head + stream.tail
  return text.length > 8000 ? `[…]${text.slice(-8000)}` : text
}

export const runCommandTool: AgentTool = {
  name: 'run_command',
  description:
    "Run a command in the repository root, without a shell: argv words, quotes honoured, segments joined by && || ; (each must be allowed by the policy); no variables, globs, redirections or pipes. Answers each segment's exit code and output.",
  parameters: {type: 'object', additionalProperties: false, required: ['command'], properties: {command: {type: 'string', minLength: 1, maxLength: 4000}}},
  resultSchema: withError({
    type: 'object',
    required: ['segments'],
    properties: {
      segments: {
        type: 'array',
        items: {
          type: 'object',
          required: ['argv', 'ran'],
          properties: {
            argv: {type: 'array'},
            ran: {type: 'boolean'},
            exit_code: {type: ['integer', 'null']},
            stdout: {type: 'string'},
            stderr: {type: 'string'},
            timed_out: {type: 'boolean'},
          },
        },
      },
      exit_code: {type: ['integer', 'null']},
    },
  }),
  mutates: true,
  async run(args, place) {
    const planned = commandSegments(args, place)
    if (!planned.ok) return {ok: false, ...(planned.denied ? {denied: true} : {}), result: {error: planned.error}, summary: planned.error}
    const out: Array<Record<string, unknown>> = []
    const commands: CommandResult[] = []
    let last: number | null = 0
    for (const segment of planned.segments) {
      const run = segment.after === undefined || segment.after === ';' || (segment.after === '&&' ? last === 0 : last !== 0)
      if (!run) {
        out.push({argv: segment.argv, ran: false})
        continue
      }
      try {
        const result = await runCommand(place.policy, place.root, {argv: segment.argv, signal: place.signal, slotsDir: place.slotsDir})
        commands.push(result)
        last = result.exit_code
        // What the model reads is stable (no folder, timing or clock: a recorded conversation replays anywhere); `commands` keeps the raw output.
        out.push({
          argv: segment.argv,
          ran: true,
          exit_code: result.exit_code,
          stdout: stableText(tail(result.stdout), place.root),
          stderr: stableText(result.spawn_error ?? tail(result.stderr), place.root),
          ...(result.timed_out ? {timed_out: true} : {}),
        })
      } catch (error) {
        return denied(error) ?? failed((error as Error).message)
      }
    }
    const ran = out.filter((s) => s.ran === true)
    return {
      ok: last === 0,
      result: {segments: out, exit_code: last},
      summary: `${ran.map((s) => (s.argv as string[]).join(' ')).join(' ; ')} exited ${last ?? 'by a signal'}`,
      commands,
    }
  },
}
