/**
 * Files a pipeline names (prompts, output schemas, edit blocks) must lie inside the pipeline's
 * directory: a pipeline is shared and reviewed as a tree, so `../../etc/passwd`, an absolute path
 * or a symlink pointing out of that tree must never be read into a prompt or applied as an edit.
 * `pipe validate` reports the same check the steps apply again before reading.
 */
import {realpathSync} from 'node:fs'
import path from 'node:path'

/** The step fields that name a file relative to the pipeline. */
export const PIPELINE_FILE_FIELDS = ['prompt', 'output_schema', 'blocks_file'] as const

function outside(rel: string): boolean {
  return rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)
}

/**
 * Why `name` may not be read as a file of the pipeline in `dir`, or undefined when it may. A file
 * that does not exist yet is judged by its path alone; the existence check is another rule's.
 */
export function fileEscape(dir: string, name: string): string | undefined {
  if (path.isAbsolute(name)) return "is an absolute path; name it relative to the pipeline's directory"
  const full = path.resolve(dir, name)
  if (outside(path.relative(dir, full))) return "leaves the pipeline's directory"
  let real: string
  let realDir: string
  try {
    realDir = realpathSync(dir)
    real = realpathSync(full)
  } catch {
    return undefined
  }
  if (outside(path.relative(realDir, real))) return `resolves through a symlink to ${real}, outside the pipeline's directory`
  return undefined
}
