/**
 * The pipeline language v2 through the built CLI: typed inputs on the command line, expressions
 * checked by validate at file:line:col, and a command -> choice -> end pipeline over real processes.
 *
 * A real `pipe` process stays for the run over real processes ended failed (the file's first run),
 * the terminal prompt (stdin) and validate; the other commands (child runs' progress, the refusals,
 * the dry runs' plans, the succeeding run) run in this process (test/helpers/pipe-here.ts: the same
 * command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-lang-cli-')))
afterEach(async () => cleanup())

async function file(name: string, text: string): Promise<string> {
  const full = path.join(dir, name)
  await writeFile(full, text)
  return full
}

const policy = (): Promise<string> =>
  file(
    'policy.yaml',
    'version: 1\nallowed_commands:\n  - [node, -e, "{arg}", "..."]\nforbidden_paths: [".git/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 30000}\n',
  )

// Prints one line per argument after the script: what the step's argv really was.
const PIPELINE = `# yaml-language-server: $schema=../schemas/pipeline.schema.json
version: 1
name: lines
inputs:
  since: {type: string, required: true, description: where to start}
  max_items: {type: integer, default: 2, minimum: 1}
secrets: [PIPE_LANG_CLI_TOKEN]
steps:
  - id: log
    kind: command
    run: [node, -e, "for (const a of process.argv.slice(1)) console.log(a)", "\${{ inputs.since }}..HEAD", "a b; rm -rf /", "x"]
    parse: lines
    next: route
  - id: route
    kind: choice
    choices:
      - {when: "\${{ size(steps.log.outputs.lines) > inputs.max_items }}", next: too_many}
    default: fine
  - id: too_many
    kind: end
    status: failed
    reason: "\${{ size(steps.log.outputs.lines) }} lines since \${{ inputs.since }} (token \${{ secrets.PIPE_LANG_CLI_TOKEN }})"
  - {id: fine, kind: end, status: succeeded, reason: "only \${{ steps.log.outputs.lines }}"}
`

const TOKEN = 'tok-1234567890-secret'

describe('pipeline language v2 (CLI)', function () {
  this.timeout(120000)

  it('runs command (parse: lines) -> choice -> end over real processes: arguments stay whole, the end decides the exit, secrets stay out', async () => {
    const p = await file('p.yaml', PIPELINE)
    const pol = await policy()
    const env = {PIPE_LANG_CLI_TOKEN: TOKEN, PIPE_HOME: path.join(dir, 'home')}
    const failed = await pipe(['run', p, '-i', 'since=v1.2', '--policy', pol, '--store', '.pipe', '--json'], {cwd: dir, env})
    expect(failed.code, failed.stderr).to.equal(1)
    const out = json<{run_id: string; status: string; error: {code: string; message: string}}>(failed)
    expect(out.status).to.equal('failed')
    expect(out.error.code).to.equal('E_ENDED')
    expect(out.error.message).to.equal('3 lines since v1.2 (token [REDACTED])')
    expect(failed.stderr).to.include('Error [E_ENDED]: 3 lines since v1.2 (token [REDACTED])')
    const runDir = path.join(dir, '.pipe', 'runs', out.run_id)
    const log = JSON.parse(await readFile(path.join(runDir, 'snapshots', '000001.json'), 'utf8')) as {
      outputs: {lines: string[]}
      inputs: {resolved: Record<string, unknown>}
    }
    expect(log.outputs.lines).to.deep.equal(['v1.2..HEAD', 'a b; rm -rf /', 'x'])
    expect(log.inputs.resolved).to.deep.equal({'run[3]': 'v1.2..HEAD'})
    const record = JSON.parse(await readFile(path.join(runDir, 'run.json'), 'utf8')) as {inputs: unknown}
    expect(record.inputs).to.deep.equal({since: 'v1.2', max_items: 2})
    for (const name of await readdir(path.join(runDir, 'snapshots'))) expect(await readFile(path.join(runDir, 'snapshots', name), 'utf8')).not.to.include(TOKEN)
    expect(failed.stderr).not.to.include(TOKEN)

    const ok = await pipeHere(['run', p, '-i', 'since=v1.2', '-i', 'max_items=5', '--policy', pol, '--store', '.pipe'], {cwd: dir, env})
    expect(ok.code, ok.stderr).to.equal(0)
    expect(ok.stdout).to.include('succeeded')
  })

  it("child runs' steps print progress on stderr, indented and labelled by the step and item that ran them; --json stdout stays one document", async () => {
    await file('sub.yaml', 'version: 1\nname: sub\nsteps:\n  - {id: inner, kind: noop, description: "inside"}\n')
    const p = await file(
      'parent.yaml',
      `version: 1
name: parent
steps:
  - id: each
    kind: foreach
    items: "\${{ ['a', 'b'] }}"
    with: {name: "\${{ item }}"}
    inputs: {name: {type: string, required: true}}
    steps:
      - {id: work, kind: noop, description: "did \${{ inputs.name }}"}
    next: sub
  - {id: sub, kind: pipeline, file: ./sub.yaml}
`,
    )
    const result = await pipeHere(['run', p, '--store', '.pipe', '--json'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(result.code, result.stderr).to.equal(0)
    const out = json<{status: string}>(result)
    expect(out.status).to.equal('succeeded')
    const lines = result.stderr.split('\n')
    const at = (pattern: RegExp): number => {
      const index = lines.findIndex((line) => pattern.test(line))
      expect(index, `${pattern} in stderr:\n${result.stderr}`).to.be.greaterThan(-1)
      return index
    }
    const first = at(/^ {4}✓ each\[0\] #1 work success \d+ ms/)
    const second = at(/^ {4}✓ each\[1\] #1 work success \d+ ms/)
    at(/^ {4}run R-\S+ \(each\[1\]\) succeeded/)
    const each = at(/^ {2}✓ #1 each success/)
    const inner = at(/^ {4}✓ sub #1 inner success/)
    const sub = at(/^ {2}✓ #2 sub success/)
    expect(first).to.be.lessThan(second)
    expect(second).to.be.lessThan(each)
    expect(inner).to.be.lessThan(sub)
  })

  it('refuses bad inputs before writing anything, all problems at once; -i without = points at --input', async () => {
    const p = await file('p.yaml', PIPELINE)
    const env = {PIPE_LANG_CLI_TOKEN: TOKEN, PIPE_HOME: path.join(dir, 'home'), PIPE_INTERACTIVE: '0'}
    const bad = await pipeHere(['run', p, '-i', 'sinse=v1', '-i', 'max_items=0', '--store', '.pipe'], {cwd: dir, env})
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.include('Error [E_INPUT]')
    expect(bad.stderr).to.include('unknown input "sinse" — did you mean "since"?')
    expect(bad.stderr).to.include('-i max_items: 0 is less than the minimum 1')
    expect(bad.stderr).to.include('missing required input: since (string, where to start)')
    expect(existsSync(path.join(dir, '.pipe'))).to.equal(false)

    const old = await pipeHere(['run', p, '-i', 'requirement.md', '--store', '.pipe'], {cwd: dir, env})
    expect(old.code).to.equal(2)
    expect(old.stderr).to.include('Error [E_INVALID_ARGS]: -i requirement.md: -i sets a pipeline input and takes NAME=VALUE')
    expect(old.stderr).to.include('--input requirement.md')

    const noSecret = await pipeHere(['run', p, '-i', 'since=v1', '--store', '.pipe'], {cwd: dir, env: {...env, PIPE_LANG_CLI_TOKEN: undefined}})
    expect(noSecret.code).to.equal(2)
    expect(noSecret.stderr).to.include('PIPE_LANG_CLI_TOKEN')
    expect(existsSync(path.join(dir, '.pipe'))).to.equal(false)
  })

  it('--dry-run needs no secret: the plan says which are not set, and a run still refuses without them', async () => {
    const p = await file('p.yaml', PIPELINE)
    const env = {PIPE_HOME: path.join(dir, 'home'), PIPE_LANG_CLI_TOKEN: undefined}
    const plan = await pipeHere(['run', p, '-i', 'since=v1', '--policy', await policy(), '--dry-run'], {cwd: dir, env})
    expect(plan.code, plan.stderr).to.equal(0)
    expect(plan.stdout).to.include('secret not set here: PIPE_LANG_CLI_TOKEN; a run needs it: export PIPE_LANG_CLI_TOKEN=… first')
    const planJson = await pipeHere(['run', p, '-i', 'since=v1', '--policy', await policy(), '--dry-run', '--json'], {cwd: dir, env})
    expect(json<{secrets_unset: string[]}>(planJson).secrets_unset).to.deep.equal(['PIPE_LANG_CLI_TOKEN'])
    const set = await pipeHere(['run', p, '-i', 'since=v1', '--policy', await policy(), '--dry-run', '--json'], {
      cwd: dir,
      env: {...env, PIPE_LANG_CLI_TOKEN: TOKEN},
    })
    expect(json<{secrets_unset: string[]}>(set).secrets_unset).to.deep.equal([])
  })

  it('asks for a missing required input at a terminal and records the answer in run.json', async () => {
    const p = await file('p.yaml', PIPELINE)
    const env = {PIPE_LANG_CLI_TOKEN: TOKEN, PIPE_HOME: path.join(dir, 'home'), PIPE_INTERACTIVE: '1'}
    const r = await pipe(['run', p, '-i', 'max_items=9', '--policy', await policy(), '--store', '.pipe'], {cwd: dir, env, input: 'v7\n'})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stderr).to.include('since (string: where to start)> ')
    const runs = await readdir(path.join(dir, '.pipe', 'runs'))
    const record = JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', runs[0]!, 'run.json'), 'utf8')) as {inputs: unknown}
    expect(record.inputs).to.deep.equal({since: 'v7', max_items: 9})
  })

  it('takes inputs from --inputs FILE (-i wins) and shows them in --dry-run', async () => {
    const p = await file('p.yaml', PIPELINE)
    const values = await file('values.yaml', 'since: v0.9\nmax_items: 4\n')
    const env = {PIPE_LANG_CLI_TOKEN: TOKEN, PIPE_HOME: path.join(dir, 'home')}
    const plan = await pipeHere(['run', p, '--inputs', values, '-i', 'max_items=3', '--policy', await policy(), '--dry-run'], {cwd: dir, env})
    expect(plan.code, plan.stderr).to.equal(0)
    expect(plan.stdout).to.include('inputs since="v0.9" max_items=3')
    const planJson = await pipeHere(['run', p, '--inputs', values, '--policy', await policy(), '--dry-run', '--json'], {cwd: dir, env})
    expect(json<{inputs: unknown}>(planJson).inputs).to.deep.equal({since: 'v0.9', max_items: 4})
  })

  it('pipe validate reports expression errors at file:line:col with did-you-mean, and a type error', async () => {
    const p = await file(
      'bad.yaml',
      PIPELINE.replace('"${{ inputs.since }}..HEAD"', '"${{ inputs.snice }}..HEAD"')
        .replace('size(steps.log.outputs.lines) > inputs.max_items', 'size(steps.lgo.outputs.lines) > inputs.max_items')
        .replace('"only ${{ steps.log.outputs.lines }}"', '"only ${{ steps.log.outputs.line }}"')
        .replace('\n    next: route', '\n    when: "${{ inputs.max_items }}"\n    next: route'),
    )
    const result = await pipe(['validate', p], {cwd: dir})
    expect(result.code).to.equal(2)
    const text = result.stdout + result.stderr
    expect(text).to.include(`${p}:11:90  steps[0].run[3]  unknown input "snice" (declared: since, max_items) — did you mean "since"?`)
    expect(text).to.include(`${p}:13:16  steps[0].when  expected a bool, but this expression gives int`)
    expect(text).to.match(
      new RegExp(`${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:18:\\d+  steps\\[1\\]\\.choices\\[0\\]\\.when  unknown step "lgo" — did you mean "log"\\?`),
    )
    expect(text).to.match(/steps\[3\]\.reason {2}steps.log.outputs has no field "line" .* did you mean "lines"\?/)
  })
})
