#!/usr/bin/env -S node --import tsx
'use strict'
// The CLI from src/ through tsx, without a build: the router (src/cli/router.ts) with the command
// manifest made in this process from the command classes, as the build makes dist/cli/commands.json.
const {readFileSync} = require('node:fs')
const path = require('node:path')
const {pathToFileURL} = require('node:url')

const root = path.join(__dirname, '..')
const source = (file) => import(pathToFileURL(path.join(root, 'src', file)).href)
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
Promise.all([source('cli/router.ts'), source('entry/main.ts')])
  .then(async ([router, cli]) => {
    const manifest = await cli.describe(pkg.version, pkg.description)
    return router.route(process.argv.slice(2), {root, manifest: () => manifest, load: () => cli})
  })
  .catch((error) => {
    process.exitCode = 1
    throw error
  })
