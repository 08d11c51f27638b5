/**
 * Tab completion for bash and zsh, generated from the command manifest (cli/manifest.ts): command
 * names and topics (`pipe re<TAB>` offers `replay resume review`, `pipe snapshot s<TAB>` offers
 * `show`), each command's flags, a flag's fixed values (zsh), and file names for any other word
 * (a pipeline, a policy, an answers file). `pipe autocomplete SHELL` writes the functions to
 * pipe's cache folder; `pipe autocomplete script SHELL` prints the line that sources them, so a
 * shell's start-up file keeps one line while an upgrade of pipe rewrites the functions.
 */
import {writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {makeDirs} from '../util/fs.js'
import type {CommandMeta, FlagMeta, Manifest} from './manifest.js'

export type Shell = 'bash' | 'zsh'

/** pipe's cache folder: $XDG_CACHE_HOME/pipe, else ~/.cache/pipe. */
export function cacheDir(bin: string): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), bin)
}

const visible = (manifest: Manifest): CommandMeta[] =>
  Object.values(manifest.commands)
    .filter((c) => !c.hidden)
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))

const flagsOf = (command: CommandMeta): FlagMeta[] => Object.values(command.flags).filter((f) => !f.hidden)

/**
 * The bash function: one line per command, its id and its flags, and the words typed so far read
 * against them. A word that completes to nothing (no command, no flag) is a file name: `-o
 * filenames` adds a folder's `/` and quotes spaces, one name a line keeps a space in its name.
 */
export function bashScript(manifest: Manifest): string {
  const bin = manifest.bin
  const lines = visible(manifest).map((c) =>
    [c.id, ...flagsOf(c).flatMap((f) => [`--${f.name}`, ...(f.type === 'boolean' && f.allowNo ? [`--no-${f.name}`] : [])])].join(' '),
  )
  return `#!/usr/bin/env bash
# pipe's completion for bash (written by ${bin} autocomplete; made from its command manifest).

_${bin}_autocomplete()
{
  local cur="\${COMP_WORDS[COMP_CWORD]}" IFS=$' \\t\\n' typed="" id="" line n i opts=""
  local -a words=() ids=()
  COMPREPLY=()
  local commands="
${lines.join('\n')}
"
  while read -r line; do [[ -n "$line" ]] && ids+=("\${line%% *}"); done <<< "$commands"
  # The command words before the one being completed: the first flag ends them.
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ "\${COMP_WORDS[i]}" == -* ]] && break
    words+=("\${COMP_WORDS[i]}")
  done
  # The longest run of them that is a command.
  for ((n = \${#words[@]}; n > 0; n--)); do
    typed="$(IFS=:; echo "\${words[*]:0:n}")"
    for i in "\${ids[@]}"; do [[ "$i" == "$typed" ]] && id="$typed" && break 2; done
  done
  if [[ "$cur" == -* ]]; then
    [[ -n "$id" ]] && opts="$(printf '%s\\n' "$commands" | sed -n "s/^$id //p")"
  elif [[ -z "$id" ]]; then
    typed="$(IFS=:; echo "\${words[*]}")"
    for i in "\${ids[@]}"; do
      if [[ -z "$typed" ]]; then opts+="\${i%%:*} "
      elif [[ "$i" == "$typed:"* ]]; then i="\${i#"$typed:"}"; opts+="\${i%%:*} "
      fi
    done
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  if [[ \${#COMPREPLY[@]} -eq 0 && "$cur" != "-"* ]]; then
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}

complete -o default -F _${bin}_autocomplete ${bin}
`
}

