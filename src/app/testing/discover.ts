/** Which test files `pipe test` runs: the files given, the test files below the directories given, or below the working directory. */
import path from 'node:path'
import {TEST_FILE_SUFFIX} from '../../config/test-file.js'
import {PipeError} from '../../errors.js'
import {compareText} from '../../util/order.js'
import {readdir, stat} from '../../util/fs-async.js'

/** Directories never searched: dependencies and dot-directories (.git, .pipe stores). */
function skipped(name: string): boolean {
  return name === 'node_modules' || name.startsWith('.')
}

async function walk(dir: string, out: string[]): Promise<void> {
  const entries = await readdir(dir, {withFileTypes: true})
  for (const entry of entries.sort((a, b) => compareText(a.name, b.name))) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) {
      if (!skipped(entry.name)) await walk(full, out)
    } else if (entry.isFile() && entry.name.endsWith(TEST_FILE_SUFFIX)) out.push(full)
  }
}

/** Absolute paths of the test files, each once, in a stable order. */
export async function discoverTestFiles(args: readonly string[], cwd: string): Promise<string[]> {
  const out: string[] = []
  for (const arg of args.length > 0 ? args : ['.']) {
    const full = path.resolve(cwd, arg)
    const info = await stat(full).catch(() => null)
    if (!info)
      throw new PipeError('E_NOT_FOUND', `${arg}: no such file or directory`, {hint: `Give test files (*${TEST_FILE_SUFFIX}) or directories holding them.`})
    if (info.isDirectory()) {
      const found: string[] = []
      await walk(full, found)
      out.push(...found)
    } else out.push(full)
  }
  const unique = [...new Set(out)]
  if (unique.length === 0) {
    const where = args.length > 0 ? args.join(', ') : `${cwd} (the working directory)`
    throw new PipeError('E_NOT_FOUND', `no test files (*${TEST_FILE_SUFFIX}) found under ${where}`, {
      hint: `Write one beside a pipeline, e.g. pipelines/default${TEST_FILE_SUFFIX}; node_modules and directories starting with . are not searched.`,
    })
  }
  return unique
}
