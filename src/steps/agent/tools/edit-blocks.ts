/**
 * apply_edit_blocks: SEARCH/REPLACE blocks applied all or none, inside the task's edit scope, and
 * rolled back when the policy's syntax checker fails on a changed file (or cannot start).
 */
import {realpathSync} from 'node:fs'
import path from 'node:path'
import {parseBlocks} from '../../../edit/blocks.js'
import {applyEditText, EditFailed, revertEdit, type EditResult} from '../../../edit/workspace.js'
import {PipeError} from '../../../errors.js'
import {runCommand, type CommandResult} from '../../../policy/exec.js'
import {globMatches, ignoresCase} from '../../../policy/glob.js'
import {assertPath} from '../../../policy/rules.js'
import {redact} from '../../../util/redact.js'
import {denied, failed, withError, type AgentTool, type ToolPlace} from './tool.js'

/**
 * Runs the policy's syntax checker for each changed file that has one; the first failure's output,
 * or null. A checker that cannot start at all (the allow-list refuses it, the policy requires a
 * sandbox that is missing) gives the error that stopped it.
 */
async function syntaxCheck(files: string[], place: ToolPlace): Promise<{file: string; argv: string[]; output: string; unstarted?: PipeError} | null> {
  const checks = place.policy.policy.syntax_checks ?? {}
  for (const file of files) {
    const pattern = checks[path.extname(file)]
    if (!pattern) continue
    const argv = pattern.map((a) => (a === '{path}' ? file : a))
    let result: CommandResult
    try {
      result = await runCommand(place.policy, place.root, {argv, signal: place.signal, slotsDir: place.slotsDir})
    } catch (error) {
      const unstarted = error instanceof PipeError ? error : new PipeError('E_IO', `could not run ${JSON.stringify(argv)}: ${(error as Error).message}`)
      return {file, argv, output: unstarted.message, unstarted}
    }
    if (result.exit_code !== 0) {
      const output = `${result.stdout.head}${result.stdout.tail}${result.stderr.head}${result.stderr.tail}`.slice(-4000)
      return {file, argv, output: result.spawn_error ?? (result.timed_out ? 'the checker timed out' : output)}
    }
  }
  return null
}

/**
 * Why the blocks may not be applied under the step's edit scope (the first file outside it), or
 * null. Paths are judged as the edit would write them: resolved inside the root, links followed.
 */
function outsideScope(blocks: string, place: ToolPlace): string | null {
  const scope = place.edits
  if (!scope || (scope.files_touched === undefined && scope.forbidden_paths === undefined)) return null
  let paths: string[]
  try {
    paths = [...new Set(parseBlocks(blocks).map((b) => b.path))]
  } catch {
    // Malformed blocks: the edit itself says what is wrong with them.
    return null
  }
  for (const given of paths) {
    const {relative} = assertPath(place.policy, place.root, given)
    const shown = relative === given ? given : `${given} (${relative})`
    // A forbidden path errs towards refusing (case folded where the file system folds it); an allowed one must match as written.
    const nocase = ignoresCase(realRootOf(place.root))
    const forbidden = (scope.forbidden_paths ?? []).find((glob) => globMatches(glob, relative, {nocase}))
    if (forbidden !== undefined)
      return `this task may not change ${shown}: it matches "${forbidden}" in the task's constraints.forbidden_paths; nothing was applied`
    const allowed = scope.files_touched
    if (allowed !== undefined && !allowed.some((glob) => globMatches(glob, relative))) {
      const list = allowed.length === 0 ? 'no file' : allowed.join(', ')
      return `this task may change only ${list} (its files_touched), not ${shown}; nothing was applied. Change the files the task allows, or give up and say why the task needs ${relative}`
    }
  }
  return null
}

function realRootOf(root: string): string {
  try {
    return realpathSync(root)
  } catch {
    return root
  }
}

