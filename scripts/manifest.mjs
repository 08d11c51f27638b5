#!/usr/bin/env node
// Writes oclif.manifest.json, as `oclif manifest` does (every command's id, flags, arguments and
// help, so that a command starts without loading the others' classes), from the CLI's one bundle.
// The bundle is a script that src/cli/boot.ts loads and registers under its path in require's
// cache; oclif's Plugin then finds the commands there by the explicit strategy (package.json).
import {writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {Plugin} from '@oclif/core'

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
console.log(`wrote the manifest of ${count} commands`)
