import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, pipe, tempDir} from '../helpers/cli.js'
import {needs} from '../helpers/tools.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-autocomplete-e2e-')))
afterEach(async () => cleanup())

/** Runs `script` in a real bash with `pipe` on its PATH as the built CLI. */
function bash(script: string, env: Record<string, string>): Promise<{code: number | null; stdout: string; stderr: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['--norc', '--noprofile', '-c', `pipe() { ${JSON.stringify(process.execPath)} ${JSON.stringify(bin)} "$@"; }\n${script}`], {
      env: {...process.env, ...env},
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout, stderr}))
  })
}

/**
 * A real interactive zsh (zle completes only on a terminal: util-linux's `script` gives it one),
 * typed into as a person would. Each `complete(words)` types the words and Tab, then kills the line
 * and runs `echo MARK-n`: zle handles keys in order, so what Tab printed comes before the mark, and
 * the next line is typed only once zle is editing again (it switches bracketed paste on), never
 * into the terminal's own line editing while a command runs. No duration is guessed.
 */
class Zsh {
  private out = ''
  private marks = 0
  private readonly waiting = new Set<() => void>()
  private readonly child: ReturnType<typeof spawn>

  constructor(cwd: string, env: Record<string, string>) {
    const shim = path.join(env.HOME!, 'pipe')
    this.child = spawn('script', ['-qfec', 'zsh -f -i', '/dev/null'], {
      cwd,
      env: {...env, TERM: 'dumb', PS1: '> ', PATH: `${path.dirname(shim)}:${process.env.PATH ?? ''}`},
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.out += d
      for (const check of [...this.waiting]) check()
    })
    this.child.on('close', () => {
      for (const check of [...this.waiting]) check()
    })
  }

  private until(pattern: RegExp, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (pattern.test(this.out)) {
          this.waiting.delete(check)
          resolve()
        } else if (this.child.exitCode !== null || this.child.signalCode !== null) {
          this.waiting.delete(check)
          reject(new Error(`zsh ended before ${what}: ${JSON.stringify(this.out.slice(-600))}`))
        }
      }
      this.waiting.add(check)
      check()
    })
  }

  /** Runs `line`, and waits until zsh is editing the next one. */
  async run(line: string): Promise<void> {
    const mark = `MARK-${++this.marks}`
    this.child.stdin!.write(`${line}; echo ${mark}\n`)
    await this.until(new RegExp(`\\n${mark}\\r\\n[\\s\\S]*\\x1b\\[\\?2004h`), mark)
  }

  /** What zsh printed while completing `typed` (its listing, or the line completed in place). */
  async complete(typed: string): Promise<string> {
    const from = this.out.length
    await this.run(`${typed}\t\x15true`)
    return this.out.slice(from)
  }

  async exit(): Promise<void> {
    this.child.stdin!.end('exit\n')
    await new Promise((resolve) => (this.child.exitCode !== null ? resolve(null) : this.child.on('close', resolve)))
  }
}

/** What the completion function offers for the words typed so far (the last one being completed). */
const complete = (...words: string[]): string =>
  `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMP_LINE='${words.join(' ')}'; _pipe_autocomplete; echo "\${COMPREPLY[*]}"`

