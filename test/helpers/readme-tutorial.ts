/** Following README.md's tutorial as a reader would: see test/e2e/readme-tutorial.test.ts. */
import {execFile} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin} from './cli.js'

const SECTION = '## Your first pipeline in ten minutes'
const HOME_SHOWN = '/home/you'

export type Item = {kind: 'file'; name: string; text: string; at: number} | {kind: 'command'; line: string; expected: string[]; at: number}

/** The section's files to save and commands to run, in the order a reader meets them. */
export function tutorialItems(readme: string): Item[] {
  const lines = readme.split('\n')
  const start = lines.indexOf(SECTION)
  if (start < 0) throw new Error(`README.md has no "${SECTION}"`)
  const items: Item[] = []
  let saveAs: string | undefined
  for (let i = start + 1; i < lines.length && !lines[i]!.startsWith('## '); i++) {
    const line = lines[i]!
    const named = /Save this as `([^`]+)`/.exec(line)
    if (named) saveAs = named[1]
    const fence = /^```(\w*)$/.exec(line)
    if (!fence) continue
    const body: string[] = []
    let j = i + 1
    for (; j < lines.length && lines[j] !== '```'; j++) body.push(lines[j]!)
    if (fence[1] === 'console') {
      for (let k = 0; k < body.length; k++) {
        if (!body[k]!.startsWith('$ ')) continue
        const command = body[k]!.slice(2)
        const expected: string[] = []
        while (k + 1 < body.length && !body[k + 1]!.startsWith('$ ')) expected.push(body[++k]!)
        items.push({kind: 'command', line: command, expected, at: i + 1})
      }
    } else if (saveAs !== undefined) {
      items.push({kind: 'file', name: saveAs, text: body.join('\n') + '\n', at: i + 1})
      saveAs = undefined
    }
    i = j
  }
  return items
}

/** What varies between readers and days, masked the same way in what the README shows and what ran. */
export function mask(text: string, home: string): string {
  return (
    text
      .replaceAll(home, HOME_SHOWN)
      .replace(/\b([RS])-\d{8}-(\d{4})\b/g, '$1-<date>-$2')
      .replace(/\bF-\d{4}-(\d{3})\b/g, 'F-<year>-$1')
      .replace(/orchestrator-\d{8}\.log/g, 'orchestrator-<date>.log')
      .replace(/\btr-[0-9a-f]+\b/g, 'tr-<trace>')
      .replace(/\b\d+ ms\b/g, '<n> ms')
      .replace(/\(\d+(?:\.\d+)?s\)/g, '(<s>)')
      // A table's columns widen with their widest value: compare cells, not padding; a table's MS column is a duration too.
      .replace(/^(\d+ +\S+ +\S+ +\S+ +\S+ +\S+ +\S+ +)\d+( +\d+)$/gm, '$1<n>$2')
      .replace(/ {2,}/g, '  ')
      .replace(/[ \t]+$/gm, '')
  )
}

function bash(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{code: number; output: string}> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', script], {cwd, env, timeout: 60000}, (error, stdout) => {
      resolve({code: error ? ((error as {code?: number}).code ?? 1) : 0, output: stdout})
    })
  })
}

/** Runs the items as a reader would; returns each command's output (stdout and stderr as one). */
export async function followTutorial(items: Item[], home: string): Promise<Array<{item: Item & {kind: 'command'}; output: string; code: number}>> {
  await mkdir(path.join(home, 'bin'), {recursive: true})
  await writeFile(path.join(home, 'bin', 'pipe'), `#!/bin/sh\nexec ${process.execPath} ${bin} "$@"\n`, {mode: 0o755})
  const env: NodeJS.ProcessEnv = {...process.env, HOME: home, NO_COLOR: '1', PATH: `${path.join(home, 'bin')}:${process.env.PATH ?? ''}`}
  for (const name of ['PIPE_STORE', 'PIPE_HOME', 'XDG_STATE_HOME', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'PIPE_INTERACTIVE', 'PIPE_AUDIT_KEY']) delete env[name]
  const results: Array<{item: Item & {kind: 'command'}; output: string; code: number}> = []
  let cwd = home
  let last = 0
  let date: string | undefined
  for (const item of items) {
    if (item.kind === 'file') {
      await writeFile(path.join(cwd, item.name), item.text)
      continue
    }
    // The README's run ids carry the day it was written; a reader types the ids their own runs printed.
    const line = date === undefined ? item.line : item.line.replace(/\b([RS])-\d{8}-/g, `$1-${date}-`)
    if (line === 'echo $?') {
      results.push({item, output: `${last}\n`, code: 0})
      continue
    }
    const cwdFile = path.join(home, '.cwd')
    const {code, output} = await bash(`${line} 2>&1; status=$?; pwd > ${JSON.stringify(cwdFile)}; exit $status`, cwd, env)
    cwd = (await readFile(cwdFile, 'utf8')).trim()
    last = code
    date ??= /\bR-(\d{8})-\d{4}\b/.exec(output)?.[1]
    results.push({item, output, code})
  }
  return results
}
