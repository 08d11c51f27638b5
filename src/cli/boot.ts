/**
 * What bin/run.js calls: the router (cli/router.ts) with the installation's command manifest
 * (dist/cli/commands.json), and, only when a command runs, the bundle of its group
 * (dist/cli/GROUP.cjs, made by scripts/bundle.mjs from entry/groups/GROUP.ts) compiled through its
 * V8 code cache (util/code-cache.ts: 65–95 ms a command, bench/README.md). This file is bundled on
 * its own (dist/cli/boot.cjs) and small: `--version`, help and an unknown command read no bundle,
 * and a command reads only its group's. A script has no import() of its own: the bundle calls the
 * one given here for the packages it loads only when a step needs them (dist/vendor/).
 */
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {PipeError} from '../errors.js'
import {readManifest, readVersion} from './manifest.js'
import {route, type Cli} from './router.js'

/** For the build: it writes the manifest from every group's (scripts/bundle.mjs). */
export {mergeManifests} from './manifest.js'

const loaded = new Map<string, Cli>()

/** Loads the bundle of the group `group` of the installation in `root`, once per process. */
export async function loadCli(root: string, group: string): Promise<Cli> {
  const known = loaded.get(group)
  if (known) return known
  // The loader (vm, crypto for the cache's hash) and V8's flags only when a command runs: --version and help need none of it.
  // Node's own modules come with a code cache made under V8's default flags, which V8 refuses once
  // tuneV8 has changed them: a module of Node's loaded after it is compiled from its source, and a
  // new cache made for it. So the modules every command loads come first (bench/README.md, "Issue
  // 38: instructions counted"): the loader's, and those of the streams every command writes to (a
  // terminal's or a pipe's is a socket: node:net). Not through import() of Node's module: that
  // starts Node's ES module loader, which no command needs.
  const {buildingCodeCaches, loadScript} = await import('../util/code-cache.js')
  for (const stream of [process.stdout, process.stderr]) void stream
  ;(await import('./v8-flags.js')).tuneV8()
  const dist = path.join(root, 'dist')
  // The group comes from the manifest: a name that is not one word is a damaged manifest, said as a missing bundle.
  const file = path.join(dist, 'cli', `${/^[a-z][a-z0-9-]*$/.test(group) ? group : 'unknown'}.cjs`)
  const folder = path.dirname(file)
  const importer = (specifier: string): Promise<unknown> => import(specifier.startsWith('.') ? pathToFileURL(path.join(folder, specifier)).href : specifier)
  const script = loadScript(file, {header: 'pipe-cli-cache 1', wrapped: true, ascii: true, extra: [importer], keep: buildingCodeCaches(dist)})
  const exported = script?.exports as (Partial<Cli> & {group?: unknown}) | undefined
  // Another group's bundle in this one's place (an install mixing builds) runs but lacks the command: said as a damaged file, not a bug.
  if (typeof exported?.execute !== 'function' || exported.group !== group) {
    throw new PipeError('E_INTERNAL', `the installation's ${path.relative(root, file)} is missing or damaged`, {
      hint: 'Build pipe again (npm run build) or reinstall it.',
    })
  }
  loaded.set(group, exported as Cli)
  return exported as Cli
}

/** `pipe ARGV` as a process: a failure's exit code ends it at once, whatever work is left (a pool's connection, a timer). */
export async function boot(root: string, argv: string[]): Promise<void> {
  const code = await route(argv, {root, manifest: () => readManifest(root), version: () => readVersion(root), load: (group) => loadCli(root, group)})
  if (code !== undefined) process.exit(code)
}
