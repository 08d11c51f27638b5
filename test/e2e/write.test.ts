/**
 * kind: write through the CLI. The first case of each matrix (and each test's first command) is a
 * real `pipe` process; the other cases run in this process (test/helpers/pipe-here.ts: the CLI's path
 * from argv, its output and exit code), which let the matrices keep every mode and path.
 */
import {expect} from 'chai'
import {createHash} from 'node:crypto'
import {link, mkdir, readFile, symlink, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'
import {parse as parseYaml} from 'yaml'
import type {Evidence} from '../../src/types/evidence.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {snapshotsIn} from '../helpers/stores.js'

interface RunJson {
  run_id: string
  status: string
  reason?: string
  error?: {code: string; message: string; hint?: string}
}

let dir: string
let repo: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-write-e2e-'))
  repo = path.join(dir, 'repo')
  await mkdir(repo)
  await mkdir(path.join(repo, '.git'))
  await writeFile(
    path.join(dir, 'policy.yaml'),
    'version: 1\nallowed_commands: []\nforbidden_paths: ["secrets/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 60000}\n',
  )
})
afterEach(async () => cleanup())

const hex = (text: string | Buffer): string => `sha256:${createHash('sha256').update(text).digest('hex')}`

/** `pipe run` of the pipeline `text` (written to `name`) as a process, or in this process (`here`). */
async function run(name: string, text: string, inputs: string[] = [], here = false): Promise<{result: RunJson; code: number | null; stderr: string}> {
  const file = path.join(dir, name)
  await writeFile(file, text)
  const args = ['run', file, '--policy', path.join(dir, 'policy.yaml'), '--text', 'x', '--json', ...inputs.flatMap((i) => ['-i', i])]
  const r = here ? await pipeHere(args, {cwd: repo}) : await pipe(args, {cwd: repo, timeoutMs: 120000})
  return {result: json<RunJson>(r), code: r.code, stderr: r.stderr}
}

/** What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts). */
async function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(repo, runId)
}

const ITEM = `version: 1
name: item
inputs:
  n: {type: integer, required: true}
steps:
  - id: size
    kind: choice
    choices:
      - {when: "\${{ inputs.n > 10 }}", next: big}
    default: small
  - {id: big, kind: end, status: succeeded, reason: "big \${{ inputs.n }}"}
  - {id: small, kind: end, status: failed, reason: "small \${{ inputs.n }}"}
`

const FAN_IN = `version: 1
name: fan-in
steps:
  - id: each
    kind: foreach
    items: "\${{ [3, 12, 25, 4] }}"
    pipeline: ./item.yaml
    with: {n: "\${{ item }}"}
    fail_fast: false
    on: {success: tally, partial: tally, fail: tally}
  - id: tally
    kind: write
    path: out/tally.txt
    content: "big \${{ steps.each.outputs.succeeded }} of \${{ steps.each.outputs.total }}\\n"
    next: fin
  - {id: fin, kind: end, status: succeeded, reason: "wrote \${{ steps.tally.outputs.path }} (\${{ steps.tally.outputs.bytes }} bytes)"}
`

/** A pipeline that writes `content` to the path given as input p, with `mode`. */
function writer(mode: string): string {
  return `version: 1\nname: writer\ninputs:\n  p: {type: string, required: true}\nsteps:\n  - {id: w, kind: write, path: "\${{ inputs.p }}", content: "hello\\n", mode: ${mode}}\n`
}

