/**
 * Reading a file store's folders as kept, for what copies or moves records whole (pipe store copy,
 * pipe store archive): a missing folder or file is nothing, not an error.
 */
import {existsSync, readdirSync, readFileSync} from 'node:fs'

/** The names in a folder; none when it is not there. */
export const list = (dir: string): string[] => {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

/** A file's text, or null when it is not there. */
export const text = (file: string): string | null => (existsSync(file) ? readFileSync(file, 'utf8') : null)

/** Complete lines of a log (a torn last line, a crash mid-append, is no line). */
export const lines = (body: string | null): string[] =>
  (body ?? '')
    .slice(0, (body ?? '').lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l.trim() !== '')
