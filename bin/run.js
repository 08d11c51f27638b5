#!/usr/bin/env node
'use strict'
// The CLI is TypeScript (src/cli/boot.ts loads src/cli/main.ts's bundle); this file only sets the V8
// flags, which must be in place before the bundle is compiled, and calls it. CommonJS
// (bin/package.json): an ES module as the entry costs every command Node's ES module loader.
const {setFlagsFromString} = require('node:v8')
// V8 tuned for a short-lived CLI (bench/README.md, "V8 settings", has the measurements):
// - a function must run 32 times longer before V8 optimises it: a run's per-step code is warm, not
//   hot, and optimising it cost more CPU than it saved, while a truly hot loop (audit verify over a
//   large store) still reaches optimised code at once;
// - the young generation keeps its first size instead of doubling: less memory a run, at no
//   measurable CPU;
// - a small function waits for the same ticks as any other: V8 optimises one of at most 81 bytes of
//   bytecode on its first tick, and TurboFan's first use costs peak memory.
// A flag the user gives node (`node --interrupt-budget=67584 bin/run.js ...`) wins. (Node refuses
// these in NODE_OPTIONS.) V8 takes a flag spelled with _ as with -.
// Matched by whole name: --interrupt-budget-for-feedback-allocation is another flag.
const given = new Set(process.execArgv.map((arg) => arg.split('=')[0].replaceAll('_', '-')))
for (const [flag, value] of [['--interrupt-budget', '2162688'], ['--semi-space-growth-factor', '1'], ['--max-bytecode-size-for-early-opt', '0']]) {
  if (!given.has(flag)) setFlagsFromString(`${flag}=${value}`)
}
const path = require('node:path')

// A rejection ends the process as an uncaught error does: its stack on stderr, exit 1.
require('../dist/cli/boot.cjs')
  .boot(path.join(__dirname, '..'), process.argv.slice(2))
  .catch((error) => {
    process.exitCode = 1
    throw error
  })