describe('pipe autocomplete (built CLI, real bash and zsh)', function () {
  this.timeout(120000)

  it("pipe autocomplete bash builds the completion; the script it gives, sourced in bash, completes pipe's commands, topics and flags", async () => {
    const env = {XDG_CACHE_HOME: path.join(dir, 'cache'), PIPE_HOME: path.join(dir, 'home')}
    const setup = await pipe(['autocomplete', 'bash'], {cwd: dir, env})
    expect(setup.code, setup.stderr).to.equal(0)
    expect(setup.stdout).to.contain('pipe autocomplete script bash')

    const script = await pipe(['autocomplete', 'script', 'bash'], {cwd: dir, env})
    expect(script.code, script.stderr).to.equal(0)
    expect(script.stdout.trim().replace(env.XDG_CACHE_HOME, 'CACHE')).to.equal(
      'PIPE_AC_BASH_SETUP_PATH=CACHE/pipe/autocomplete/bash_setup && test -f $PIPE_AC_BASH_SETUP_PATH && source $PIPE_AC_BASH_SETUP_PATH; # pipe autocomplete setup',
    )
    // What it sources names every command with its flags.
    const functions = await readFile(path.join(env.XDG_CACHE_HOME, 'pipe', 'autocomplete', 'functions', 'bash', 'pipe.bash'), 'utf8')
    for (const line of ['run --json --input', 'resume --json', 'snapshot:show --json', 'validate --json', 'autocomplete '])
      expect(functions).to.contain(`\n${line}`)

    const out = await bash(
      [
        `eval "$(pipe autocomplete script bash)"`,
        'complete -p pipe',
        complete('pipe', 're'),
        complete('pipe', 'snapshot', 's'),
        complete('pipe', 'run', '--po'),
        complete('pipe', 'au'),
      ].join('\n'),
      env,
    )
    expect(out.code, out.stderr).to.equal(0)
    expect(out.stdout.split('\n')).to.deep.equal([
      'complete -o default -F _pipe_autocomplete pipe',
      'replay resume review',
      'show',
      '--policy',
      'audit autocomplete',
      '',
    ])
  })

  it('a word that is no command and no flag completes as a file name: pipe run pipel<TAB> offers pipelines/', async () => {
    const env = {XDG_CACHE_HOME: path.join(dir, 'cache'), PIPE_HOME: path.join(dir, 'home')}
    const setup = await pipe(['autocomplete', 'bash'], {cwd: dir, env})
    expect(setup.code, setup.stderr).to.equal(0)
    const work = path.join(dir, 'work')
    await mkdir(path.join(work, 'pipelines'), {recursive: true})
    await writeFile(path.join(work, 'pipelines', 'nightly audit.yaml'), 'version: 1\n')
    await writeFile(path.join(work, 'policy.yaml'), 'version: 1\n')
    const out = await bash(
      [
        `eval "$(pipe autocomplete script bash)"`,
        `cd ${JSON.stringify(work)}`,
        complete('pipe', 'run', 'pipel'),
        // A name with a space stays one name.
        `COMP_WORDS=(pipe validate 'pipelines/n'); COMP_CWORD=2; _pipe_autocomplete; printf '%s|' "\${COMPREPLY[@]}"; echo`,
        complete('pipe', 'validate', '--policy', 'pol'),
        // Commands and flags still complete as before, not as files.
        complete('pipe', 'snapshot', 's'),
        complete('pipe', 'run', '--po'),
      ].join('\n'),
      env,
    )
    expect(out.code, out.stderr).to.equal(0)
    expect(out.stdout.split('\n')).to.deep.equal(['pipelines', 'pipelines/nightly audit.yaml|', 'policy.yaml', 'show', '--policy', ''])
  })

  it('pipe autocomplete zsh builds a zsh completion function that names the commands and their flags', async () => {
    const env = {XDG_CACHE_HOME: path.join(dir, 'cache'), PIPE_HOME: path.join(dir, 'home')}
    const setup = await pipe(['autocomplete', 'zsh'], {cwd: dir, env})
    expect(setup.code, setup.stderr).to.equal(0)
    const script = await pipe(['autocomplete', 'script', 'zsh'], {cwd: dir, env})
    expect(script.stdout.trim().replace(env.XDG_CACHE_HOME, 'CACHE')).to.equal(
      'PIPE_AC_ZSH_SETUP_PATH=CACHE/pipe/autocomplete/zsh_setup && test -f $PIPE_AC_ZSH_SETUP_PATH && source $PIPE_AC_ZSH_SETUP_PATH; # pipe autocomplete setup',
    )
    const zsh = await readFile(path.join(env.XDG_CACHE_HOME, 'pipe', 'autocomplete', 'functions', 'zsh', '_pipe'), 'utf8')
    expect(zsh).to.contain('#compdef pipe')
    expect(zsh).to.contain('"run[Run a pipeline')
    expect(zsh).to.contain('\n--policy"[')
    // A flag with a fixed set of values completes them.
    expect(zsh).to.contain(':cache options:(off reuse)"')
    // A command's arguments (a pipeline, a policy) complete as file names.
    const run = zsh.slice(zsh.indexOf('\nrun)\n'))
    expect(run.slice(0, run.indexOf(';;'))).to.contain('\n"*: :_files"')
  })

  it('in a real zsh, the function pipe autocomplete zsh sets up completes commands, topics, flags, their values and files', async function () {
    needs(this, 'zsh')
    const home = path.join(dir, 'home')
    const work = path.join(dir, 'work')
    await mkdir(path.join(work, 'pipelines'), {recursive: true})
    await mkdir(home, {recursive: true})
    await writeFile(path.join(work, 'pipelines', 'nightly.yaml'), 'version: 1\n')
    // What `pipe` is on this zsh's PATH: the built CLI.
    await writeFile(path.join(home, 'pipe'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(bin)} "$@"\n`, {mode: 0o755})
    const env = {HOME: home, XDG_CACHE_HOME: path.join(dir, 'cache'), PIPE_HOME: path.join(dir, 'pipe-home')}
    const setup = await pipe(['autocomplete', 'zsh'], {cwd: dir, env})
    expect(setup.code, setup.stderr).to.equal(0)
    const zsh = new Zsh(work, env)
    try {
      await zsh.run('eval "$(pipe autocomplete script zsh)"')
      const commands = await zsh.complete('pipe re')
      for (const listed of ['replay  -- Re-run', 'resume  -- Continue', 'review  -- Decide']) expect(commands).to.contain(listed)
      expect(await zsh.complete('pipe snapshot s')).to.contain('pipe snapshot show ')
      expect(await zsh.complete('pipe run --po')).to.contain('pipe run --policy ')
      expect(await zsh.complete('pipe run --cache ')).to.match(/\noff +reuse\r/)
      expect(await zsh.complete('pipe run pipel')).to.contain('pipe run pipelines/')
      // A flag's value completes as what it is: a path as files, listed words as themselves, a name as nothing.
      expect(await zsh.complete('pipe run --input pipel')).to.contain('pipe run --input pipelines/')
      expect(await zsh.complete('pipe run --decision ')).to.match(/\ndrop +go +hold\r/)
      expect(await zsh.complete('pipe review R-20261125-0001 --as pipel')).to.not.contain('pipelines/')
      expect(await zsh.complete('pipe worker --concurrency pipel')).to.not.contain('pipelines/')
    } finally {
      await zsh.exit()
    }
  })
})
