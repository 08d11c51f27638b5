#!/usr/bin/env -S node --import tsx
'use strict'
// CommonJS, as bin/run.js (bin/package.json). oclif is given the project's folder: from bin/ it
// would take bin/package.json for the CLI's.
require('@oclif/core').execute({development: true, dir: require('node:path').join(__dirname, '..')})
