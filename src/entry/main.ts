/**
 * The CLI's bundle (dist/cli/main.cjs, scripts/bundle.mjs): the commands, each module initialised
 * only when its command runs (the map's entries are import()s, which esbuild keeps lazy inside the
 * one bundle). cli/boot.ts loads it only once the router (cli/router.ts) has found a command to
 * run; `describe` is what the build writes the command manifest from.
 */
import type {CommandClass, Config} from '../cli/base-command.js'
import {describeCommands, type CommandStatics, type Manifest} from '../cli/manifest.js'
import {COMMANDS} from './commands.js'

/** Runs the command `id` on `argv`: the exit code of a failure it said, else undefined. */
export async function execute(id: string, argv: string[], config: Config): Promise<number | undefined> {
  const load = COMMANDS[id]
  if (load === undefined) throw new Error(`no command ${id} in the CLI's bundle`)
  const command = (await load()).default as CommandClass & {
    execute(this: CommandClass, id: string, argv: string[], config: Config): Promise<number | undefined>
  }
  return command.execute(id, argv, config)
}

/** Every command's manifest entry, from the classes themselves (the build writes it to dist/cli/commands.json). */
export async function describe(version: string, description: string): Promise<Manifest> {
  const classes: Record<string, CommandStatics> = {}
  for (const [id, load] of Object.entries(COMMANDS)) classes[id] = (await load()).default
  return describeCommands(classes, version, description)
}