export const applyEditBlocks: AgentTool = {
  name: 'apply_edit_blocks',
  description: [
    'Edit files of the repository with SEARCH/REPLACE blocks, all or none. Each block is: the file path on its own line, then',
    '<<<<<<< SEARCH',
    'the exact lines to find',
    '=======',
    'the lines to put instead',
    '>>>>>>> REPLACE',
    'An empty SEARCH creates a new file. On a failed match you get the nearest lines the file really has; a configured syntax checker that fails rolls the edit back.',
  ].join('\n'),
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['blocks'],
    properties: {blocks: {type: 'string', minLength: 1, description: 'One or more SEARCH/REPLACE blocks'}},
  },
  resultSchema: withError({
    type: 'object',
    required: ['applied'],
    properties: {
      applied: {type: 'boolean'},
      files: {type: 'array', items: {type: 'object'}},
      changed_lines: {type: 'integer'},
      failures: {type: 'array'},
      syntax_check: {type: 'object'},
      rolled_back: {type: 'boolean'},
    },
  }),
  mutates: true,
  async run(args, place) {
    let edit: EditResult
    try {
      const outside = outsideScope(args['blocks'] as string, place)
      if (outside !== null) return {ok: false, denied: true, result: {error: outside}, summary: `refused: ${outside}`}
      const lines = place.patchLines
      const budget = lines
        ? {used: lines.task, where: `in this task (attempts of step ${lines.step} in this run; ${lines.attempt} in this attempt)`}
        : undefined
      edit = await applyEditText(place.policy, place.root, args['blocks'] as string, budget)
    } catch (error) {
      if (error instanceof EditFailed) {
        return {
          ok: false,
          result: {applied: false, failures: error.failures},
          summary: `no block applied: ${error.failures.map((f) => `block ${f.block} (${f.path}): ${f.reason}`).join('; ')}`,
        }
      }
      return denied(error) ?? failed((error as Error).message)
    }
    const files = edit.files.map((f) => f.path)
    const bad = await syntaxCheck(files, place)
    if (bad?.unstarted) {
      // Nothing vouched for the edit: it does not stay on disk. A configuration the model cannot
      // change (the allow-list, the sandbox) fails the step rather than every later edit.
      const cause = bad.unstarted
      const check = {file: bad.file, argv: bad.argv, started: false, error: redact(cause.message)}
      let undone: Awaited<ReturnType<typeof revertEdit>>
      try {
        undone = await revertEdit(place.policy, place.root, edit.files)
      } catch (error) {
        throw new PipeError(
          'E_CONFLICT',
          `the syntax check ${JSON.stringify(bad.argv)} of ${bad.file} could not start (${redact(cause.message)}), and the unchecked edit could not be rolled back: ${(error as Error).message}`,
          {
            hint: `Restore ${files.join(', ')} by hand or with git; the snapshot's details hold the diff.`,
            details: {rule: 'syntax_checks', syntax_check: check, left_on_disk: files, patch: edit.files.map((f) => f.diff).join('')},
          },
        )
      }
      throw new PipeError(
        cause.code,
        `the syntax check ${JSON.stringify(bad.argv)} of ${bad.file} could not start: ${redact(cause.message)}; the unchecked edit was rolled back (${undone.map((u) => `${u.path} ${u.restored}`).join(', ')})`,
        {
          hint: `${cause.hint ? `${cause.hint} ` : ''}Every syntax_checks entry must be a command the policy lets run (pipe policy check says which is not).`,
          details: {rule: 'syntax_checks', syntax_check: check, rolled_back: undone},
        },
      )
    }
    if (bad) {
      await revertEdit(place.policy, place.root, edit.files)
      return {
        ok: false,
        result: {applied: false, rolled_back: true, syntax_check: {file: bad.file, argv: bad.argv, output: redact(bad.output)}},
        summary: `the syntax check ${bad.argv.join(' ')} failed on ${bad.file}; the edit was rolled back`,
      }
    }
    return {
      ok: true,
      result: {
        applied: true,
        changed_lines: edit.changed_lines,
        files: edit.files.map((f) => ({path: f.path, created: f.created, changed_lines: f.changed_lines})),
      },
      summary: `edited ${files.join(', ')} (${edit.changed_lines} line(s)${place.patchLines ? `; ${place.patchLines.attempt + edit.changed_lines} in this attempt, ${place.patchLines.task + edit.changed_lines} in this task` : ''})`,
      files_changed: files,
      patch: edit.files.map((f) => f.diff).join(''),
      edit,
    }
  },
}
