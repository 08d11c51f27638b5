/**
 * oclif's plugins (pipe itself and @oclif/plugin-autocomplete) as oclif loaded them when the CLI was
 * built, given to oclif's Config instead of found again by every command. scripts/manifest.mjs lets
 * oclif load them (Config.load: package.json files, the manifests, the command order) and writes what
 * each Plugin then holds to dist/cli/plugins.json; here each becomes an oclif Plugin with those
 * fields, so oclif finds, parses and runs the commands with its own code as ever. What this spares
 * every command is oclif's discovery: reading four JSON files, finding the plugin's folder, matching
 * the dependencies with minimatch, and ordering the commands with localeCompare (ICU's collator
 * alone, ~5 ms). bench/README.md has the figures.
 *
 * A plugin other than pipe's own is found where Node would resolve its package from the
 * installation (its folder may be hoisted), and only when oclif first asks for its folder: to load
 * one of its commands (`pipe autocomplete`), not to list them. Plugins a user installed for pipe
 * (PIPE_DATA_DIR's package.json) are not in the build: when that file exists, oclif discovers them all.
 */
import {existsSync, readFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import os from 'node:os'
import path from 'node:path'
import {Plugin} from '@oclif/core/config'
import type {Command} from '@oclif/core/command'
import {PipeError} from '../errors.js'

/** What scripts/manifest.mjs writes for one plugin: a loaded oclif Plugin's fields, and its commands' order. */
export interface BuiltPlugin {
  /** The installation's own plugin (root '.'), or a package resolved from it. */
  isRoot: boolean
  /** The fields oclif's Plugin.load() set, as it set them (root aside). */
  fields: Record<string, unknown> & {name: string; alias: string; type: string; manifest: {commands: Record<string, Command.Cached>}}
  /** The command ids in the order Plugin.load() sorted them (localeCompare, under the build's locale). */
  order: string[]
}

export interface BuiltPlugins {
  /** Which file format this is; another is a build this code cannot read. */
  format: 1
  plugins: BuiltPlugin[]
}

const FILE = path.join('dist', 'cli', 'plugins.json')

/** The plugins of the installation in `root`, as oclif's Config takes them; undefined when oclif must find them itself (a user's plugins). */
export function builtPlugins(root: string): Map<string, Plugin> | undefined {
  let built: BuiltPlugins
  try {
    built = JSON.parse(readFileSync(path.join(root, FILE), 'utf8')) as BuiltPlugins
  } catch (error) {
    throw damaged(error)
  }
  if (built?.format !== 1 || !Array.isArray(built.plugins) || built.plugins[0]?.isRoot !== true) throw damaged(undefined)
  if (userPluginsIn((built.plugins[0].fields.pjson as {oclif?: {bin?: string; dirname?: string}} | undefined)?.oclif ?? {})) return undefined
  // The root plugin first: oclif takes the first whose root is the installation's.
  return new Map(built.plugins.map((entry) => [entry.fields.name, pluginOf(entry, root)]))
}

function damaged(cause: unknown): PipeError {
  return new PipeError('E_INTERNAL', `the installation's ${FILE} is missing or damaged`, {hint: 'Build pipe again (npm run build) or reinstall it.', cause})
}

function pluginOf(entry: BuiltPlugin, root: string): Plugin {
  const {fields} = entry
  const plugin = new Plugin({root, name: fields.name, type: fields.type, isRoot: entry.isRoot})
  Object.assign(plugin, fields)
  if (entry.isRoot) plugin.root = root
  else lazyRoot(plugin, root)
  // As Plugin.load() makes them, in the order it sorted them in.
  plugin.commands = entry.order.map((id) => {
    const cached = fields.manifest.commands[id]!
    return {
      ...cached,
      load: async () => plugin.findCommand(id, {must: true}),
      pluginAlias: plugin.alias,
      pluginType: cached.pluginType === 'jit' ? 'jit' : plugin.type,
    }
  })
  return plugin
}

/** The plugin's folder, resolved as Node resolves its package from the installation, the first time oclif reads it. */
function lazyRoot(plugin: Plugin, root: string): void {
  let resolved: string | undefined
  Object.defineProperty(plugin, 'root', {
    configurable: true,
    enumerable: true,
    get(): string {
      if (resolved !== undefined) return resolved
      const lookup = createRequire(path.join(root, 'package.json')).resolve.paths(plugin.name) ?? []
      const found = lookup.map((dir) => path.join(dir, plugin.name)).find((dir) => existsSync(path.join(dir, 'package.json')))
      if (found === undefined)
        throw new PipeError('E_INTERNAL', `the plugin ${plugin.name} is not installed beside pipe`, {hint: 'Reinstall pipe (npm install).'})
      resolved = found
      return resolved
    },
    set(value: string) {
      resolved = value
    },
  })
}

/**
 * Whether a user installed plugins for pipe: oclif reads them from package.json in its data folder
 * (PIPE_DATA_DIR, else $XDG_DATA_HOME/pipe, else ~/.local/share/pipe; %LOCALAPPDATA%\pipe on Windows).
 */
function userPluginsIn(oclif: {bin?: string; dirname?: string}): boolean {
  const bin = oclif.bin ?? 'pipe'
  const base =
    process.env.XDG_DATA_HOME ||
    (process.platform === 'win32' && process.env.LOCALAPPDATA) ||
    path.join(process.env.HOME || os.homedir() || os.tmpdir(), '.local', 'share')
  const data = process.env[`${bin.replaceAll('@', '').replaceAll(/[-/]/g, '_')}_DATA_DIR`.toUpperCase()] || path.join(base, oclif.dirname ?? bin)
  return existsSync(path.join(data, 'package.json'))
}
