#!/usr/bin/env -S node --import tsx
'use strict'
// The CLI from src/ through tsx, without a build: the router (src/cli/router.ts) with the command
// manifest made in this process from every group's command classes (src/entry/groups/), as the
// build makes dist/cli/commands.json.
const {readdirSync, readFileSync} = require('node:fs')
const path = require('node:path')
const {pathToFileURL} = require('node:url')

const root = path.join(__dirname, '..')
const source = (file) => import(pathToFileURL(path.join(root, 'src', file)).href)
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
const groups = readdirSync(path.join(root, 'src', 'entry', 'groups')).map((file) => path.basename(file, '.ts'))
Promise.all([source('cli/router.ts'), source('cli/manifest.ts'), ...groups.map((group) => source(`entry/groups/${group}.ts`))])
  .then(async ([router, {mergeManifests}, ...clis]) => {
    const manifest = mergeManifests(await Promise.all(clis.map((cli) => cli.describe(pkg.version, pkg.description))))
    return router.route(process.argv.slice(2), {root, manifest: () => manifest, version: () => manifest, load: (group) => clis[groups.indexOf(group)]})
  })
  // A failure's exit code ends the process at once, as bin/run.js's does (src/cli/boot.ts).
  .then((code) => {
    if (code !== undefined) process.exit(code)
  })
  .catch((error) => {
    process.exitCode = 1
    throw error
  })
