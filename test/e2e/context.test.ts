/**
 * Repository context for models (issue 29 item 1; seed 000 CONTEXT_BUILDING, seed 002's Project
 * Context Ref, seed 004 READ_CONTEXT): `kind: context` on the built CLI, in real git repositories
 * in temp dirs, with a scripted chat-completions server on 127.0.0.1 as the model that reads it.
 *
 * The first `run`, the `audit verify` that catches a damaged record and the `validate` are `pipe`
 * processes; the further runs, the refused --context-refs and the commands that read back run in
 * this process (test/helpers/pipe-here.ts: the same command from argv, its output and exit code,
 * asking the same model server).
 */
import {expect} from 'chai'
import {createHash} from 'node:crypto'
import {execFileSync} from 'node:child_process'
import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {runRecordIn, snapshotsIn, specIn} from '../helpers/stores.js'
import {filesShown} from '../helpers/coding-agent-server.js'
import {cannedReply, ModelServer, type ModelRequest, type Scripted} from '../helpers/model-server.js'

const cleanups: Array<() => Promise<void>> = []
let server: ModelServer | undefined

afterEach(async () => {
  await server?.close()
  server = undefined
  for (const c of cleanups.splice(0)) await c()
})

/** The same history in every folder: fixed names and dates make the same commit hashes. */
function git(repo: string, ...args: string[]): string {
  const date = '2030-01-02T03:04:05Z'
  return execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], {
    cwd: repo,
    encoding: 'utf8',
    env: {...process.env, GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date},
  }).trim()
}

const FILES: Record<string, string> = {
  'package.json': '{"name": "ledger", "type": "module", "scripts": {"test": "node --test"}}\n',
  'src/quokka_ledger.js': 'export function balanceOf(entries) {\n  return entries.reduce((sum, e) => sum + e.amount, 0)\n}\n',
  'src/wombat_report.js': "import {balanceOf} from './quokka_ledger.js'\n// TODO: format the report\nexport const report = (e) => `balance ${balanceOf(e)}`\n",
  'test/quokka_ledger.test.js': "import {test} from 'node:test'\n",
  '.env': 'DATABASE_PASSWORD=hunter2-very-secret\n',
  'secrets/prod.key': 'PRIVATE KEY MATERIAL\n',
}

async function makeRepo(name: string, files: Record<string, string> = FILES): Promise<{root: string; repo: string}> {
  const {dir, cleanup} = await tempDir(`pipe-context-${name}-`)
  cleanups.push(cleanup)
  const repo = path.join(dir, 'work', name)
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(repo, file)), {recursive: true})
    await writeFile(path.join(repo, file), text)
  }
  git(repo, 'init', '-q')
  git(repo, 'add', '-A')
  git(repo, 'commit', '-qm', 'the ledger and its report')
  await writeFile(
    path.join(dir, 'policy.yaml'),
    'version: 1\nallowed_commands: []\nforbidden_paths: [".env", "secrets/**"]\nmax_patch_lines: 200\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 60000, step_timeout_ms: 120000, max_output_bytes: 65536, max_concurrent_commands: 2, max_input_bytes: 1048576}\n',
  )
  return {root: dir, repo}
}

const CONTEXT_PIPELINE = (context: string): string => `version: 1
name: ctx
steps:
  - id: repo
    kind: context
${context}
    next: look
  - id: look
    kind: model
    prompt: look.md
    vars: {repo: "\${{ steps.repo.outputs.text }}"}
    output_schema: look.schema.json
    next: done
  - {id: done, kind: end, status: succeeded, reason: looked}
`

async function writePipeline(root: string, context: string): Promise<string> {
  await writeFile(path.join(root, 'look.md'), 'Name the files of this repository.\n\n{{repo}}\n')
  await writeFile(
    path.join(root, 'look.schema.json'),
    JSON.stringify({type: 'object', required: ['files'], properties: {files: {type: 'array', items: {type: 'string'}}}}),
  )
  await writeFile(path.join(root, 'ctx.yaml'), CONTEXT_PIPELINE(context))
  return path.join(root, 'ctx.yaml')
}

/** The model: names the files the context showed it. */
function looker(request: ModelRequest): Scripted {
  return {content: JSON.stringify({files: filesShown(request) ?? []}), usage: {prompt_tokens: 50, completion_tokens: 10}}
}

interface Snap {
  inputs: {context_ref: null | {evidence_id?: string; hash?: string; step?: string; seq?: number; project?: {project_id: string; context_version: string}}}
  outputs: {
    text?: string
    hash?: string
    bytes?: number
    files?: Array<{path: string; sha256: string; bytes: number; shown_bytes: number; cut: string}>
    cut?: string[]
  }
  evidence_links: Array<{evidence_id: string; type: string}>
  meta: {model_calls?: Array<{key: string}>}
}

