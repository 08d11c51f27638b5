/**
 * What bin/run.js calls: the CLI's bundle (dist/cli/main.cjs, made by scripts/bundle.mjs from
 * entry/main.ts) compiled through its V8 code cache (util/code-cache.ts), then main(). A script has no
 * import() of its own: the bundle calls the one given here for the packages it loads only when a
 * step needs them (dist/vendor/). oclif loads the commands, the help class and the hooks from the
 * same file by require(): the module is put in require's cache, so they are this copy, not a second.
 */
import {realpathSync} from 'node:fs'
import {createRequire, Module} from 'node:module'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {PipeError} from '../errors.js'
import {buildingCodeCaches, loadScript} from '../util/code-cache.js'
import {speak} from './error-channel.js'

export interface Cli {
  main(argv: string[], root: string): Promise<void>
}

/** Loads the bundle of the installation in `root` once per process and registers it as the module its path names. */
export function loadCli(root: string): Cli {
  const dist = path.join(root, 'dist')
  const file = path.join(dist, 'cli', 'main.cjs')
  const require = createRequire(file)
  const known = require.cache[realOf(file)]
  if (known) return known.exports as Cli
  const folder = path.dirname(file)
  const importer = (specifier: string): Promise<unknown> => import(specifier.startsWith('.') ? pathToFileURL(path.join(folder, specifier)).href : specifier)
  const loaded = loadScript(file, {header: 'pipe-cli-cache 1', wrapped: true, extra: [importer], keep: buildingCodeCaches(dist), require: onFirstUse})
  const exported = loaded?.exports as Partial<Cli> | undefined
  if (typeof exported?.main !== 'function') {
    throw new PipeError('E_INTERNAL', `the installation's ${path.relative(root, file)} is missing or damaged`, {
      hint: 'Build pipe again (npm run build) or reinstall it.',
    })
  }
  // Under the path require() resolves it to: its real path, should a folder on the way be a link.
  const real = realOf(file)
  const module = new Module(real)
  module.filename = real
  module.loaded = true
  module.exports = exported
  require.cache[real] = module
  return exported as Cli
}

/**
 * Node modules that oclif's modules require as the bundle loads but call only in cases few commands
 * meet: its timing of itself (perf_hooks, with OCLIF_PERFORMANCE) and reading a flag's value from
 * stdin (readline, with readline/promises). This Node compiles each of its own modules from source
 * when first loaded (~3 ms for these), so the bundle is given, for these, an object that loads the
 * module at its first use. (child_process is not one: wsl-utils, which oclif asks for the platform
 * at every start, reads it as it loads.)
 */
const ON_FIRST_USE = new Set(['perf_hooks', 'readline'])

function onFirstUse(base: NodeJS.Require): NodeJS.Require {
  const made = new Map<string, object>()
  const wrapped = ((specifier: string): unknown => {
    const name = specifier.startsWith('node:') ? specifier.slice(5) : specifier
    if (!ON_FIRST_USE.has(name)) return base(specifier)
    let lazy = made.get(name)
    if (lazy === undefined) {
      lazy = loadedAtFirstUse(() => base(`node:${name}`) as object)
      made.set(name, lazy)
    }
    return lazy
  }) as NodeJS.Require
  return Object.assign(wrapped, {resolve: base.resolve, cache: base.cache, main: base.main, extensions: base.extensions})
}

/** An object that is the module `load` returns, loading it when a property is first read, listed or asked for. */
function loadedAtFirstUse(load: () => object): object {
  let module: object | undefined
  const real = (): object => (module ??= load())
  return new Proxy(
    {},
    {
      // Node's modules are not transpiled ES modules: asking (interop helpers do) loads nothing.
      get: (_, key): unknown => (key === '__esModule' ? undefined : (Reflect.get(real(), key) as unknown)),
      has: (_, key) => key !== '__esModule' && Reflect.has(real(), key),
      ownKeys: () => Reflect.ownKeys(real()),
      getOwnPropertyDescriptor: (_, key) => {
        const descriptor = Reflect.getOwnPropertyDescriptor(real(), key)
        // A proxy may report a property its (empty) target lacks only as configurable.
        return descriptor && {...descriptor, configurable: true}
      },
      set: (_, key, value) => Reflect.set(real(), key, value),
    },
  )
}

/** A file's real path, or the path itself when it cannot be resolved (a missing bundle is reported by loadCli). */
function realOf(file: string): string {
  try {
    return realpathSync(file)
  } catch {
    return file
  }
}

export async function boot(root: string, argv: string[]): Promise<void> {
  let cli: Cli
  try {
    cli = loadCli(root)
  } catch (error) {
    if (!(error instanceof PipeError)) throw error
    speak(error, {level: 'ERROR', entry: `[${error.code}] pipe: ${error.message}`})
    process.exit(error.exitCode)
  }
  await cli.main(argv, root)
}