/** Text inside a zsh double-quoted _arguments spec: its quoting characters and the spec's own brackets and colons escaped. */
function zshText(text: string): string {
  return (text.split('\n')[0] ?? '').replace(/([\\"`$])/g, '\\$1').replace(/([[\]:])/g, '\\$1')
}

/** The shapes of a flag's value (its helpValue, `FILE|-`) that name a path: only such a value completes as a file name. */
const PATH_VALUES = new Set(['FILE', 'DIR', 'PATH', 'KEYFILE', 'PUBKEY'])

/**
 * What a flag's value completes to: its fixed values, file names when its help value names a path
 * (`--input FILE|-`, `--store DIR|URL`), the words of a help value that lists them (`go|hold|drop`),
 * else nothing (a name, a text, a number, an id: zsh shows the value's name and offers no files).
 */
function zshValue(flag: FlagMeta): string {
  if (flag.options) return `:${flag.name} options:(${flag.options.join(' ')})`
  const shapes = (flag.helpValue ?? '').split('|')
  if (shapes.some((shape) => PATH_VALUES.has(shape))) return `:${flag.name}:_files`
  if (shapes.length > 1 && shapes.every((shape) => /^[a-z][a-z-]*$/.test(shape))) return `:${flag.name}:(${shapes.join(' ')})`
  return `:${zshText(flag.helpValue ?? flag.name)}: `
}

function zshFlag(flag: FlagMeta): string[] {
  const help = `"[${zshText(flag.summary ?? flag.description ?? '')}]`
  const value = flag.type === 'boolean' ? '"' : `${zshValue(flag)}"`
  const names = flag.char ? `{-${flag.char},--${flag.name}}` : `--${flag.name}`
  const repeat = flag.type === 'option' && flag.multiple ? '"*"' : ''
  return [`${repeat}${names}${help}${value}`, ...(flag.type === 'boolean' && flag.allowNo ? [`--no-${flag.name}"[${zshText(`Not --${flag.name}.`)}]"`] : [])]
}

/** The zsh function: commands and topics with their summaries, each command's flags with theirs, then files. */
export function zshScript(manifest: Manifest): string {
  const bin = manifest.bin
  const commands = visible(manifest)
  const firstWords = [...new Set(commands.map((c) => c.id.split(':')[0]!))]
  const summary = (word: string): string => manifest.commands[word]?.summary ?? manifest.topics[word]?.description ?? ''
  const cases = commands.map((c) => {
    const specs = [...flagsOf(c).flatMap(zshFlag), '"*: :_files"']
    return `${c.id.replaceAll(':', '\\:')})\n_arguments -S \\\n${specs.join(' \\\n')}\n;;`
  })
  const topics = Object.keys(manifest.topics).filter((t) => commands.some((c) => c.id.startsWith(`${t}:`)))
  const topicCases = topics.map((t) => {
    const subs = commands.filter((c) => c.id.startsWith(`${t}:`)).map((c) => `"${c.id.slice(t.length + 1)}[${zshText(c.summary ?? '')}]"`)
    return `${t})\n_values "${t} command" \\\n${subs.join(' \\\n')}\n;;`
  })
  return `#compdef ${bin}
# pipe's completion for zsh (written by ${bin} autocomplete; made from its command manifest).

_${bin}_command() {
  case "$1" in
${cases.join('\n')}
*)
_files
;;
  esac
}

_${bin}() {
  local context state state_descr line
  typeset -A opt_args
  _arguments -C "1: :->first" "*:: :->rest"
  case "$state" in
    first)
      _values "${bin} command" \\
${firstWords.map((w) => `"${w}[${zshText(summary(w))}]"`).join(' \\\n')}
      ;;
    rest)
      if (( \${+_${bin}_topics[$line[1]]} )) && (( CURRENT == 2 )); then
        case "$line[1]" in
${topicCases.join('\n')}
        esac
      elif (( \${+_${bin}_topics[$line[1]]} )) && [[ -n "$line[2]" ]] && [[ "$line[2]" != -* ]]; then
        shift words; (( CURRENT-- ))
        _${bin}_command "$line[1]:$line[2]"
      else
        _${bin}_command "$line[1]"
      fi
      ;;
  esac
}

typeset -gA _${bin}_topics
_${bin}_topics=(${topics.map((t) => `${t} 1`).join(' ')})

_${bin} "$@"
`
}

/** Writes the shell's function and its setup file into the cache folder; returns the line that sources the setup. */
export function writeCompletion(manifest: Manifest, shell: Shell): string {
  const bin = manifest.bin
  const base = path.join(cacheDir(bin), 'autocomplete')
  const folder = path.join(base, 'functions', shell)
  makeDirs(folder)
  const upper = bin.toUpperCase()
  if (shell === 'bash') {
    const functions = path.join(folder, `${bin}.bash`)
    writeFileSync(functions, bashScript(manifest))
    writeFileSync(
      path.join(base, 'bash_setup'),
      `${upper}_AC_BASH_COMPFUNC_PATH=${functions} && test -f $${upper}_AC_BASH_COMPFUNC_PATH && source $${upper}_AC_BASH_COMPFUNC_PATH;\n`,
    )
  } else {
    writeFileSync(path.join(folder, `_${bin}`), zshScript(manifest))
    writeFileSync(path.join(base, 'zsh_setup'), `fpath=(${folder} $fpath);\nautoload -Uz compinit;\ncompinit;\n`)
  }
  return setupLine(bin, shell)
}

/** What `pipe autocomplete script SHELL` prints: the line a shell's start-up file sources the setup with. */
export function setupLine(bin: string, shell: Shell): string {
  const variable = `${bin.toUpperCase()}_AC_${shell.toUpperCase()}_SETUP_PATH`
  return `${variable}=${path.join(cacheDir(bin), 'autocomplete', `${shell}_setup`)} && test -f $${variable} && source $${variable}; # ${bin} autocomplete setup`
}
