/** pipe's help: oclif's, with the exit-code table under the root help. */
import {Help} from '@oclif/core/help'
import {exitCodeHelp} from '../exit-codes.js'

export const environmentHelp: ReadonlyArray<readonly [string, string]> = [
  ['PIPE_STORE', 'store directory (default .pipe in the working directory)'],
  ['PIPE_HOME', 'home of the daily error log, PIPE_HOME/logs (default ~/.canonical)'],
  ['OPENAI_API_KEY', 'key for an OpenAI-compatible endpoint (model steps)'],
  ['OPENAI_BASE_URL', 'base URL of an OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1'],
]

export default class PipeHelp extends Help {
  override formatRoot(): string {
    return `${super.formatRoot()}\n\n${this.section('EXIT CODES', exitCodeHelp())}\n\n${this.section(
      'ENVIRONMENT',
      environmentHelp.map(([name, meaning]) => `  ${name.padEnd(16)} ${meaning}`).join('\n'),
    )}`
  }
}
