/** pipe's help: oclif's, with the exit-code table under the root help. */
import {Help} from '@oclif/core/help'
import {exitCodeHelp} from '../exit-codes.js'
import {visible} from '../util/terminal-text.js'

export const environmentHelp: ReadonlyArray<readonly [string, string]> = [
  ['PIPE_STORE', 'store directory (default: the nearest .pipe up to the repository root)'],
  ['PIPE_HOME', 'folder of the daily error log, PIPE_HOME/logs/orchestrator-YYYYMMDD.log (default: $XDG_STATE_HOME/pipe/logs, else ~/.local/state/pipe/logs)'],
  ['XDG_STATE_HOME', 'base of the daily error log when PIPE_HOME is not set (default ~/.local/state)'],
  ['OPENAI_API_KEY', 'key for an OpenAI-compatible endpoint (model steps)'],
  ['OPENAI_BASE_URL', 'base URL of an OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1'],
  ['PIPE_INTERACTIVE', '1: prompt for answers and decisions even when stdin is not a terminal; 0: never prompt'],
  ['PIPE_AUDIT_KEY', 'key that seals the store\'s records (HMAC); pipe audit verify needs the same key'],
  ['PIPE_SIGNAL_GRACE_MS', 'how long a run may take to record its state after Ctrl-C or SIGTERM before it is ended (default 5000)'],
  ['PIPE_BWRAP', 'the bubblewrap binary that sandboxes commands (a path; empty: none; default: bwrap on PATH)'],
  ['PIPE_DEBUG', 'print debug output and warnings with their stacks (also DEBUG=*)'],
  ['PIPE_DATA_DIR', 'folder of plugins installed for pipe (default $XDG_DATA_HOME/pipe)'],
  ['PIPE_CONTENT_TYPE', 'json: every command answers as with --json'],
  ['NO_COLOR', 'no colours in progress and errors'],
  ['PIPE_FAULT_*', 'pipe\'s own crash tests (PIPE_FAULT_KILL_AT, _TRACE, _PAUSE_AT, _PAUSE_DIR); never set them'],
  ['PIPE_BUILD_CODE_CACHE', 'pipe\'s own build (npm run build); never set it'],
]

export default class PipeHelp extends Help {
  /** oclif's "Command X not found." quotes what was typed: shown escaped, like every message of pipe's. */
  override async showHelp(argv: string[]): Promise<void> {
    try {
      await super.showHelp(argv)
    } catch (error) {
      if (error instanceof Error) error.message = visible(error.message)
      throw error
    }
  }

  override formatRoot(): string {
    return `${super.formatRoot()}\n\n${this.section('EXIT CODES', exitCodeHelp())}\n\n${this.section(
      'ENVIRONMENT',
      environmentHelp.map(([name, meaning]) => `  ${name.padEnd(22)} ${meaning}`).join('\n'),
    )}`
  }
}
