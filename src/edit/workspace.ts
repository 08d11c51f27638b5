/**
 * Applying planned file changes inside the repository root under the policy: every path checked
 * first (sandbox, symlinks, forbidden globs), the patch size checked, then all files written, and
 * on any write failure the files already written are put back.
 */
import {readFile, unlink} from '../util/fs-async.js'
import {existsSync, readFileSync, statSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import type {LoadedPolicy} from '../policy/policy.js'
import {assertPath} from '../policy/rules.js'
import {realish} from '../util/contain.js'
import {inHeldDir, removeHeld, writeHeld} from '../util/held-dir.js'
import {sha256} from '../util/hash.js'
import {parseBlocks} from './blocks.js'
import {lineDiff, planEdits, type BlockFailure, type FileChange, type LineDiff} from './apply.js'

export const MAX_EDIT_FILE_BYTES = 5 * 1024 * 1024

export interface AppliedFile {
  path: string
  created: boolean
  before_sha256: string | null
  after_sha256: string
  /** Lines removed plus lines added, by a real line diff (not the size of the blocks). */
  changed_lines: number
  /** Unified diff in git's format (`git apply` accepts it); `pipe export` writes them to patch.diff. */
  diff: string
  /** SEARCH/REPLACE blocks that undo the change, applied in order. */
  reverse: Array<{search: string; replace: string}>
}

export interface EditResult {
  files: AppliedFile[]
  changed_lines: number
}

function readInside(policy: LoadedPolicy, root: string, file: string): string | null {
  const target = assertPath(policy, root, file).resolved
  if (!existsSync(target)) return null
  const info = statSync(target)
  if (!info.isFile())
    throw new PipeError('E_INVALID_ARGS', `edit target ${file} is not a regular file`, {
      hint: 'Edit blocks change text files; point the block at a file, not a directory or device.',
    })
  if (info.size > MAX_EDIT_FILE_BYTES)
    throw new PipeError('E_INVALID_ARGS', `edit target ${file} is ${info.size} bytes; the limit is ${MAX_EDIT_FILE_BYTES}`, {
      hint: 'Large files are out of reach of edit blocks; change them with a command step.',
    })
  const bytes = readFileSync(target)
  if (bytes.includes(0)) throw new PipeError('E_INVALID_ARGS', `edit target ${file} is binary`, {hint: 'Edit blocks change text files only.'})
  return bytes.toString('utf8')
}

export class EditFailed extends PipeError {
  constructor(readonly failures: BlockFailure[]) {
    super(
      'E_CONFLICT',
      `${failures.length} edit block(s) did not apply; no file was changed: ${failures.map((f) => `block ${f.block} (${f.path}): ${f.reason}`).join('; ')}`,
      {
        hint: 'The snapshot shows, for each failed block, the nearest lines the file really has; fix the SEARCH text to match them.',
        details: {failures},
      },
    )
  }
}

/**
 * Writes the changes by the paths the policy resolved (a link that stays inside the repository was
 * followed when checked), each folder below the root held while its file is written (util/held-dir.ts):
 * a command that swaps a folder for a link meanwhile cannot carry the write out of the repository.
 */
async function writeAll(policy: LoadedPolicy, root: string, changes: FileChange[]): Promise<void> {
  const realRoot = realish(path.resolve(root))
  const written: FileChange[] = []
  try {
    for (const change of changes) {
      await writeHeld(realRoot, assertPath(policy, root, change.path).relative, change.after)
      written.push(change)
    }
  } catch (error) {
    for (const change of written.reverse()) {
      const relative = assertPath(policy, root, change.path).relative
      if (change.before === null) await removeHeld(realRoot, relative).catch(() => undefined)
      else await writeHeld(realRoot, relative, change.before).catch(() => undefined)
    }
    throw error
  }
}

/** Lines a unified diff removes plus lines it adds (its file headers not counted). */
export function diffLines(patch: string): number {
  // Counted inside hunks only: there an added "++x" is "+++x", which outside them would be a file header.
  let inHunk = false
  let n = 0
  for (const line of patch.split('\n')) {
    if (line.startsWith('@@')) inHunk = true
    else if (line.startsWith('diff ')) inHunk = false
    else if (inHunk && (line.startsWith('+') || line.startsWith('-'))) n++
  }
  return n
}

/**
 * What max_patch_lines bounds besides the edit itself: the lines the task's earlier edits already
 * changed (seed 004: the limit is the task's, not a call's), and how to name them in a refusal.
 */
export interface PatchBudget {
  /** Lines already changed by the edits counted with this one. */
  used: number
  /** Where they were changed, for the refusal: "in this task (20 in this attempt)". */
  where: string
}

/** Applies the blocks in `text` to files under `root`: all of them, or (on any failure) none. */
export async function applyEditText(policy: LoadedPolicy, root: string, text: string, budget?: PatchBudget): Promise<EditResult> {
  const blocks = parseBlocks(text)
  // Check every path before reading anything.
  for (const block of blocks) assertPath(policy, root, block.path)
  const plan = planEdits(blocks, (file) => readInside(policy, root, file))
  if (plan.failures.length > 0) throw new EditFailed(plan.failures)
  const limit = policy.policy.max_patch_lines
  const used = budget?.used ?? 0
  const diffs: LineDiff[] = []
  let changed = 0
  for (const change of plan.changes) {
    const diff = await lineDiff(change, limit)
    changed = diff === undefined ? Number.POSITIVE_INFINITY : changed + diff.changed_lines
    if (used + changed > limit) {
      const counted = Number.isFinite(changed) ? `${changed} lines` : `more than ${limit} lines (${change.path} alone)`
      const total =
        budget && used > 0
          ? `; with the ${used} already changed ${budget.where} that is ${Number.isFinite(changed) ? used + changed : `more than ${limit}`}`
          : ''
      throw new PipeError('E_POLICY_DENIED', `the edit changes ${counted}${total}; the policy allows ${limit} (max_patch_lines)`, {
        hint: budget
          ? 'Change fewer lines (keep to what the task needs), or raise max_patch_lines in the policy.'
          : 'Split the edit into smaller steps, or raise max_patch_lines in the policy.',
        details: {rule: 'max_patch_lines', ...(Number.isFinite(changed) ? {changed_lines: changed} : {}), ...(budget ? {already_changed: used} : {})},
      })
    }
    diffs.push(diff!)
  }
  await writeAll(policy, root, plan.changes)
  return {
    changed_lines: changed,
    files: plan.changes.map((c, i) => ({
      path: c.path,
      created: c.before === null,
      before_sha256: c.before === null ? null : sha256(c.before),
      after_sha256: sha256(c.after),
      changed_lines: diffs[i]!.changed_lines,
      diff: diffs[i]!.diff,
      reverse: c.reverse,
    })),
  }
}

/** Undoes an applied edit, if every file is still as the edit left it. */
export async function revertEdit(policy: LoadedPolicy, root: string, files: AppliedFile[]): Promise<Array<{path: string; restored: 'deleted' | 'reverted'}>> {
  const realRoot = realish(path.resolve(root))
  const plans: Array<{file: AppliedFile; relative: string; content: string | null}> = []
  for (const file of files) {
    const {resolved: target, relative} = assertPath(policy, root, file.path)
    const current = await readFile(target, 'utf8').catch(() => null)
    if (current === null || sha256(current) !== file.after_sha256) {
      throw new PipeError('E_CONFLICT', `${file.path} changed since the edit was applied; it cannot be undone safely`, {
        hint: 'Restore it by hand, or with git (a git checkpoint step records commits to return to).',
      })
    }
    if (file.created) {
      plans.push({file, relative, content: null})
      continue
    }
    let text = current.replace(/\n$/, '')
    for (const block of file.reverse) {
      const index = text.indexOf(block.search)
      if (index === -1)
        throw new PipeError('E_CONFLICT', `the reverse patch of ${file.path} does not apply`, {
          hint: 'Restore it by hand, or with git (a git checkpoint step records commits to return to).',
        })
      text = `${text.slice(0, index)}${block.replace}${text.slice(index + block.search.length)}`
    }
    const restored = current.endsWith('\n') && text !== '' ? `${text}\n` : text
    if (sha256(restored) !== file.before_sha256)
      throw new PipeError('E_CONFLICT', `undoing the edit of ${file.path} does not give back the original content`, {
        hint: 'Nothing was changed; restore it by hand, or with git.',
      })
    plans.push({file, relative, content: restored})
  }
  const done: Array<{path: string; restored: 'deleted' | 'reverted'}> = []
  for (const plan of plans) {
    if (plan.content === null) {
      await inHeldDir(realRoot, plan.relative, {create: false}, (dir, name) => unlink(dir.entry(name)))
      done.push({path: plan.file.path, restored: 'deleted'})
    } else {
      await writeHeld(realRoot, plan.relative, plan.content)
      done.push({path: plan.file.path, restored: 'reverted'})
    }
  }
  return done
}
