#!/usr/bin/env node
import {execute} from '@oclif/core'

const argv = process.argv.slice(2)
// oclif's help takes no --json; pipe's root help does, like every command.
// Nor do a command's --help, a topic or --version: with --json each is one JSON document too.
if (argv.includes('--json')) {
  const {jsonOnlyAnswer} = await import('../dist/cli/help-json.js')
  const answer = await jsonOnlyAnswer(import.meta.url, argv)
  if (answer) {
    if (answer.stderr) process.stderr.write(answer.stderr)
    process.stdout.write(`${JSON.stringify(answer.doc, null, 2)}\n`)
    process.exit(answer.exit)
  }
}
await execute({dir: import.meta.url})
