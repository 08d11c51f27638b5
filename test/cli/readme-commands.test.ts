/**
 * The command examples of README.md, the chapters of docs/ and the examples' READMEs name commands
 * and flags the built CLI has (read from its command manifest, which the build writes): a renamed or
 * removed flag makes the documentation fail here rather than a reader's copy-paste. And every
 * command and flag a reader can type is shown in at least one example, so none goes undocumented.
 * What the commands do is tested where they are; spec-show-run.test.ts runs the one a reader found
 * broken, and readme-tutorial.test.ts runs the README's tutorial and compares what it prints.
 */
import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {repoRoot} from '../helpers/cli.js'

interface Manifest {
  commands: Record<string, {hidden?: boolean; flags: Record<string, {name: string; char?: string; allowNo?: boolean; hidden?: boolean}>}>
}

const EXAMPLES = ['examples/coding/README.md', 'examples/coding-agent/README.md', 'examples/release-notes/README.md', 'examples/triage/README.md']

/** README.md, every chapter of docs/, and the examples' READMEs. */
async function docs(): Promise<string[]> {
  const chapters = (await readdir(path.join(repoRoot, 'docs'))).filter((f) => f.endsWith('.md')).sort()
  expect(chapters.length, 'docs/ holds the reference chapters').to.be.greaterThan(5)
  return ['README.md', ...chapters.map((f) => `docs/${f}`), ...EXAMPLES]
}

/** The built CLI's commands and flags, from the manifest the build writes (src/cli/manifest.ts). */
async function loadManifest(): Promise<Manifest> {
  return JSON.parse(await readFile(path.join(repoRoot, 'dist', 'cli', 'commands.json'), 'utf8')) as Manifest
}

/** Flags the docs state once for every command rather than in each command's examples. */
const STATED_FOR_ALL = new Set(['json', 'store', 'help'])

/** Each command line of a doc's sh blocks (continuation lines joined), with where it is. */
async function commandLines(file: string): Promise<Array<{at: string; words: string[]}>> {
  const text = await readFile(path.join(repoRoot, file), 'utf8')
  const out: Array<{at: string; words: string[]}> = []
  const lines = text.split('\n')
  let inSh = false
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    if (/^```(sh|bash|console)\s*$/.test(line)) inSh = true
    else if (line.startsWith('```')) inSh = false
    if (!inSh) continue
    let full = line
    let j = i
    while (full.endsWith('\\') && j + 1 < lines.length) full = full.slice(0, -1) + lines[++j]!
    // The command itself: `pipe ...`, `$ pipe ...`, `npx --no-install pipe ...`, `$P/bin/run.js ...`, after env assignments.
    const match = /^\s*(?:\$ )?(?:[A-Z_]+=\S+\s+)*(?:npx --no-install )?(?:pipe|\S*bin\/run\.js)\s+(.*)$/.exec(full.replace(/\s+#\s.*$/, ''))
    if (!match) continue
    const words = match[1]!.split('|')[0]!.trim().split(/\s+/)
    out.push({at: `${file}:${i + 1}`, words})
  }
  return out
}

describe('the command examples in the READMEs', () => {
  it('name commands the CLI has, with flags those commands take', async () => {
    const manifest = await loadManifest()
    const problems: string[] = []
    let checked = 0
    for (const file of await docs()) {
      for (const {at, words} of await commandLines(file)) {
        // "pipe run ..." as an elision stands for any run; a word that is no command is prose.
        const id = [`${words[0]}:${words[1]}`, words[0]!].find((c) => manifest.commands[c] !== undefined)
        if (id === undefined) {
          problems.push(`${at}: no command "${words.slice(0, 2).join(' ')}"`)
          continue
        }
        checked++
        const flags = Object.values(manifest.commands[id]!.flags)
        for (const word of words) {
          if (word === '--') break // the argument vector of policy explain: not pipe's flags
          const flag = /^--([a-z][a-z-]*)(?:=.*)?$/.exec(word)?.[1]
          const short = /^-([a-zA-Z])$/.exec(word)?.[1]
          // --help: every command takes it (the router's, in no command's manifest).
          if (flag !== undefined && flag !== 'help' && !flags.some((f) => f.name === flag || (f.allowNo === true && `no-${f.name}` === flag)))
            problems.push(`${at}: pipe ${id.replace(':', ' ')} has no flag --${flag}`)
          if (short !== undefined && !flags.some((f) => f.char === short)) problems.push(`${at}: pipe ${id.replace(':', ' ')} has no flag -${short}`)
        }
      }
    }
    expect(checked).to.be.greaterThan(90)
    expect(problems).to.deep.equal([])
  })

  it('show every command and every flag a reader can type in at least one example', async () => {
    const manifest = await loadManifest()
    const shown = new Map<string, Set<string>>()
    for (const file of await docs()) {
      for (const {words} of await commandLines(file)) {
        const id = [`${words[0]}:${words[1]}`, words[0]!].find((c) => manifest.commands[c] !== undefined)
        if (id === undefined) continue
        const flags = shown.get(id) ?? new Set<string>()
        shown.set(id, flags)
        for (const word of words) {
          if (word === '--') break
          const long = /^--(?:no-)?([a-z][a-z-]*)(?:=.*)?$/.exec(word)?.[1]
          const short = /^-([a-zA-Z])$/.exec(word)?.[1]
          const flag = long ?? Object.values(manifest.commands[id]!.flags).find((f) => short !== undefined && f.char === short)?.name
          if (flag !== undefined) flags.add(flag)
        }
      }
    }
    const missing: string[] = []
    for (const [id, command] of Object.entries(manifest.commands)) {
      const name = `pipe ${id.replaceAll(':', ' ')}`
      // A hidden command or flag is not offered to readers (pipe --help does not list it).
      if (command.hidden === true) continue
      if (!shown.has(id)) {
        missing.push(`${name}: no example`)
        continue
      }
      for (const flag of Object.values(command.flags)) {
        if (flag.hidden !== true && !STATED_FOR_ALL.has(flag.name) && !shown.get(id)!.has(flag.name)) missing.push(`${name} --${flag.name}: no example`)
      }
    }
    expect(missing).to.deep.equal([])
  })
})
