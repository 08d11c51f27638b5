/**
 * The CLI's one path from argv to a command: oclif parses every command. bin/run.js loads this file's
 * bundle (dist/cli/main.cjs, scripts/bundle.mjs) through cli/boot.ts and calls main(). oclif finds the
 * commands, the help class and the hooks as exports of the same bundle (package.json, "oclif"), so
 * they share its one copy of @oclif/core.
 */
import {run} from '@oclif/core/run'
import {reportCommandError} from '../cli/command-io.js'
import {builtPlugins} from '../cli/plugins.js'
import {redactStandardStreams} from '../cli/std-streams.js'
import {addProcessSecrets} from '../util/redact.js'

export {COMMANDS} from './commands.js'
export {default as PipeHelp} from '../cli/help.js'
export {commandNotFound} from '../cli/not-found.js'
export {completionFiles} from '../cli/completion-files.js'
export {jsonAnswers} from '../cli/json-answers.js'

/** Runs `pipe ARGV` for the installation in `root`; a failure is said by the one error renderer (command-io.ts) and ends the process with its exit code. */
export async function main(argv: string[], root: string): Promise<void> {
  // Before anything is printed or written: the credentials this process was given are known, and stdout and stderr redact.
  addProcessSecrets(argv)
  redactStandardStreams()
  try {
    // oclif's Config with the plugins the build found (cli/plugins.ts): the same Config, without discovering them again.
    await run(argv, {root, plugins: builtPlugins(root)})
  } catch (raw) {
    const error = raw as Error & {oclif?: {exit?: number}; code?: string; skipOclifErrorHandling?: boolean}
    // A command's error is said already (cli/base-command.ts); this.exit() carries only its code.
    if (error instanceof Error && (error.code === 'EEXIT' || error.skipOclifErrorHandling)) process.exit(error.oclif?.exit ?? 1)
    // What no command caught: oclif's own (a damaged manifest, an unloadable command) or pipe's.
    const reported = reportCommandError(error instanceof Error ? error : new Error(String(error)), undefined, {
      json: argv.includes('--json'),
      jsonPrinted: false,
    })
    process.exit(reported.exitCode)
  }
}
