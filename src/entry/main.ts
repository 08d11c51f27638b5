/**
 * What every group's bundle shares (scripts/bundle.mjs): a group of commands (src/entry/groups/:
 * one file per group, each bundled alone as dist/cli/GROUP.cjs with its own V8 code cache) as the
 * CLI that cli/boot.ts loads once the router (cli/router.ts) has found a command of that group in
 * the manifest. A command's modules are initialised only when it runs (the map's entries are
 * import()s, which esbuild keeps lazy inside the one script); `describe` is what the build writes
 * the command manifest from.
 */
import type {CommandClass, Config} from '../cli/base-command.js'
import {describeCommands, type CommandStatics, type Manifest} from '../cli/manifest.js'
import {PipeError} from '../errors.js'

export type Commands = Record<string, () => Promise<{default: CommandStatics}>>

/** The CLI of the group `group`: its commands by id (words joined by ':'). */
export function commandsOf(group: string, commands: Commands) {
  return {
    /** Which group this bundle is: the loader (cli/boot.ts) refuses a file holding another group's bundle. */
    group,
    /** Runs the command `id` on `argv`: the exit code of a failure it said, else undefined. */
    execute: async (id: string, argv: string[], config: Config): Promise<number | undefined> => {
      const load = commands[id]
      // The manifest names a command this bundle lacks: the two come from different builds, which the user cannot fix but by rebuilding.
      if (load === undefined)
        throw new PipeError(
          'E_INTERNAL',
          `the installation's dist/cli/${group}.cjs has no command ${id}: it and dist/cli/commands.json are from different builds`,
          {
            hint: 'Build pipe again (npm run build) or reinstall it.',
          },
        )
      const command = (await load()).default as CommandClass & {
        execute(this: CommandClass, id: string, argv: string[], config: Config): Promise<number | undefined>
      }
      return command.execute(id, argv, config)
    },
    /** The group's commands' manifest entries, from the classes themselves (the build merges every group's into dist/cli/commands.json). */
    describe: async (version: string, description: string): Promise<Manifest> => {
      const classes: Record<string, CommandStatics> = {}
      for (const [id, load] of Object.entries(commands)) classes[id] = (await load()).default
      return describeCommands(classes, version, description, group)
    },
  }
}
