/**
 * Reading a file store's folders as kept, for what copies or moves records whole (pipe store copy,
 * pipe store archive): a missing folder or file is nothing, not an error.
 */
import {existsSync, lstatSync, readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'

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

/** Every file under `dir`, by path relative to `base`, sorted. */
function files(base: string, dir: string): string[] {
  const out: string[] = []
  for (const entry of list(dir).sort()) {
    const full = path.join(dir, entry)
    // Never through a link: an archive holds what the store wrote, nothing it points at.
    const st = lstatSync(full, {throwIfNoEntry: false})
    if (st?.isDirectory()) out.push(...files(base, full))
    else if (st?.isFile()) out.push(path.relative(base, full).split(path.sep).join('/'))
  }
  return out
}

/** A run's live artifacts under `artifactsDir` (the store's artifacts/runs), each by its path relative to that folder. */
export const artifactFiles = (artifactsDir: string, runId: string): Array<{path: string; bytes: Uint8Array}> =>
  files(artifactsDir, path.join(artifactsDir, runId)).map((rel) => ({path: rel, bytes: readFileSync(path.join(artifactsDir, rel))}))
