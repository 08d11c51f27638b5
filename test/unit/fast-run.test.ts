/**
 * The fast path of `pipe run` (cli/fast-run.ts) reads an argv only where it reads it as oclif does:
 * for every argv below, it either declines or gives the command exactly the args and flags oclif's
 * parser gives the oclif command (commands/run.ts). The flags come from the built oclif manifest, so
 * a flag added to the command is checked here through the same table the fast path reads.
 */
import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import path from 'node:path'
import type {Config} from '@oclif/core/config'
import Run from '../../src/commands/run.js'
import {parseRunArgv, type ManifestCommand} from '../../src/cli/fast-run.js'
import {repoRoot} from '../helpers/cli.js'

const manifest = JSON.parse(readFileSync(path.join(repoRoot, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, ManifestCommand>}
const command = manifest.commands.run!

/** oclif's answer for argv: the parsed args and flags, or the error it reports. */
async function oclifParse(argv: string[]): Promise<{args: unknown; flags: unknown} | {error: string}> {
  // Command.parse asks the config only for preparse hooks; a parse reads nothing else from it.
  const config = {bin: 'pipe', runHook: () => Promise.resolve({successes: [], failures: []}), scopedEnvVar: () => undefined} as unknown as Config
  class Probe extends Run {
    async probe(): Promise<{args: unknown; flags: unknown}> {
      const {args, flags} = await this.parse(Run)
      return {args, flags}
    }
  }
  try {
    return await new Probe(argv, config).probe()
  } catch (error) {
    return {error: (error as Error).message}
  }
}

const file = 'pipelines/default.yaml'

/** Every flag in each form, with good, bad and odd values, placed before and after the pipeline. */
function corpus(): string[][] {
  const cases: string[][] = [
    [file],
    [],
    [file, 'second.yaml'],
    [file, '--'],
    ['--', file],
    [file, '--bogus'],
    [file, '--help'],
    [file, '-h'],
    [file, '--json=true'],
    [file, '--no-json'],
    [file, '--json', '--json'],
    [file, '-ta'],
    [file, '-tx'],
    [file, '-t=x'],
    [file, '-t', 'x', '-a', 'y'],
    [file, '--note', 'n'],
    [file, '--note', 'n', '--decision', 'go'],
    ['--decision', 'go', '--note', 'n', file],
    [file, '-i', 'a=1', '-i', 'b=2'],
    ['-i', 'a=1', file],
    ['-i', 'a=1', '--json', file],
    [file, '-i', 'a=1', 'extra'],
    [file, '-i', 'a=1', '--json', 'extra'],
    [file, '--input', '-'],
    [file, '--input', '-x'],
    [file, '--input', '--json'],
    [file, '--input', ''],
    [file, '--input='],
    [file, '--input=a=b'],
    [file, '--input', 'a', '--input', 'b'],
    [file, '--text', 'two words', '--json'],
    [file, '--text'],
    ['-', '--text', 'x'],
    [file, '--constructor', 'x'],
    [file, '--__proto__', 'x'],
    [file, '--toString'],
    [file, '-', 'x'],
  ]
  for (const flag of Object.values(command.flags)) {
    const forms = [`--${flag.name}`, ...(flag.char ? [`-${flag.char}`] : [])]
    for (const form of forms) {
      if (flag.type === 'boolean') {
        cases.push([file, form], [form, file], [file, `${form}=false`])
        continue
      }
      const values = [...(flag.options ?? ['value.txt', 'NAME=VALUE']), 'not-an-option', '-', 'x y']
      for (const value of values) cases.push([file, form, value], [form, value, file], [file, `${form}=${value}`], [file, form, value, form, value])
      cases.push([file, form])
    }
  }
  return cases
}

describe('pipe run: the fast path parses as oclif does', function () {
  this.timeout(60000)

  it('for every argv it reads, its args and flags are oclif\'s; what oclif would reject it declines', async () => {
    const disagreements: string[] = []
    let read = 0
    for (const argv of corpus()) {
      const fast = parseRunArgv(argv, command)
      if (fast === undefined) continue
      read++
      const oclif = await oclifParse(argv)
      if ('error' in oclif) disagreements.push(`${JSON.stringify(argv)}: the fast path read it, oclif says ${oclif.error}`)
      else if (JSON.stringify(oclif) !== JSON.stringify(fast) || !deepEqual(oclif, fast)) disagreements.push(`${JSON.stringify(argv)}: fast ${JSON.stringify(fast)} vs oclif ${JSON.stringify(oclif)}`)
    }
    expect(disagreements).to.deep.equal([])
    // Not vacuous: the plain forms, every flag's among them, are read by the fast path.
    expect(read).to.be.greaterThan(60)
  })

  it('no argv it reads is one bin/run.js would answer as JSON help or version (the fast path goes first)', async () => {
    const {jsonOnlyAnswer} = await import('../../src/cli/help-json.js')
    const answered: string[] = []
    let read = 0
    for (const base of corpus()) {
      for (const argv of [[...base, '--json'], ['--json', ...base]]) {
        if (parseRunArgv(argv, command) === undefined) continue
        read++
        if ((await jsonOnlyAnswer(repoRoot, ['run', ...argv])) !== null) answered.push(JSON.stringify(argv))
      }
    }
    expect(answered).to.deep.equal([])
    expect(read).to.be.greaterThan(60)
  })

  it('reads the forms the README shows', () => {
    const readme: string[][] = [
      [file, '--input', 'examples/full-prd.md', '--decision', 'go'],
      [file, '--input', 'examples/one-sentence.txt', '--answers', 'examples/one-sentence.answers.yaml', '--decision', 'go'],
      [file, '--input', '-', '--json'],
      [file, '--text', 'Build a CSV export', '--store', '/tmp/pipe-store'],
      ['release-notes.yaml', '-i', 'since=v1.2', '-i', 'max_items=5'],
      [file, '--input', 'examples/full-prd.md', '--dry-run'],
      ['release-notes.yaml', '-i', 'since=v1.2', '--replay', 'notes.cassette.jsonl'],
    ]
    for (const argv of readme) expect(parseRunArgv(argv, command), argv.join(' ')).to.not.equal(undefined)
    expect(parseRunArgv([file, '-i', 'since=v1.2', '-i', 'max_items=5', '--json'], command)).to.deep.equal({args: {pipeline: file}, flags: {set: ['since=v1.2', 'max_items=5'], json: true}})
  })

  it('declines a flag whose attributes it does not know, so a flag added to the command with one goes to oclif', () => {
    const withDefault: ManifestCommand = {...command, flags: {...command.flags, input: {...command.flags.input!, default: 'x'}}}
    expect(parseRunArgv([file, '--text', 'x'], withDefault)).to.equal(undefined)
    const withEnv: ManifestCommand = {...command, flags: {...command.flags, store: {...command.flags.store!, env: 'PIPE_STORE'}}}
    expect(parseRunArgv([file], withEnv)).to.equal(undefined)
    const negatable: ManifestCommand = {...command, flags: {...command.flags, json: {...command.flags.json!, allowNo: true}}}
    expect(parseRunArgv([file], negatable)).to.equal(undefined)
    expect(parseRunArgv([file], {...command, strict: false})).to.equal(undefined)
    expect(parseRunArgv([file], {...command, args: {...command.args, second: {name: 'second'}}})).to.equal(undefined)
  })

  it('declines, without throwing, a manifest whose run command is damaged (a flag or argument of the wrong shape)', () => {
    const flag = (name: string, change: Record<string, unknown>): ManifestCommand => ({...command, flags: {...command.flags, [name]: {...command.flags[name]!, ...change}}})
    const damaged: Array<[string, unknown]> = [
      ['a flag that is null', {...command, flags: {...command.flags, input: null}}],
      ['an argument that is null', {...command, args: {pipeline: null}}],
      ['options that are a string', flag('decision', {options: 'go hold drop maybe'})],
      ['options that hold a number', flag('decision', {options: ['go', 1]})],
      ['dependsOn that is a string', flag('note', {dependsOn: 'decision'})],
      ['dependsOn naming no flag', flag('note', {dependsOn: ['verdict']})],
      ['a char that is a number', flag('set', {char: 5})],
      ['a type it does not know', flag('input', {type: 'custom'})],
      ['a name other than its key', flag('input', {name: 'text'})],
      ['multiple that is a string', flag('input', {multiple: 'yes'})],
      ['an argument named other than its key', {...command, args: {pipeline: {name: 'file', required: true}}}],
      ['flags that are null', {...command, flags: null}],
    ]
    const argv = [file, '--input', 'a', '--text', 'x', '--decision', 'maybe', '--note', 'n', '-i', 'a=1']
    for (const [what, manifest] of damaged) {
      let answer: unknown
      try {
        answer = parseRunArgv(argv, manifest as ManifestCommand)
      } catch (error) {
        answer = `threw ${(error as Error).message}`
      }
      expect(answer, what).to.equal(undefined)
    }
  })
})

function deepEqual(a: unknown, b: unknown): boolean {
  try {
    expect(a).to.deep.equal(b)
    return true
  } catch {
    return false
  }
}
