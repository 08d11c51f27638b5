#!/usr/bin/env node
// Writes oclif.manifest.json, as `oclif manifest` does (every command's id, flags, arguments and
// help, so that a command starts without loading the others' classes), from the CLI's one bundle.
// The bundle is a script that src/cli/boot.ts loads and registers under its path in require's
// cache; oclif's Plugin then finds the commands there by the explicit strategy (package.json).
// Then lets oclif load its whole Config as a command would (pipe's plugin from that manifest,
// @oclif/plugin-autocomplete found in node_modules) and writes what each plugin holds to
// dist/cli/plugins.json, which src/cli/plugins.ts gives oclif at every start instead.
import {writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {Config, Plugin} from '@oclif/core'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
createRequire(import.meta.url)('../dist/cli/boot.cjs').loadCli(root)
const plugin = new Plugin({errorOnManifestCreate: true, ignoreManifest: true, respectNoCacheDefault: true, root, type: 'core', isRoot: true})
await plugin.load()
const count = Object.keys(plugin.manifest.commands).length
if (count === 0) {
  console.error('manifest: no commands found in dist/cli/main.cjs')
  process.exit(1)
}
writeFileSync(path.join(root, 'oclif.manifest.json'), `${JSON.stringify(plugin.manifest, null, 2)}\n`)

// The fields Plugin.load() sets (src/cli/plugins.ts sets root and the commands' loaders itself).
const FIELDS = ['alias', 'commandDiscoveryOpts', 'commandIDs', 'flexibleTaxonomy', 'hasManifest', 'hooks', 'manifest', 'moduleType', 'name', 'pjson', 'tag', 'type', 'valid', 'version']
// An environment as a user's: the data folder of no user plugins (they are found at run time).
process.env.PIPE_DATA_DIR = path.join(root, 'dist', 'no-user-plugins')
const config = await Config.load(root)
const plugins = [...config.plugins.values()]
if (plugins[0]?.root !== root || plugins.some((p) => p.children.length > 0 || p.parent)) {
  console.error(`manifest: oclif's plugins are not the ones src/cli/plugins.ts can give it (${plugins.map((p) => p.name).join(', ')})`)
  process.exit(1)
}
const built = {
  format: 1,
  plugins: plugins.map((p) => ({isRoot: p.root === root, fields: Object.fromEntries(FIELDS.map((f) => [f, p[f]])), order: p.commands.map((c) => c.id)})),
}
writeFileSync(path.join(root, 'dist', 'cli', 'plugins.json'), JSON.stringify(built))
console.log(`wrote the manifest of ${count} commands and oclif's ${plugins.length} plugins (${plugins.map((p) => p.name).join(', ')})`)
