/**
 * The command examples of README.md and the examples' READMEs name commands and flags the built CLI
 * has (read from its oclif manifest, which the build writes): a renamed or removed flag makes the
 * documentation fail here rather than a reader's copy-paste. What the commands do is tested where
 * they are; spec-show-run.test.ts runs the one a reader found broken.
 */
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {repoRoot} from '../helpers/cli.js'

interface Manifest {
  commands: Record<string, {flags: Record<string, {name: string; char?: string; allowNo?: boolean}>}>
}

const DOCS = ['README.md', 'examples/coding/README.md', 'examples/coding-agent/README.md', 'examples/release-notes/README.md', 'examples/triage/README.md']

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
    const manifest = JSON.parse(await readFile(path.join(repoRoot, 'oclif.manifest.json'), 'utf8')) as Manifest
    // The core plugins' commands (pipe autocomplete) are in their own manifests.
    const {oclif} = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as {oclif: {plugins: string[]}}
    for (const plugin of oclif.plugins) {
      const own = JSON.parse(await readFile(path.join(repoRoot, 'node_modules', ...plugin.split('/'), 'oclif.manifest.json'), 'utf8')) as Manifest
      Object.assign(manifest.commands, own.commands)
    }
    const problems: string[] = []
    let checked = 0
    for (const file of DOCS) {
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
          if (flag !== undefined && !flags.some((f) => f.name === flag || (f.allowNo === true && `no-${f.name}` === flag))) problems.push(`${at}: pipe ${id.replace(':', ' ')} has no flag --${flag}`)
          if (short !== undefined && !flags.some((f) => f.char === short)) problems.push(`${at}: pipe ${id.replace(':', ' ')} has no flag -${short}`)
        }
      }
    }
    expect(checked).to.be.greaterThan(90)
    expect(problems).to.deep.equal([])
  })
})
