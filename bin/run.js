#!/usr/bin/env node
'use strict'
// CommonJS (bin/package.json): an ES module as the entry point costs every command ~4 ms of CPU and
// ~1.4 MiB for Node's ES module loader, which `pipe run` and `pipe --version` no longer need.
const {setFlagsFromString} = require('node:v8')
// V8 tuned for a short-lived CLI (bench/README.md, "V8 settings", has the measurements):
// - a function must run 32 times longer before V8 optimises it: a run's per-step code is warm, not
//   hot, and optimising it cost more CPU than it saved (0.8 -> 0.55 ms a step on a 500-step chain),
//   while a truly hot loop (audit verify over a large store) still reaches optimised code at once;
// - the young generation keeps its first size instead of doubling: 5 to 13 MiB less memory a run,
//   at no measurable CPU;
// - a small function waits for the same ticks as any other: V8 optimises one of at most 81 bytes of
//   bytecode on its first tick, and Node's own path and URL helpers, made before these flags took
//   effect, still have V8's default budget for that tick. In a default run they were the only code
//   optimised (10 functions), and TurboFan's first use costs ~4 MiB of peak memory.
// A flag the user gives node (`node --interrupt-budget=67584 bin/run.js ...`) wins. (Node refuses
// these in NODE_OPTIONS.) V8 takes a flag spelled with _ as with -.
// Matched by whole name: --interrupt-budget-for-feedback-allocation is another flag.
const given = new Set(process.execArgv.map((arg) => arg.split('=')[0].replaceAll('_', '-')))
for (const [flag, value] of [['--interrupt-budget', '2162688'], ['--semi-space-growth-factor', '1'], ['--max-bytecode-size-for-early-opt', '0']]) {
  if (!given.has(flag)) setFlagsFromString(`${flag}=${value}`)
}
const path = require('node:path')
const {pathToFileURL} = require('node:url')

const root = path.join(__dirname, '..')
const dist = path.join(root, 'dist')

/**
 * `pipe run` runs from one file, dist/cli/fast-run.cjs, compiled through the V8 code cache the build
 * made (scripts/bundle.mjs and src/util/code-cache.ts say why and how a cache is checked). A script
 * has no import() of its own: the bundle calls this one for the packages a step loads when it needs them.
 */
async function runFast(args) {
  const {buildingCodeCaches, loadScript} = require('../dist/util/code-cache.cjs')
  const cli = path.join(dist, 'cli')
  const importer = (specifier) => import(specifier.startsWith('.') ? pathToFileURL(path.join(cli, specifier)).href : specifier)
  const loaded = loadScript(path.join(cli, 'fast-run.cjs'), {header: 'pipe-run-cache 1', wrapped: true, extra: [importer], keep: buildingCodeCaches(dist)})
  return loaded !== null && (await loaded.exports.fastRun(args, pathToFileURL(root + path.sep)))
}

async function main(argv) {
  // `pipe --version` answers without loading oclif (two thirds of its start-up); the text is oclif's
  // own (config.userAgent). Under WSL oclif says "wsl" as the platform, so it answers there itself.
  if (argv.length === 1 && argv[0] === '--version' && !process.env.WSL_DISTRO_NAME) {
    const {name, version} = JSON.parse(require('node:fs').readFileSync(path.join(root, 'package.json'), 'utf8'))
    const arch = process.arch === 'ia32' ? 'x86' : process.arch
    process.stdout.write(`${name}/${version} ${process.platform}-${arch} node-${process.version}\n`)
    process.exit(0)
  }
  // `pipe run` in its plain forms runs without loading oclif (~30 ms and ~2 MiB of every run); what
  // that parser declines (help, odd forms, errors in the argv) goes to oclif as every other command.
  // Before the JSON answers below, which load oclif's config: a run with --json is none of them (its
  // parser declines --help, -h and --version, the only words that would make it one).
  if (argv[0] === 'run' && (await runFast(argv.slice(1)))) return
  // oclif's help takes no --json; pipe's root help does, like every command.
  // Nor do a command's --help, a topic or --version: with --json each is one JSON document too.
  // oclif is given the installation's folder: from bin/ it would take bin/package.json for the CLI's.
  if (argv.includes('--json')) {
    const {jsonOnlyAnswer, jsonText} = await import('../dist/cli/help-json.js')
    const answer = await jsonOnlyAnswer(root, argv)
    if (answer) {
      if (answer.stderr) process.stderr.write(answer.stderr)
      process.stdout.write(`${jsonText(answer.doc)}\n`)
      process.exit(answer.exit)
    }
  }
  // The bundle's copy of oclif (scripts/bundle.mjs), shared with the commands it loads.
  const {execute} = await import('../dist/cli/main.js')
  await execute({dir: root})
}

// A rejection ends the process as an uncaught error does: its stack on stderr, exit 1.
main(process.argv.slice(2)).catch((error) => {
  process.exitCode = 1
  throw error
})
