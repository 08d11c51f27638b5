#!/usr/bin/env node
'use strict'
// The CLI is TypeScript: src/cli/boot.ts (dist/cli/boot.cjs) answers what its command manifest can
// and loads the commands' bundle to run one, with V8's flags for it (src/cli/v8-flags.ts). CommonJS
// (bin/package.json): an ES module as the entry costs every command Node's ES module loader.
const path = require('node:path')

// A rejection ends the process as an uncaught error does: its stack on stderr, exit 1.
require('../dist/cli/boot.cjs')
  .boot(path.join(__dirname, '..'), process.argv.slice(2))
  .catch((error) => {
    process.exitCode = 1
    throw error
  })