describe('kind: write on the built CLI', function () {
  this.timeout(180000)

  it('a fan-in pipeline writes "big 2 of 4"; its sha256 is in the outputs and the evidence record; a second create fails E_CONFLICT and leaves the file', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const first = await run('fan-in.yaml', FAN_IN)
    expect(first.code, first.stderr).to.equal(0)
    expect(first.result.status).to.equal('succeeded')
    expect(first.result.reason).to.equal('wrote out/tally.txt (11 bytes)')
    const file = path.join(repo, 'out', 'tally.txt')
    expect(await readFile(file, 'utf8')).to.equal('big 2 of 4\n')

    const tally = (await snapshots(first.result.run_id)).find((s) => s.step.name === 'tally')!
    expect(tally.outputs).to.deep.equal({path: 'out/tally.txt', sha256: hex('big 2 of 4\n'), bytes: 11, mode: 'create'})
    expect(tally.evidence_links).to.have.length(1)
    const evidence = JSON.parse(await readFile(path.join(repo, '.pipe', 'evidence', `${tally.evidence_links[0]!.evidence_id}.json`), 'utf8')) as Evidence
    expect(evidence.type).to.equal('file')
    expect(evidence.source).to.deep.equal({ref: 'file://out/tally.txt', hash: hex('big 2 of 4\n')})
    expect(evidence.linked_to).to.deep.include({step: 'tally'})

    await writeFile(file, 'mine\n')
    const second = await run('fan-in.yaml', FAN_IN, [], true)
    expect(second.code).to.equal(1)
    expect(second.result.status).to.equal('failed')
    expect(second.result.error?.code).to.equal('E_CONFLICT')
    expect(second.result.error?.message).to.contain('out/tally.txt already exists')
    expect(await readFile(file, 'utf8')).to.equal('mine\n')
    const refused = (await snapshots(second.result.run_id)).find((s) => s.step.name === 'tally')!
    expect(refused.decisions[0]!.decision).to.equal('exists')
  })

  it('refuses (E_POLICY_DENIED) a path outside the repository, in forbidden_paths, in .git, or through a symlink, and writes nothing', async () => {
    await mkdir(path.join(repo, 'real'))
    await writeFile(path.join(repo, 'target.txt'), 'original\n')
    await symlink('real', path.join(repo, 'linked'))
    await symlink('target.txt', path.join(repo, 'alias.txt'))
    await symlink(dir, path.join(repo, 'away'))
    const cases: Array<[string, string]> = [
      ['../outside.txt', 'leaves the repository root'],
      ['secrets/token.txt', 'forbidden_paths[0]'],
      ['.git/hooks/post-commit', '(git)'],
      ['linked/a.txt', 'symlink linked -> real'],
      ['alias.txt', 'symlink alias.txt -> target.txt'],
      ['away/escaped.txt', 'symlink'],
    ]
    for (const mode of ['create', 'overwrite', 'append']) {
      for (const [index, [given, why]] of cases.entries()) {
        const out = await run(`w-${mode}.yaml`, writer(mode), [`p=${given}`], mode !== 'create' || index > 0)
        expect(out.result.status, `${mode} ${given}`).to.equal('failed')
        expect(out.result.error?.code, `${mode} ${given}: ${out.result.error?.message}`).to.equal('E_POLICY_DENIED')
        expect(out.result.error?.message, given).to.contain(why)
        expect(out.code).to.equal(3)
      }
    }
    expect(existsSync(path.join(dir, 'outside.txt'))).to.equal(false)
    expect(existsSync(path.join(dir, 'escaped.txt'))).to.equal(false)
    expect(existsSync(path.join(repo, 'secrets'))).to.equal(false)
    expect(existsSync(path.join(repo, '.git', 'hooks'))).to.equal(false)
    expect(existsSync(path.join(repo, 'real', 'a.txt'))).to.equal(false)
    expect(await readFile(path.join(repo, 'target.txt'), 'utf8')).to.equal('original\n')
  })

  it('refuses (E_INVALID_ARGS) a path that names a folder or the repository root, at run time and at validate, and writes nothing', async () => {
    const cases: Array<[string, string]> = [
      ['notes/', 'path "notes/" ends in a separator and so names a folder'],
      ['.', 'path "." is the repository root, not a file'],
      ['a/..', 'path "a/.." is the repository root, not a file'],
    ]
    for (const mode of ['create', 'overwrite', 'append']) {
      for (const [index, [given, why]] of cases.entries()) {
        const out = await run(`w-${mode}.yaml`, writer(mode), [`p=${given}`], mode !== 'create' || index > 0)
        expect(out.result.status, `${mode} ${given}`).to.equal('failed')
        expect(out.result.error?.code, `${mode} ${given}: ${out.result.error?.message}`).to.equal('E_INVALID_ARGS')
        expect(out.result.error?.message, given).to.contain(why)
      }
    }
    expect(existsSync(path.join(repo, 'notes')), 'no folder made for a path ending in /').to.equal(false)
    const file = path.join(dir, 'folder.yaml')
    await writeFile(file, 'version: 1\nname: folder\nsteps:\n  - {id: w, kind: write, path: notes/, content: x}\n')
    // (validate's refusal from a process: the last test.)
    const r = await pipeHere(['validate', file], {cwd: repo})
    expect(r.code).to.equal(2)
    expect(r.stdout).to.contain('steps[0].path  path "notes/" ends in a separator and so names a folder; a write step writes a file')
  })

  it('never appends through a hard link (another name of the file may be in .git or outside the repository)', async () => {
    await mkdir(path.join(repo, '.git'), {recursive: true})
    await writeFile(path.join(repo, '.git', 'config'), '[core]\n')
    await writeFile(path.join(dir, 'outside.txt'), 'outside\n')
    await link(path.join(repo, '.git', 'config'), path.join(repo, 'gitcfg.txt'))
    await link(path.join(dir, 'outside.txt'), path.join(repo, 'hl.txt'))
    for (const given of ['gitcfg.txt', 'hl.txt']) {
      const out = await run('w-append.yaml', writer('append'), [`p=${given}`], given !== 'gitcfg.txt')
      expect(out.result.error?.code, `${given}: ${out.result.error?.message}`).to.equal('E_POLICY_DENIED')
      expect(out.result.error?.message).to.contain('hard links')
    }
    expect(await readFile(path.join(repo, '.git', 'config'), 'utf8')).to.equal('[core]\n')
    expect(await readFile(path.join(dir, 'outside.txt'), 'utf8')).to.equal('outside\n')
  })

  it('writes a value as json and yaml that read back equal, and append adds to the end', async () => {
    const value = `{'name': 'notes', 'items': [1, 2, 3], 'nested': {'ok': true, 'none': null}}`
    // In this process: a run that writes from a process is the first test's.
    const out = await run(
      'formats.yaml',
      `version: 1
name: formats
steps:
  - {id: as_json, kind: write, path: data/v.json, value: "\${{ ${value} }}", format: json, next: as_yaml}
  - {id: as_yaml, kind: write, path: data/v.yaml, value: "\${{ ${value} }}", format: yaml, next: first}
  - {id: first, kind: write, path: log.txt, content: "one\\n", mode: append, next: again}
  - {id: again, kind: write, path: log.txt, content: "two \${{ steps.first.outputs.bytes }}\\n", mode: append, next: replace}
  - {id: replace, kind: write, path: data/v.json, value: "\${{ [steps.again.outputs.bytes] }}", mode: overwrite}
`,
      [],
      true,
    )
    expect(out.code, out.stderr).to.equal(0)
    const expected = {name: 'notes', items: [1, 2, 3], nested: {ok: true, none: null}}
    expect(parseYaml(await readFile(path.join(repo, 'data', 'v.yaml'), 'utf8'))).to.deep.equal(expected)
    expect(await readFile(path.join(repo, 'log.txt'), 'utf8')).to.equal('one\ntwo 4\n')
    // Overwritten by the last step, with the size of the appended file.
    expect(JSON.parse(await readFile(path.join(repo, 'data', 'v.json'), 'utf8'))).to.deep.equal([10])
    const snaps = await snapshots(out.result.run_id)
    const asJson = snaps.find((s) => s.step.name === 'as_json')!
    expect((asJson.outputs as {sha256?: string}).sha256, 'the JSON written is the value, pretty-printed').to.equal(
      hex(`${JSON.stringify(expected, null, 2)}\n`),
    )
    const again = snaps.find((s) => s.step.name === 'again')!
    expect(again.outputs).to.deep.equal({path: 'log.txt', sha256: hex('one\ntwo 4\n'), bytes: 10, mode: 'append'})
  })

  it('pipe validate warns of an unrouted "exists" only where the mode can give it (create), not for overwrite or append', async () => {
    for (const [mode, warned] of [
      ['create', true],
      ['overwrite', false],
      ['append', false],
    ] as const) {
      const file = path.join(dir, `${mode}.yaml`)
      await writeFile(file, `version: 1\nname: w\nsteps:\n  - {id: w, kind: write, path: a.txt, content: x, mode: ${mode}}\n`)
      const r = await (mode === 'create' ? pipe : pipeHere)(['validate', file], {cwd: repo})
      expect(r.code, r.stdout + r.stderr).to.equal(0)
      expect(r.stdout.includes('failure outcome "exists" of step "w" has no route'), mode).to.equal(warned)
    }
  })

  it('pipe validate checks the expressions in path and content, and the literal path', async () => {
    const file = path.join(dir, 'bad.yaml')
    await writeFile(
      file,
      `version: 1
name: bad
inputs:
  p: {type: string, default: a.txt}
steps:
  - id: w
    kind: write
    path: "\${{ inputs.nope }}/a.txt"
    content: "x \${{ steps.ghost.outputs.x }} \${{ steps.w2.outputs.nosuch }}"
    mode: overwrite
    next: w2
  - {id: w2, kind: write, path: ../b.txt, value: "\${{ [1] }}", content: both, mode: append}
`,
    )
    const r = await pipe(['validate', file], {cwd: repo})
    expect(r.code).to.equal(2)
    const lines = r.stdout.split('\n').map((l) => l.replace(/^.*bad\.yaml:/, 'bad.yaml:'))
    expect(lines).to.include.members([
      'bad.yaml:8:23  steps[0].path  unknown input "nope" (declared: p)',
      'bad.yaml:9:27  steps[0].content  unknown step "ghost"',
      'bad.yaml:9:67  steps[0].content  steps.w2.outputs has no field "nosuch" (it has path, sha256, bytes, mode)',
      'bad.yaml:12:33  steps[1].path  path "../b.txt" leaves the repository root',
    ])
    expect(r.stdout).to.contain('needs exactly one of content or value')
  })
})