/** `pipe run` of the context pipeline as a process, or (`here`) in this process. */
async function runIn(repo: string, root: string, extra: string[] = [], here = false): Promise<{run_id: string; status: string}> {
  server ??= await ModelServer.start(looker)
  const args = ['run', path.join(root, 'ctx.yaml'), '--policy', path.join(root, 'policy.yaml'), '--json', ...extra]
  const env = {OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(root, 'home')}
  const result = here ? await pipeHere(args, {cwd: repo, env}) : await pipe(args, {cwd: repo, env, timeoutMs: 60000})
  expect(result.code, result.stderr).to.equal(0)
  return json<{run_id: string; status: string}>(result)
}

async function snapshot(repo: string, runId: string, step: string): Promise<Snap> {
  // What `pipe snapshot show RUN --step STEP --json` prints, read in this process (helpers/stores.ts).
  const shown = (await snapshotsIn(repo, runId)).filter((s) => s.step.name === step) as unknown as Snap[]
  expect(shown, `run ${runId} has a snapshot of ${step}`).to.not.deep.equal([])
  // The step's snapshots, oldest first: the latest is the one the run went on with.
  return shown.at(-1)!
}

const sha = (text: string | Buffer): string => `sha256:${createHash('sha256').update(text).digest('hex')}`

