/**
 * oclif's postrun hook: after `pipe autocomplete` (or the plugin's own cache refresh) has written the
 * completion functions, the bash one is made to fall back to file names. @oclif/plugin-autocomplete
 * completes only command ids and flags, so `pipe run pipel<TAB>` offered nothing; a word that is no
 * command and no flag is a file (a pipeline, a policy, an answers file) for every pipe command that
 * takes one. The zsh function the plugin writes already ends each command's arguments with `_files`.
 */
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Hook} from '@oclif/core/hooks'

/** The plugin's last line of the bash function: what it offers from the command ids and flags. */
const OFFER = 'COMPREPLY=($(compgen -W "$opts" -- "${cur}"))'

/**
 * Nothing offered for a word that is not a flag: the files that start with it, as bash offers them
 * (`-o filenames` adds the `/` of a folder and quotes spaces), one per line so a space in a name
 * stays in it.
 */
const FILES_FALLBACK = [
  OFFER,
  '  if [[ ${#COMPREPLY[@]} -eq 0 && "$cur" != "-"* ]]; then',
  '    compopt -o filenames 2>/dev/null',
  '    mapfile -t COMPREPLY < <(compgen -f -- "$cur")',
  '  fi',
].join('\n')

/** The bash completion function with the file-name fallback; the text unchanged when it has it, or is not the plugin's. */
export function withFileFallback(script: string, bin: string): string {
  if (script.includes(FILES_FALLBACK)) return script
  // `-o default`: readline's own completion (files, ~ and variables) when the function offers nothing.
  return script.replace(OFFER, FILES_FALLBACK).replaceAll(`complete -F _${bin}_autocomplete `, `complete -o default -F _${bin}_autocomplete `)
}

export const completionFiles: Hook<'postrun'> = async function ({Command, config}) {
  if (!Command?.id?.startsWith('autocomplete')) return
  const file = path.join(config.cacheDir, 'autocomplete', 'functions', 'bash', `${config.bin}.bash`)
  let script: string
  try {
    script = await readFile(file, 'utf8')
  } catch {
    // `pipe autocomplete script` writes nothing: there is nothing to change.
    return
  }
  const changed = withFileFallback(script, config.bin)
  if (changed !== script) await writeFile(file, changed)
}
