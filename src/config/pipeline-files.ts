/**
 * Files a pipeline names (prompts, output schemas, edit blocks) must lie inside the pipeline's
 * directory: a pipeline is shared and reviewed as a tree, so `../../etc/passwd`, an absolute path
 * or a symlink pointing out of that tree must never be read into a prompt or applied as an edit.
 * `pipe validate` reports the same check the steps apply again before reading.
 */
import {contain} from '../util/contain.js'

/** The step fields that name a file relative to the pipeline. */
export const PIPELINE_FILE_FIELDS = ['prompt', 'output_schema', 'blocks_file'] as const

/**
 * Why `name` may not be read as a file of the pipeline in `dir`, or undefined when it may. A file
 * that does not exist yet is judged by the directories above it that do; the existence check is another rule's.
 */
export function fileEscape(dir: string, name: string): string | undefined {
  const {escape, resolved} = contain(dir, name)
  switch (escape) {
    case 'absolute':
      return "is an absolute path; name it relative to the pipeline's directory"
    case 'leaves':
      return "leaves the pipeline's directory"
    case 'symlink':
      return `resolves through a symlink to ${resolved}, outside the pipeline's directory`
    default:
      return undefined
  }
}
