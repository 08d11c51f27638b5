/** oclif's command_not_found hook: `pipe valdate` is an E_INVALID_ARGS error with the closest command. */
import type {Hook} from '@oclif/core/hooks'
import {exitUnknownCommand} from './unknown-command.js'

export const commandNotFound: Hook<'command_not_found'> = async function (options) {
  exitUnknownCommand(options.config, options.id, [...(options.argv ?? []), ...process.argv.slice(2)].includes('--json'))
}
