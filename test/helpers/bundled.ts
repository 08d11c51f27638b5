/**
 * A child process of a test that runs pipe's source modules (a writer, a lock contender): its entry
 * bundled by esbuild once per test process and run by plain node. Through `node --import tsx`, each
 * such child spent ~0.65 s of CPU loading tsx and compiling the sources it imports before it did
 * anything (plain node on the bundle: ~0.1 s). The code it runs is the same source; as the CLI's own
 * build does, the bundle holds its dependencies (pg without its optional native binding), which
 * require Node's modules through a require of their own.
 */
import {buildSync} from 'esbuild'
import {createHash} from 'node:crypto'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'

let outdir: string | undefined
const made = new Map<string, string>()

function folder(): string {
  if (!outdir) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-test-bundles-'))
    process.on('exit', () => rmSync(dir, {recursive: true, force: true}))
    outdir = dir
  }
  return outdir
}

/** The path of `entry` (a .ts file) bundled as an ES module for plain `node FILE`, built the first time it is asked for. */
export function bundled(entry: string): string {
  const known = made.get(entry)
  if (known) return known
  const outdir = folder()
  const outfile = path.join(outdir, `${made.size}-${path.basename(entry, path.extname(entry))}.mjs`)
  buildSync({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    outfile,
    external: ['pg-native'],
    banner: {js: "import {createRequire as requireFrom} from 'node:module'; const require = requireFrom(import.meta.url);"},
    logLevel: 'error',
  })
  made.set(entry, outfile)
  return outfile
}

/**
 * What `node --import tsx --input-type=module -e SOURCE` ran, as a file for plain `node FILE`: the
 * source (an ES module that imports pipe's modules by absolute path) bundled, once per source.
 */
export function bundledScript(source: string): string {
  const entry = path.join(folder(), `script-${createHash('sha256').update(source).digest('hex').slice(0, 16)}.ts`)
  if (!made.has(entry)) writeFileSync(entry, source)
  return bundled(entry)
}
