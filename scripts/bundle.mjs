#!/usr/bin/env node
// Bundles the built CLI with esbuild, after tsc: every command, the help class, the hooks and the
// bin's entry become entry points of one build with code splitting, written over tsc's files of the
// same names (dist/commands/**, dist/cli/{main,help,not-found,help-json,fast-run}.js). Code they share,
// @oclif/core and the other dependencies included, goes to dist/chunks/. oclif still discovers the
// commands by pattern from dist/commands through oclif.manifest.json, and loads only the one it runs;
// modules imported with import() stay separate chunks, loaded when used. Node loads a few large files
// instead of ~370 small ones, which is most of pipe's start-up. The rest of dist/ (tsc's output) is
// what the benchmark's populate script and nothing else imports. bin/dev.js runs src/ through tsx.
import {readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
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

rmSync(path.join(root, 'dist', 'chunks'), {recursive: true, force: true})
const entryPoints = [...files(path.join(src, 'commands')), ...['main', 'help', 'not-found', 'help-json', 'fast-run'].map((n) => path.join(src, 'cli', `${n}.ts`))]
const result = await build({
  entryPoints,
  outbase: src,
  outdir: path.join(root, 'dist'),
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
  plugins: [codeUnitSort, literalPluginMatch],
  metafile: true,
  logLevel: 'warning',
  legalComments: 'none',
})

// Files that find data beside themselves through import.meta.url (schemas/, pipelines/prompts/,
// dist/schema/validators/) assume a file two levels under the project root: dist/<dir>/<file>.js.
const located = ['src/schema/registry.ts', 'src/providers/prompt.ts', 'src/config/output-schema.ts']
for (const input of located) {
  const outputs = Object.entries(result.metafile.outputs).filter(([, o]) => Object.keys(o.inputs).includes(input)).map(([file]) => file)
  const wrong = outputs.filter((file) => path.relative(root, path.resolve(root, file)).split(path.sep).length !== 3)
  if (outputs.length === 0 || wrong.length > 0) {
    console.error(`bundle: ${input} landed in ${outputs.join(', ') || 'no output'}; it must sit at dist/<dir>/<file>.js`)
    process.exit(1)
  }
}
// What each output holds, for finding what a command loads (esbuild's analyzer reads it too).
writeFileSync(path.join(root, 'dist', 'bundle-meta.json'), JSON.stringify(result.metafile))
const count = Object.keys(result.metafile.outputs).length
console.log(`bundled ${entryPoints.length} entry points into ${count} files`)
