#!/usr/bin/env node
// The build's output, made by esbuild from src/ (tsc only type-checks: npm run typecheck):
// - the commands as one script per group (src/entry/groups/GROUP.ts: dist/cli/GROUP.cjs), each
//   self-contained, each command's modules initialised only when it runs. src/cli/boot.ts loads
//   the one group of the command that runs and compiles it through the V8 code cache the build made
//   (src/util/code-cache.ts; V8 caches a script, not an ES module). Its wrapper is Node's CommonJS
//   wrapper with one more parameter, __pipeImport: a script compiled by vm has no import() of its
//   own without an experimental Node API, so boot.ts passes one that resolves the bundle's
//   specifiers as an import() in dist/cli/ would. import.meta.url, which the bundled files use to
//   find their data, is the bundle's own URL;
// - dist/cli/boot.cjs (src/cli/boot.ts), which bin/run.js requires: the router, help and errors,
//   answering --version, help and an unknown command from dist/cli/commands.json, the command
//   manifest written here from every group's command classes;
// - ES modules: the heavy packages a run imports only when a step needs them (VENDORED), as
//   dist/vendor/NAME.js, and the modules the build's and the benchmark's scripts import
//   (SCRIPT_ENTRIES), with their shared code in dist/chunks/.
// bin/dev.js runs src/ through tsx.
import {existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {createRequire, isBuiltin} from 'node:module'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {build} from 'esbuild'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const src = path.join(root, 'src')
const dist = path.join(root, 'dist')

/**
 * Packages a run imports with import() only when a step needs them (the model client, git, diffs,
 * RE2 for matches()), with the names their importers use. Each becomes dist/vendor/NAME.js.
 * pg is not one: bundled into the scripts of the commands that open a postgres:// store (initialised
 * on first use), it needs no ES module loader (bench/README.md, "pg in the commands' scripts").
 */
const VENDORED = {
  openai: ['default'],
  'simple-git': [],
  diff: [],
  re2js: [],
  // OpenTelemetry's light path, only when a collector is configured (src/telemetry/otlp.ts). Their
  // CommonJS builds have no static export list for an ES module to re-export: the names are given.
  '@opentelemetry/api': ['ROOT_CONTEXT', 'SpanKind', 'SpanStatusCode', 'TraceFlags', 'trace'],
  '@opentelemetry/sdk-trace-base': ['BasicTracerProvider', 'BatchSpanProcessor'],
  '@opentelemetry/exporter-trace-otlp-http': ['OTLPTraceExporter'],
  '@opentelemetry/exporter-trace-otlp-proto': ['OTLPTraceExporter'],
  '@opentelemetry/resources': ['defaultResource', 'resourceFromAttributes'],
  // The language server's protocol, only for pipe lsp (src/app/lsp/server.ts).
  'vscode-languageserver/node': [
    'AbstractMessageWriter',
    'CompletionItemKind',
    'DiagnosticSeverity',
    'MarkupKind',
    'StreamMessageReader',
    'TextDocumentSyncKind',
    'TextDocuments',
    'createConnection',
  ],
  'vscode-languageserver-textdocument': ['TextDocument'],
}
/** The vendored file of a package: dist/vendor/NAME.js, a scope's `@` and `/` left out of NAME (@a/b: a-b.js). */
const vendorFile = (name) => name.replace(/^@/, '').replace(/\//g, '-')
/** Modules the build (scripts/build-validators.mjs) and the benchmark (bench/) import from dist/. */
const SCRIPT_ENTRIES = ['schema/options', 'util/fs', 'app/sessions/start'].filter((name) => existsSync(path.join(src, `${name}.ts`)))

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

rmSync(dist, {recursive: true, force: true})
const esm = await build({
  entryPoints: [
    ...SCRIPT_ENTRIES.map((name) => ({in: path.join(src, `${name}.ts`), out: name})),
    ...Object.keys(VENDORED).map((name) => ({in: `pipe-vendor:${name}`, out: `vendor/${vendorFile(name)}`})),
  ],
  outdir: dist,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  chunkNames: 'chunks/[name]-[hash]',
  // pg's native binding is optional and never installed: pg requires it only when asked to.
  external: ['pg-native'],
  // CommonJS dependencies (ajv's standalone validators) call require().
  banner: {js: "import {createRequire as __pipeCreateRequire} from 'node:module'; const require = __pipeCreateRequire(import.meta.url);"},
  plugins: [vendorEntries],
  metafile: true,
  logLevel: 'warning',
  legalComments: 'none',
})

// The vendored packages stay outside the CLI's script: it imports the dist/vendor/ files when a step needs them.
const vendorExternal = {
  name: 'pipe-vendor-external',
  setup(b) {
    const names = Object.keys(VENDORED).map((n) => n.replace(/[-/]/g, '\\$&')).join('|')
    // Only import(): a module that imports one statically (or requires it) has it bundled.
    b.onResolve({filter: new RegExp(`^(${names})$`)}, (args) => (args.kind === 'dynamic-import' ? {path: `../vendor/${vendorFile(args.path)}.js`, external: true} : undefined))
  },
}
// One script per group: esbuild has no code splitting for CommonJS, so what groups share is in each.
const groups = readdirSync(path.join(src, 'entry', 'groups')).map((file) => path.basename(file, '.ts'))
const cli = await build({
  entryPoints: groups.map((group) => ({in: path.join(src, 'entry', 'groups', `${group}.ts`), out: group})),
  outdir: path.join(dist, 'cli'),
  outExtension: {'.js': '.cjs'},
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  define: {'import.meta.url': '__pipeImportMetaUrl'},
  banner: {js: "(function (exports, require, module, __filename, __dirname, __pipeImport) {const __pipeImportMetaUrl = require('node:url').pathToFileURL(__filename).href;"},
  footer: {js: '\n})'},
  // pg's native binding is optional and never installed: pg requires it only when asked to.
  external: ['pg-native'],
  // Not minified: Node prints the whole source line of the frame that threw an uncaught error, and
  // minified lines (a class with its static fields is one) run to hundreds of characters.
  plugins: [vendorExternal],
  metafile: true,
  logLevel: 'warning',
  legalComments: 'none',
})
for (const [file, output] of Object.entries(cli.metafile.outputs)) {
  // Every import() left in the script becomes a call of __pipeImport: the vendored packages'. (The
  // commands' import()s in entry/groups/ are of bundled modules: esbuild makes each a lazy
  // initialisation inside the script.) Each must be a vendored file or a Node module, and a static
  // import of a vendored (ES module) package cannot be a require().
  const imports = output.imports.filter((i) => i.external && i.path !== 'pg-native')
  // require.resolve() of a package names its file in node_modules, which an installation has.
  const wrong = imports.filter((i) => i.kind !== 'require-resolve').filter((i) => !(isBuiltin(i.path) || Object.keys(VENDORED).some((n) => i.path === `../vendor/${vendorFile(n)}.js`)) || (i.path.startsWith('../') && i.kind !== 'dynamic-import'))
  if (wrong.length > 0) {
    console.error(`bundle: ${file}'s imports are not what boot.ts can load (${wrong.map((i) => `${i.kind} ${i.path}`).join(', ')})`)
    process.exit(1)
  }
  // ASCII only, every other character as its \u escape (esbuild escapes strings, not the comments
  // and regular expressions it keeps; in both an escape means the same): boot.ts decodes the
  // script as latin1, ~5 ms a command less than UTF-8 (bench/README.md, "Issue 38: without oclif").
  const code = readFileSync(path.join(root, file), 'utf8')
    .replace(/(?<![\w$.])import\(/g, '__pipeImport(')
    .replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
  writeFileSync(path.join(root, file), code)
}
await build({
  entryPoints: [path.join(src, 'cli', 'boot.ts')],
  outfile: path.join(dist, 'cli', 'boot.cjs'),
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  legalComments: 'none',
})

// Files that find data beside themselves through import.meta.url (schemas/, pipelines/prompts/,
// dist/schema/validators/) assume a file two levels under the project root: dist/<dir>/<file>.js.
const located = ['src/schema/registry.ts', 'src/providers/prompt.ts', 'src/config/output-schema.ts'].filter((file) => existsSync(path.join(root, file)))
for (const input of located) {
  const outputs = [...Object.entries(esm.metafile.outputs), ...Object.entries(cli.metafile.outputs)].filter(([, o]) => Object.keys(o.inputs).includes(input)).map(([file]) => file)
  const wrong = outputs.filter((file) => path.relative(root, path.resolve(root, file)).split(path.sep).length !== 3)
  if (outputs.length === 0 || wrong.length > 0) {
    console.error(`bundle: ${input} landed in ${outputs.join(', ') || 'no output'}; it must sit at dist/<dir>/<file>.js`)
    process.exit(1)
  }
}
// The command manifest, from every group's command classes: what help, completion and the router
// read without loading a bundle (src/cli/manifest.ts).
{
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
  const boot = createRequire(import.meta.url)('../dist/cli/boot.cjs')
  const parts = await Promise.all(groups.map(async (group) => (await boot.loadCli(root, group)).describe(pkg.version, pkg.description)))
  // The router loads dist/cli/GROUP.cjs for a command of GROUP: a group file names its own group.
  const misnamed = parts.flatMap((part, i) => Object.values(part.commands).filter((c) => c.group !== groups[i]).map((c) => `${c.id} (${groups[i]}.ts says ${c.group})`))
  if (misnamed.length > 0) {
    console.error(`bundle: src/entry/groups/ files name another group: ${misnamed.join(', ')}`)
    process.exit(1)
  }
  writeFileSync(path.join(dist, 'cli', 'commands.json'), JSON.stringify(boot.mergeManifests(parts)))
}
// What the CLI's scripts hold, for finding what each loads (esbuild's analyzer reads it too).
writeFileSync(path.join(dist, 'bundle-meta.json'), JSON.stringify(cli.metafile))
const kb = (file) => `${Math.round(statSync(path.join(dist, 'cli', file)).size / 1024)} KB`
console.log(`bundled the CLI (${groups.map((g) => `${g} ${kb(`${g}.cjs`)}`).join(', ')}; its entry ${kb('boot.cjs')}) and ${Object.keys(esm.metafile.outputs).length} ES module files`)
