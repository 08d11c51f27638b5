#!/usr/bin/env node
// Bundles the built CLI with esbuild, after tsc, in three builds:
// - every command, the help class, the hooks and the bin's entries become entry points of one ESM
//   build with code splitting, written over tsc's files of the same names (dist/commands/**,
//   dist/cli/{main,help,not-found,help-json}.js). Code they share, @oclif/core and the other
//   dependencies included, goes to dist/chunks/. oclif still discovers the commands by pattern from
//   dist/commands through oclif.manifest.json, and loads only the one it runs; modules imported with
//   import() stay separate chunks, loaded when used. Node loads a few large files instead of ~370
//   small ones, which is most of pipe's start-up. The heavy packages a run imports only when a step
//   needs them (VENDORED) get entries of their own, dist/vendor/NAME.js;
// - `pipe run`'s fast path (src/cli/fast-run.ts) becomes one CommonJS-style file, dist/cli/fast-run.cjs,
//   that bin/run.js loads through a V8 code cache (src/util/code-cache.ts): compiling the ~0.8 MB a
//   run loads was a third of its CPU, and V8 caches a script, not an ES module. The vendored packages
//   stay outside it: it imports the same dist/vendor/ files as the ESM build, when a step needs them;
// - src/util/code-cache.ts, which bin/run.js (CommonJS) requires to load that file, becomes one
//   CommonJS file, dist/util/code-cache.cjs, requiring only Node's modules.
// The rest of dist/ (tsc's output) is what the benchmark's populate script and nothing else imports.
// bin/dev.js runs src/ through tsx.
import {readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {isBuiltin} from 'node:module'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {build} from 'esbuild'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const src = path.join(root, 'src')

function files(dir) {
  return readdirSync(dir, {withFileTypes: true}).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []))
}

// oclif sorts the command list with localeCompare on every start: ICU's collation data then costs
// each command ~6 ms and ~3 MiB, and the order follows the user's locale. Command ids are ASCII, so
// code-unit order is the same order on every machine. A changed oclif fails the build here rather
// than silently keeping the old cost.
const codeUnitSort = {
  name: 'oclif-code-unit-sort',
  setup(b) {
    b.onLoad({filter: /@oclif[\\/]core[\\/]lib[\\/]config[\\/]plugin\.js$/}, (args) => {
      const source = readFileSync(args.path, 'utf8')
      const sort = '.sort((a, b) => a.id.localeCompare(b.id))'
      if (!source.includes(sort)) throw new Error(`bundle: ${args.path} no longer sorts commands with "${sort}"; update scripts/bundle.mjs`)
      return {contents: source.replace(sort, '.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))'), loader: 'js'}
    })
  },
}

// oclif finds its core plugins ("plugins" in package.json) by matching every dependency's name
// against each entry with minimatch, which compiles the entry anew for each name: ~1.5 ms of every
// command for one plain name. An entry without glob characters (extglobs such as @(a|b) need a
// parenthesis, negation a !, a comment a #) matches only itself, so it is compared as a string; a
// pattern still goes to minimatch.
const literalPluginMatch = {
  name: 'oclif-literal-plugin-match',
  setup(b) {
    b.onLoad({filter: /@oclif[\\/]core[\\/]lib[\\/]config[\\/]plugin-loader\.js$/}, (args) => {
      const source = readFileSync(args.path, 'utf8')
      const match = '(0, minimatch_1.minimatch)(p, w)'
      if (!source.includes(match)) throw new Error(`bundle: ${args.path} no longer matches plugins with "${match}"; update scripts/bundle.mjs`)
      return {contents: source.replace(match, '(/[*?[\\]{}()!\\\\#]/.test(w) ? (0, minimatch_1.minimatch)(p, w) : p === w)'), loader: 'js'}
    })
  },
}

/**
 * Packages a run imports with import() only when a step needs them (the model client, the process
 * runner, git, diffs, RE2 for matches()), with the names their importers use. Each becomes dist/vendor/NAME.js.
 */
const VENDORED = {openai: ['default'], execa: [], 'simple-git': [], diff: [], re2js: []}
const vendorEntries = {
  name: 'pipe-vendor-entries',
  setup(b) {
    b.onResolve({filter: /^pipe-vendor:/}, (args) => ({path: args.path.slice('pipe-vendor:'.length), namespace: 'pipe-vendor'}))
    b.onLoad({filter: /.*/, namespace: 'pipe-vendor'}, (args) => ({
      contents: [`export * from ${JSON.stringify(args.path)}`, ...VENDORED[args.path].map((name) => `export {${name}} from ${JSON.stringify(args.path)}`)].join('\n'),
      resolveDir: root,
      loader: 'js',
    }))
  },
}

