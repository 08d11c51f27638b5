/**
 * `pipe ARGS` in this process: the CLI's one path from argv (cli/router.ts: the manifest, the
 * command's group, its parsing, its error channel and exit code) with the command's code from src/,
 * its stdout and stderr captured, in the environment and working folder pipe() would give its
 * process. A `pipe` process costs ~0.2–0.4 s of CPU, most of it Node and the bundle starting; a
 * command here costs what its work does (5–150 ms), once the first of its group has loaded the
 * commands' code into this process (1.5–2.5 s, once per mocha worker). For tests of what a command does and says; what only a
 * process shows stays with pipe() (test/helpers/cli.ts): a signal, a crash or a kill, stdin, a
 * process that outlives the test's call (a worker, the view), two commands at once, the built
 * bundle itself, and anything that reads its environment once per process (a fault point's count,
 * OpenTelemetry's exporter).
 *
 * One command at a time: a command owns process.env, the working folder and the exit code while it
 * runs, so calls made together wait their turn. A command that never ends holds every later call of
 * its worker (the test's own timeout fails it): whatever may hang stays a process. While a command
 * runs, its signal handlers are this process's: a signal for it, or a `pipe cancel` process that
 * finds this process's pid as a run's holder, would stop mocha's worker. What a process says once
 * (a warning of util's warnOnce, Node's own) is said by the first command of a worker only.
 */
import {commandEnv, ownEnv, repoRoot, type CliOptions, type CliResult} from './cli.js'

let turn: Promise<unknown> = Promise.resolve()

/**
 * What a process reads once, as it starts or first needs it: a fault point (util/faults.ts),
 * OpenTelemetry's exporter (telemetry/tracing.ts), the signal grace (cli/signals.ts), the locale
 * (ICU reads LANG and LC_* at Node's start), Node's own options, and what the dynamic loader
 * preloads (LD_PRELOAD: libfaketime, which reads FAKETIME). Given here they would silently do nothing.
 */
const READ_AT_START = /^(PIPE_FAULT_|OTEL_|LC_|NODE_|LD_|FAKETIME)|^(LANG|LANGUAGE|PIPE_SIGNAL_GRACE_MS)$/

export function pipeHere(args: string[], options: Omit<CliOptions, 'input' | 'timeoutMs'> = {}): Promise<CliResult> {
  const env = options.env ?? {}
  const once = Object.keys(env).find((key) => READ_AT_START.test(key))
  if (once !== undefined) throw new Error(`pipeHere: ${once} is read once per process; run this command with pipe()`)
  // Prompting would read this process's own stdin.
  if (env.PIPE_INTERACTIVE === '1') throw new Error('pipeHere: PIPE_INTERACTIVE=1 prompts on stdin; run this command with pipe() and its input')
  const result = turn.then(() => runHere(args, options))
  turn = result.catch(() => undefined)
  return result
}

/** What the CLI's redaction has learnt (util/redact.ts's registry): a new process knows nothing yet. */
function forgetSecrets(): void {
  const registry = (globalThis as Record<symbol, {known: Set<string>; composite: Set<string>; fixed?: unknown} | undefined>)[Symbol.for('pipe.secrets')]
  if (!registry) return
  registry.known.clear()
  registry.composite.clear()
  delete registry.fixed
}

function replaceEnv(env: NodeJS.ProcessEnv): void {
  for (const key of Object.keys(process.env)) if (!(key in env)) delete process.env[key]
  Object.assign(process.env, env)
}

async function runHere(args: string[], options: Omit<CliOptions, 'input' | 'timeoutMs'>): Promise<CliResult> {
  const [{route}, {readManifest, readVersion}, {captureStandardStreams}] = await Promise.all([
    import('../../src/cli/router.js'),
    import('../../src/cli/manifest.js'),
    import('../../src/cli/std-streams.js'),
  ])
  const saved = {env: {...process.env}, cwd: process.cwd(), exitCode: process.exitCode}
  let stdout = ''
  let stderr = ''
  // What a process dies of: a promise rejected with no handler (Node prints its stack and exits 1).
  // Here mocha's own listener would take it and say nothing.
  const crashes = new Set<unknown>()
  const onRejection = (reason: unknown): void => void crashes.add(reason)
  let release: (() => void) | undefined
  try {
    // A folder that is not there fails the call here, before anything of this process has changed.
    process.chdir(options.cwd ?? repoRoot)
    replaceEnv(commandEnv(options))
    ownEnv.held = saved.env
    process.exitCode = undefined
    forgetSecrets()
    process.prependListener('unhandledRejection', onRejection)
    release = captureStandardStreams((fd, text) => {
      if (fd === 1) stdout += text
      else stderr += text
    })
    let code = await route(args, {
      root: repoRoot,
      manifest: () => readManifest(repoRoot),
      version: () => readVersion(repoRoot),
      load: async (group) => (await import(`../../src/entry/groups/${group}.js`)) as Awaited<ReturnType<Parameters<typeof route>[1]['load']>>,
    })
    // A rejection left unhandled is reported once the microtasks have run, within a turn of the event loop.
    await new Promise((resolve) => setImmediate(resolve))
    if (crashes.size > 0) {
      stderr += [...crashes].map((reason) => `${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}\n`).join('')
      code = 1
    }
    return {code: code ?? Number(process.exitCode ?? 0), stdout, stderr, signal: null}
  } finally {
    release?.()
    process.off('unhandledRejection', onRejection)
    forgetSecrets()
    delete ownEnv.held
    replaceEnv(saved.env)
    process.chdir(saved.cwd)
    process.exitCode = saved.exitCode
  }
}
