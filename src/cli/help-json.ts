/** `pipe --json`, `pipe help --json`: the root help as one JSON document (commands, exit codes, environment). */
import {Config} from '@oclif/core'
import {exitCodeTable} from '../exit-codes.js'
import {environmentHelp} from './help.js'

export interface HelpJson {
  name: string
  version: string
  description: string
  commands: Array<{id: string; summary: string}>
  exit_codes: typeof exitCodeTable
  environment: Array<{name: string; meaning: string}>
}

/** Whether argv asks for the root help as JSON: --json with nothing but help words. */
export function wantsHelpJson(argv: readonly string[]): boolean {
  return argv.includes('--json') && argv.every((a) => a === '--json' || a === 'help' || a === '--help' || a === '-h')
}

export async function helpJson(root: string | URL): Promise<HelpJson> {
  const config = await Config.load(typeof root === 'string' ? root : root.toString())
  const commands = config.commands
    .filter((c) => !c.hidden)
    .map((c) => ({id: c.id.replace(/:/g, ' '), summary: c.summary ?? c.description?.split('\n')[0] ?? ''}))
    .sort((a, b) => a.id.localeCompare(b.id))
  return {
    name: config.bin,
    version: config.version,
    description: typeof config.pjson.description === 'string' ? config.pjson.description : '',
    commands,
    exit_codes: exitCodeTable,
    environment: environmentHelp.map(([name, meaning]) => ({name, meaning})),
  }
}
