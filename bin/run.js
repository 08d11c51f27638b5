#!/usr/bin/env node
import {execute} from '@oclif/core'

const argv = process.argv.slice(2)
// oclif's help takes no --json; pipe's root help does, like every command.
if (argv.includes('--json')) {
  const {helpJson, wantsHelpJson} = await import('../dist/cli/help-json.js')
  if (wantsHelpJson(argv)) {
    process.stdout.write(`${JSON.stringify(await helpJson(import.meta.url), null, 2)}\n`)
    process.exit(0)
  }
}
await execute({dir: import.meta.url})
