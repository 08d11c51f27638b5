/** pipe's help: oclif's, with the exit-code table under the root help. */
import {Help} from '@oclif/core/help'
import {exitCodeHelp} from '../exit-codes.js'
import {visible} from '../util/terminal-text.js'

export const environmentHelp: ReadonlyArray<readonly [string, string]> = [
  ['PIPE_STORE', 'store directory (default: the nearest .pipe up to the repository root)'],
  ['PIPE_HOME', 'home of the daily error log, PIPE_HOME/logs (default ~/.canonical)'],
  ['OPENAI_API_KEY', 'key for an OpenAI-compatible endpoint (model steps)'],
  ['OPENAI_BASE_URL', 'base URL of an OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1'],
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
      environmentHelp.map(([name, meaning]) => `  ${name.padEnd(16)} ${meaning}`).join('\n'),
    )}`
  }
}