describe('kind: context (repository context for models, seeds 000/002/004)', function () {
  this.timeout(120000)

  it('lists the real files and never a forbidden one, shows chosen files with hashes that match them, and the model step that read it names its evidence, which audit verify covers', async () => {
    const {root, repo} = await makeRepo('one')
    await writePipeline(root, '    files: [package.json, "src/**"]\n    search: [TODO, hunter2]')
    const run = await runIn(repo, root)
    expect(run.status).to.equal('succeeded')
    const gathered = await snapshot(repo, run.run_id, 'repo')
    const text = gathered.outputs.text!
    for (const file of ['package.json', 'src/quokka_ledger.js', 'src/wombat_report.js', 'test/quokka_ledger.test.js']) expect(text).to.contain(file)
    // Forbidden by the policy: neither listed, nor shown, nor found by a search for what it holds.
    for (const secret of ['.env', 'secrets/prod.key', 'hunter2-very-secret', 'PRIVATE KEY']) expect(text).not.to.contain(secret)
    expect(gathered.outputs.files!.map((f) => f.path)).to.deep.equal(['package.json', 'src/quokka_ledger.js', 'src/wombat_report.js'])
    for (const file of gathered.outputs.files!) {
      const bytes = await readFile(path.join(repo, file.path))
      expect(file.sha256).to.equal(sha(bytes))
      expect([file.bytes, file.shown_bytes, file.cut]).to.deep.equal([bytes.length, bytes.length, 'none'])
      expect(text).to.contain(bytes.toString('utf8'))
    }
    expect(gathered.outputs.hash).to.equal(sha(text))
    // The recent history names the commit and its files (not the forbidden ones).
    expect(text).to.match(/## Recent history[^\n]*\n[0-9a-f]{7,} the ledger and its report\n {2}package.json \+1 -0\n/)

    // The consumer's snapshot names the evidence and its hash; the evidence holds the same hash.
    const look = await snapshot(repo, run.run_id, 'look')
    const ref = look.inputs.context_ref!
    expect(ref).to.include({step: 'repo', seq: 1, hash: gathered.outputs.hash})
    expect(ref.evidence_id).to.match(/^E-\d{4,}$/)
    expect(look.evidence_links).to.deep.include({type: 'repo', evidence_id: ref.evidence_id})
    expect(gathered.evidence_links).to.deep.include({type: 'repo', evidence_id: ref.evidence_id})
    const evidenceFile = path.join(repo, '.pipe', 'evidence', `${ref.evidence_id}.json`)
    const evidence = JSON.parse(await readFile(evidenceFile, 'utf8')) as {type: string; source: {hash: string}}
    expect(evidence).to.deep.include({type: 'repo'})
    expect(evidence.source.hash).to.equal(gathered.outputs.hash)
    // The model was shown exactly that text.
    const asked = server!.requests.find((r) => r.kind === 'look')!
    expect(asked.body.messages.find((m) => m.role === 'user')!.content).to.contain(text)
    const shown = (await pipeHere(['snapshot', 'show', run.run_id, '--step', 'look'], {cwd: repo})).stdout
    expect(shown).to.contain(`context: repository context ${ref.evidence_id} ${gathered.outputs.hash}`)

    // The run page shows it too.
    const page = path.join(root, 'run.html')
    const exported = await pipeHere(['export', run.run_id, '--html', page], {cwd: repo})
    expect(exported.code, exported.stderr).to.equal(0)
    expect(await readFile(page, 'utf8')).to.match(
      new RegExp(`repository context\\s+<a href="#evidence-${ref.evidence_id}"><code>${ref.evidence_id}</code></a> <code>${gathered.outputs.hash}</code>`),
    )

    // Audit verify covers it: intact now, and an edited evidence record is caught.
    const intact = await pipeHere(['audit', 'verify'], {cwd: repo})
    expect(intact.code, intact.stdout + intact.stderr).to.equal(0)
    const record = JSON.parse(await readFile(evidenceFile, 'utf8')) as {source: {hash: string}}
    record.source.hash = sha('something else')
    await writeFile(evidenceFile, `${JSON.stringify(record, null, 2)}\n`)
    const damaged = await pipe(['audit', 'verify'], {cwd: repo})
    expect(damaged.code).to.not.equal(0)
    expect(damaged.stdout + damaged.stderr).to.contain(ref.evidence_id!)
  })

  it('fits a budget the same way every time and says what it cut', async () => {
    const big = Array.from({length: 400}, (_, i) => `export const line${String(i).padStart(3, '0')} = ${i}\n`).join('')
    const {root, repo} = await makeRepo('budget', {...FILES, 'src/a_big.js': big, 'src/b_big.js': big, 'src/c_big.js': big})
    await writePipeline(root, '    files: ["src/**"]\n    max_file_bytes: 3000\n    max_bytes: 6000\n    history: 1')
    const first = await snapshot(repo, (await runIn(repo, root, [], true)).run_id, 'repo')
    const second = await snapshot(repo, (await runIn(repo, root, [], true)).run_id, 'repo')
    expect(second.outputs.text).to.equal(first.outputs.text)
    const text = first.outputs.text!
    expect(Buffer.byteLength(text)).to.be.at.most(6000)
    expect(first.outputs.bytes).to.equal(Buffer.byteLength(text))
    const files = Object.fromEntries(first.outputs.files!.map((f) => [f.path, f]))
    expect(files['src/a_big.js']).to.include({cut: 'truncated', bytes: Buffer.byteLength(big)})
    expect(files['src/a_big.js']!.shown_bytes).to.be.within(1, 3000)
    expect(files['src/c_big.js']).to.include({cut: 'omitted', shown_bytes: 0})
    const cutSection = text.slice(text.indexOf('## Cut to fit the budget'))
    expect(cutSection).to.contain(`- src/a_big.js: the first ${files['src/a_big.js']!.shown_bytes} of ${Buffer.byteLength(big)} bytes shown (max_file_bytes)`)
    expect(cutSection).to.match(/- src\/c_big\.js: not shown \(\d+ bytes; over the budget of 6000 bytes\)/)
    expect(first.outputs.cut).to.deep.equal(
      cutSection
        .split('\n')
        .slice(1, -1)
        .map((l) => l.slice(2)),
    )
    // A file cut to fit is shown from its start, up to a line end.
    expect(text).to.contain(big.slice(0, files['src/a_big.js']!.shown_bytes))
  })

  it('refuses a budget past its bound at validate (a huge one would hold a whole repository in memory)', async () => {
    const {root} = await makeRepo('bounds')
    const file = await writePipeline(root, '    max_bytes: 999999999999\n    max_file_bytes: 99999999\n    max_tokens: 9999999')
    const r = await pipe(['validate', file], {cwd: root})
    expect(r.code).to.equal(2)
    expect(r.stdout + r.stderr).to.match(/max_bytes {2}must be <= 4194304, found 999999999999/)
    expect(r.stdout + r.stderr).to.match(/max_file_bytes {2}must be <= 1048576, found 99999999/)
    expect(r.stdout + r.stderr).to.match(/max_tokens {2}must be <= 1048576, found 9999999/)
  })

  it('gives byte-identical context and the same model request key for the same repository in another folder', async () => {
    const a = await makeRepo('same')
    const b = await makeRepo('same')
    expect(a.repo).to.not.equal(b.repo)
    await writePipeline(a.root, '    files: [package.json, "src/**"]')
    await writePipeline(b.root, '    files: [package.json, "src/**"]')
    const inA = await runIn(a.repo, a.root, [], true)
    const inB = await runIn(b.repo, b.root, [], true)
    const [ctxA, ctxB] = [await snapshot(a.repo, inA.run_id, 'repo'), await snapshot(b.repo, inB.run_id, 'repo')]
    expect(ctxA.outputs.text).to.equal(ctxB.outputs.text)
    expect(ctxA.outputs.text).not.to.contain(a.root)
    expect(ctxA.outputs.hash).to.equal(ctxB.outputs.hash)
    const [lookA, lookB] = [await snapshot(a.repo, inA.run_id, 'look'), await snapshot(b.repo, inB.run_id, 'look')]
    expect(lookA.meta.model_calls![0]!.key).to.be.a('string').and.equal(lookB.meta.model_calls![0]!.key)
  })

  it('--context-ref PROJECT@VERSION is checked, recorded in the run and in every snapshot, and shown by runs show', async () => {
    const {root, repo} = await makeRepo('ref')
    await writePipeline(root, '    files: [package.json]')
    for (const bad of ['acme', 'acme@', '@v1', 'ac me@v1', 'acme@v1/../x']) {
      const args = ['run', path.join(root, 'ctx.yaml'), '--policy', path.join(root, 'policy.yaml'), '--context-ref', bad]
      const result = await pipeHere(args, {cwd: repo})
      expect(result.code, bad).to.equal(2)
      expect(result.stderr).to.contain('[E_INVALID_ARGS]').and.contain('PROJECT@VERSION')
    }
    expect(await readdir(path.join(repo, '.pipe', 'runs')).catch(() => [])).to.deep.equal([])
    const run = await runIn(repo, root, ['--context-ref', 'acme-web@2026.03'], true)
    // The run as `pipe runs show RUN --json` gives it, read in this process (helpers/stores.ts).
    expect(JSON.stringify((await runRecordIn(repo, run.run_id)).run)).to.contain('"context_ref":{"project_id":"acme-web","context_version":"2026.03"}')
    expect((await pipeHere(['runs', 'show', run.run_id], {cwd: repo})).stdout).to.contain('context ref acme-web@2026.03')
    for (const step of ['repo', 'look', 'done']) {
      const snap = await snapshot(repo, run.run_id, step)
      expect(snap.inputs.context_ref!.project, step).to.deep.equal({project_id: 'acme-web', context_version: '2026.03'})
    }
    // Without it, a step that read no context names none.
    const plain = await runIn(repo, root, [], true)
    expect((await snapshot(repo, plain.run_id, 'done')).inputs.context_ref).to.equal(null)
  })

  it("pipelines/coding.yaml shows the architect the repository's files, which the requirement never names", async () => {
    const {root, repo} = await makeRepo('coding')
    const arch = {
      tech_stack: {language: 'JavaScript', test_framework: 'node:test'},
      api_specs: [],
      data_models: [],
      build_run_commands: {test: [['node', '--test']]},
    }
    server = await ModelServer.start((request): Scripted => {
      if (request.kind === 'arch')
        return {content: JSON.stringify({...arch, directory_tree: filesShown(request) ?? []}), usage: {prompt_tokens: 1, completion_tokens: 1}}
      if (request.kind === 'tasks') return {status: 500, body: {error: {message: 'the planner is not part of this test'}}}
      return cannedReply(request)
    })
    const requirement = 'Keep a shared ledger of team expenses and print a balance report.'
    expect(requirement).not.to.match(/quokka|wombat/)
    const result = await pipeHere(
      ['run', path.join(repoRoot, 'pipelines', 'coding.yaml'), '--text', requirement, '--decision', 'go', '--json', '--policy', path.join(root, 'policy.yaml')],
      {cwd: repo, env: {OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(root, 'home')}},
    )
    const run = json<{run_id: string}>(result)
    const asked = server.requests.find((r) => r.kind === 'arch')
    expect(asked, result.stderr).to.not.equal(undefined)
    const prompt = asked!.body.messages.find((m) => m.role === 'user')!.content
    for (const file of ['src/quokka_ledger.js', 'src/wombat_report.js', 'package.json']) expect(prompt).to.contain(file)
    expect(prompt).to.contain('"test": "node --test"')
    expect(prompt).not.to.contain('hunter2')
    const archSnap = await snapshot(repo, run.run_id, 'arch')
    expect(archSnap.inputs.context_ref).to.include({step: 'repo'})
    const spec = (await specIn(repo, run.run_id)) as unknown as {sections: {arch: {directory_tree: string[]}}}
    expect(spec.sections.arch.directory_tree).to.include('src/quokka_ledger.js')
  })
})
