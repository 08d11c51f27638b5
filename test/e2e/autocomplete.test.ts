import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, pipe, tempDir} from '../helpers/cli.js'

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

/** What the completion function offers for the words typed so far (the last one being completed). */
const complete = (...words: string[]): string =>
  `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMP_LINE='${words.join(' ')}'; _pipe_autocomplete; echo "\${COMPREPLY[*]}"`

describe('pipe autocomplete (built CLI, real bash)', function () {
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
})
