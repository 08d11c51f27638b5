#!/usr/bin/env -S node --import tsx
'use strict'
// The CLI from src/ through tsx, without a build. oclif loads the commands, help class and hooks by
// requiring the built bundle's path (package.json, "oclif"): the source module is put in require's
// cache under that path, as src/cli/boot.ts does with the bundle.
const {createRequire, Module} = require('node:module')
const path = require('node:path')
const {pathToFileURL} = require('node:url')

const root = path.join(__dirname, '..')
const bundle = path.join(root, 'dist', 'cli', 'main.cjs')
import(pathToFileURL(path.join(root, 'src', 'entry', 'main.ts')).href)
  .then((cli) => {
    const module = new Module(bundle)
    module.filename = bundle
    module.loaded = true
    module.exports = cli
    createRequire(bundle).cache[bundle] = module
    return cli.main(process.argv.slice(2), root)
  })
  .catch((error) => {
    process.exitCode = 1
    throw error
  })
