/**
 * What bin/run.js calls: the router (cli/router.ts) with the installation's command manifest
 * (dist/cli/commands.json), and, only when a command runs, the CLI's bundle (dist/cli/main.cjs,
 * made by scripts/bundle.mjs from entry/main.ts) compiled through its V8 code cache
 * (util/code-cache.ts: 65–95 ms a command, bench/README.md). This file is bundled on its own
 * (dist/cli/boot.cjs) and small: `--version`, help and an unknown command never read the bundle. A
 * script has no import() of its own: the bundle calls the one given here for the packages it loads
 * only when a step needs them (dist/vendor/).
 */
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {PipeError} from '../errors.js'
import {readManifest} from './manifest.js'
import {route, type Cli} from './router.js'

let loaded: Cli | undefined

/** Loads the bundle of the installation in `root`, once per process. */
export async function loadCli(root: string): Promise<Cli> {
  if (loaded) return loaded
  // V8's flags and the loader (vm, v8, crypto for the cache's hash) only when a command runs: --version and help need none of it.
  ;(await import('./v8-flags.js')).tuneV8()
  const {buildingCodeCaches, loadScript} = await import('../util/code-cache.js')
  const dist = path.join(root, 'dist')
  const file = path.join(dist, 'cli', 'main.cjs')
  const folder = path.dirname(file)
  const importer = (specifier: string): Promise<unknown> => import(specifier.startsWith('.') ? pathToFileURL(path.join(folder, specifier)).href : specifier)
  const script = loadScript(file, {header: 'pipe-cli-cache 1', wrapped: true, ascii: true, extra: [importer], keep: buildingCodeCaches(dist)})
  const exported = script?.exports as Partial<Cli> | undefined
  if (typeof exported?.execute !== 'function') {
    throw new PipeError('E_INTERNAL', `the installation's ${path.relative(root, file)} is missing or damaged`, {
      hint: 'Build pipe again (npm run build) or reinstall it.',
    })
  }
  loaded = exported as Cli
  return loaded
}

export async function boot(root: string, argv: string[]): Promise<void> {
  await route(argv, {root, manifest: () => readManifest(root), load: () => loadCli(root)})
}