const dist = path.join(root, 'dist')
rmSync(path.join(dist, 'chunks'), {recursive: true, force: true})
rmSync(path.join(dist, 'vendor'), {recursive: true, force: true})
const sources = [...files(path.join(src, 'commands')), ...['main', 'help', 'not-found', 'help-json'].map((n) => path.join(src, 'cli', `${n}.ts`))]
const entryPoints = [
  ...sources.map((file) => ({in: file, out: path.relative(src, file).replace(/\.ts$/, '')})),
  ...Object.keys(VENDORED).map((name) => ({in: `pipe-vendor:${name}`, out: `vendor/${name}`})),
]
const result = await build({
  entryPoints,
  outdir: dist,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  chunkNames: 'chunks/[name]-[hash]',
  // oclif reads typescript only to map a development checkout's paths; never in the built CLI.
  external: ['typescript'],
  // CommonJS dependencies (oclif, ajv's standalone validators) call require().
  banner: {js: "import {createRequire as __pipeCreateRequire} from 'node:module'; const require = __pipeCreateRequire(import.meta.url);"},
  plugins: [codeUnitSort, literalPluginMatch, vendorEntries],
  metafile: true,
  logLevel: 'warning',
  legalComments: 'none',
})

// The fast path's run bundle. Its wrapper is Node's CommonJS wrapper with one more parameter,
// __pipeImport: a script compiled by vm has no import() of its own without an experimental Node API
// (it warns on stderr at its first use), so bin/run.js passes one that resolves the bundle's
// specifiers as an import() in dist/cli/ would. import.meta.url, which the bundled files use to find
// their data, is the bundle's own URL. The vendored packages are imported from dist/vendor/.
const vendorExternal = {
  name: 'pipe-vendor-external',
  setup(b) {
    const names = Object.keys(VENDORED).map((n) => n.replace(/[-/]/g, '\\$&')).join('|')
    b.onResolve({filter: new RegExp(`^(${names})$`)}, (args) => ({path: `../vendor/${args.path}.js`, external: true}))
  },
}
const runBundle = path.join(dist, 'cli', 'fast-run.cjs')
const run = await build({
  entryPoints: [path.join(src, 'cli', 'fast-run.ts')],
  outfile: runBundle,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  external: ['typescript'],
  define: {'import.meta.url': '__pipeImportMetaUrl'},
  banner: {js: "(function (exports, require, module, __filename, __dirname, __pipeImport) {const __pipeImportMetaUrl = require('node:url').pathToFileURL(__filename).href;"},
  footer: {js: '\n})'},
  // Whitespace only: names stay readable in a stack trace, and the file is a sixth smaller to read and hash.
  // Lines stay short: Node prints the whole source line of the frame that threw an uncaught error,
  // and a minified line of the bundle runs to ~200 KB.
  minifyWhitespace: true,
  lineLimit: 160,
  plugins: [vendorExternal],
  metafile: true,
  logLevel: 'warning',
  legalComments: 'none',
})
{
  // Every import() left in the bundle becomes a call of __pipeImport. Each must be a vendored file or
  // a Node module, and a static import of a vendored (ES module) package cannot be a require().
  const imports = Object.values(run.metafile.outputs)[0].imports.filter((i) => i.external)
  const wrong = imports.filter((i) => !(isBuiltin(i.path) || Object.keys(VENDORED).some((n) => i.path === `../vendor/${n}.js`)) || (i.path.startsWith('../') && i.kind !== 'dynamic-import'))
  const dynamic = imports.filter((i) => i.kind === 'dynamic-import').length
  const code = readFileSync(runBundle, 'utf8')
  const calls = code.split('import("').length - 1
  if (wrong.length > 0 || calls !== dynamic) {
    console.error(`bundle: the run bundle's imports are not what bin/run.js can load (${wrong.map((i) => `${i.kind} ${i.path}`).join(', ') || `${calls} import( for ${dynamic} dynamic imports`})`)
    process.exit(1)
  }
  writeFileSync(runBundle, code.replaceAll('import("', '__pipeImport("'))
}
await build({
  entryPoints: [path.join(src, 'util', 'code-cache.ts')],
  outfile: path.join(dist, 'util', 'code-cache.cjs'),
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  legalComments: 'none',
})

// Files that find data beside themselves through import.meta.url (schemas/, pipelines/prompts/,
// dist/schema/validators/) assume a file two levels under the project root: dist/<dir>/<file>.js.
const located = ['src/schema/registry.ts', 'src/providers/prompt.ts', 'src/config/output-schema.ts']
for (const input of located) {
  const outputs = [...Object.entries(result.metafile.outputs), ...Object.entries(run.metafile.outputs)].filter(([, o]) => Object.keys(o.inputs).includes(input)).map(([file]) => file)
  const wrong = outputs.filter((file) => path.relative(root, path.resolve(root, file)).split(path.sep).length !== 3)
  if (outputs.length === 0 || wrong.length > 0) {
    console.error(`bundle: ${input} landed in ${outputs.join(', ') || 'no output'}; it must sit at dist/<dir>/<file>.js`)
    process.exit(1)
  }
}
// What each output holds, for finding what a command loads (esbuild's analyzer reads it too).
writeFileSync(path.join(root, 'dist', 'bundle-meta.json'), JSON.stringify(result.metafile))
const count = Object.keys(result.metafile.outputs).length
console.log(`bundled ${entryPoints.length} entry points into ${count} files, and the run bundle (${Math.round(statSync(runBundle).size / 1024)} KB)`)
