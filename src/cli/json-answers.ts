/**
 * oclif's init hook: the answers oclif gives as text before any command runs (the root help for a
 * bare `pipe`, --version, a topic) are one JSON document with --json, as every command's are. The
 * help class (cli/help.ts) writes them; the forms that reach it by oclif's own routing (`pipe help
 * --json`, `pipe run --help --json`) need no hook.
 */
import type {Hook} from '@oclif/core/hooks'
import {jsonText} from '../util/terminal-text.js'
import PipeHelp, {rootJson, versionJson} from './help.js'

export const jsonAnswers: Hook<'init'> = async function ({id, argv, config}) {
  if (id === undefined || !(id === '--json' || argv.includes('--json'))) return
  let doc: unknown
  if (id === '--json' && argv.length === 0) doc = rootJson(config)
  else if (id === '--version') doc = versionJson(config)
  else if (!config.findCommand(id) && config.findTopic(id)) {
    await new PipeHelp(config).showHelp([id, '--json'])
    process.exit(0)
  } else return
  process.stdout.write(`${jsonText(doc)}\n`)
  process.exit(0)
}
