'use strict'
// Preloaded into the built CLI (node -r THIS bin/run.js ...) by test/cli/startup.test.ts: at exit,
// writes to the file PIPE_TEST_INITS the source modules (src/...) whose bundled code the process
// initialised. A group's script is esbuild's bundle, in which each module's top level is an
// __esm init that runs when the module is first imported (statically by a module that runs, or
// by an import() when it is called): the helper below wraps that one function as the script is
// compiled (util/code-cache.ts compiles it with vm.Script), so the record is what really ran, not
// what a reading of the imports guesses. The rewritten script has no code cache; nothing else changes.
const fs = require('node:fs')
const vm = require('node:vm')

const HELPER = 'var __esm = (fn, res, err) => function __init() {\n'
const inits = []
globalThis.__pipeTestInits = inits
const Script = vm.Script
vm.Script = class extends Script {
  constructor(source, options = {}) {
    if (typeof source === 'string' && source.includes(HELPER)) {
      const probe = 'if (fn) globalThis.__pipeTestInits.push(Object.getOwnPropertyNames(fn)[0]);\n'
      const {cachedData, ...rest} = options
      super(source.replace(HELPER, HELPER + probe), rest)
    } else super(source, options)
  }
}
process.on('exit', () => {
  fs.writeFileSync(process.env.PIPE_TEST_INITS, JSON.stringify([...new Set(inits)]))
})
