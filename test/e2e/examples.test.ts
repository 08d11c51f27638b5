/**
 * The shipped v2 examples on the built CLI: a real git repository, a real model server on 127.0.0.1.
 *
 * The first `validate`, the first `run` (a dry run) and the first `spec show` are `pipe` processes;
 * the other commands run in this process (test/helpers/pipe-here.ts: the same command from argv, its
 * output and exit code, asking the same model server).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdir, readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'
import {examples, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses, snapshotsIn} from '../helpers/stores.js'
import {cannedReply, ModelServer} from '../helpers/model-server.js'

interface RunJson {
  run_id: string
  status: string
  reason?: string
  spec_version: string | null
  error?: {code: string; message: string}
}

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer | undefined

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-examples-'))
})
afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup()
})

function git(...args: string[]): string {
  return execFileSync('git', args, {cwd: repo, encoding: 'utf8', env: {...process.env, GIT_CONFIG_NOSYSTEM: '1'}})
}

/** A repository with a tag v1 and three commits after it. */
async function gitRepo(): Promise<void> {
  repo = path.join(dir, 'repo')
  await mkdir(repo)
  git('init', '-q')
  git('config', 'user.email', 'dev@example.com')
  git('config', 'user.name', 'Dev')
  git('commit', '-q', '--allow-empty', '-m', 'Initial commit')
  git('tag', 'v1')
  for (const message of ['Add CSV export of expenses', 'Fix rounding when an expense is split three ways', 'ci: cache node_modules'])
    git('commit', '-q', '--allow-empty', '-m', message)
}

/** `pipe ARGS` in the repository, in this process or (`asProcess`) as a process. */
function cli(args: string[], asProcess = false): Promise<CliResult> {
  const options = {cwd: repo, env: {...(server ? {OPENAI_BASE_URL: server.url} : {}), PIPE_HOME: path.join(dir, 'home')}}
  return asProcess ? pipe(args, {...options, timeoutMs: 120000}) : pipeHere(args, options)
}

async function runRecords(): Promise<RunRecord[]> {
  const ids = (await readdir(path.join(repo, '.pipe', 'runs'))).filter((n) => n.startsWith('R-'))
  return Promise.all(ids.sort().map(async (id) => JSON.parse(await readFile(path.join(repo, '.pipe', 'runs', id, 'run.json'), 'utf8')) as RunRecord))
}

/** What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts). */
async function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(repo, runId)
}

describe('examples/release-notes (built CLI, real git, model server on 127.0.0.1)', function () {
  this.timeout(180000)
  const file = path.join(examples, 'release-notes', 'pipeline.yaml')
  const policy = path.join(examples, 'release-notes', 'policy.yaml')
  const run = (...extra: string[]): Promise<CliResult> => cli(['run', file, '--policy', policy, '-i', 'since=v1', '--json', ...extra])

  beforeEach(gitRepo)

  it('validates with its policy and dry-runs', async () => {
    const files = ['pipeline.yaml', 'item.yaml', 'publish.yaml', 'policy.yaml'].map((f) => path.join(examples, 'release-notes', f))
    const checked = await cli(['validate', ...files], true)
    expect(checked.code, checked.stdout + checked.stderr).to.equal(0)
    const dry = await cli(['run', file, '--policy', policy, '-i', 'since=v1', '--dry-run'], true)
    expect(dry.code, dry.stdout + dry.stderr).to.equal(0)
    expect(dry.stdout).to.contain('log.run[3] = "v1..HEAD"').and.contain('nothing was run')
  })

  it('drafts items from git log, runs one child per item, publishes them into the repository for customers, and audits clean', async () => {
    server = await ModelServer.start()
    const notes = {
      summary: 'Two changes.',
      items: [
        {title: 'Export your expenses as CSV', kind: 'feature', commits: ['3f2a9c1']},
        {title: 'Three-way splits round correctly', kind: 'fix', commits: ['9b7e4d2']},
      ],
    }
    server.script('draft', {content: JSON.stringify(notes)})
    const result = await run('-i', 'audience=customers')
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson>(result)
    expect(body).to.include({status: 'succeeded', reason: '2 item(s) for customers since v1'})

    // The prompt was filled from the command's lines and the inputs.
    const prompt = server.requests[0]!.body.messages[1]!.content
    expect(prompt).to.contain('for customers readers').and.contain('At most 20 items').and.contain('Fix rounding when an expense is split three ways')
    expect(prompt).to.not.contain('Initial commit')

    const parent = await snapshots(body.run_id)
    expect(parent.map((s) => [s.step.name, s.decisions[0]?.decision])).to.deep.equal([
      ['log', 'success'],
      ['draft', 'success'],
      ['route', 'each'],
      ['each', 'success'],
      ['publish', 'success'],
      ['done', 'succeeded'],
    ])
    const log = parent[0]!
    expect((log.outputs as {lines: string[]}).lines).to.have.length(3)
    const each = parent[3]!.outputs as {
      succeeded: number
      failed: number
      total: number
      items: Array<{index: number; run_id: string; status: string; reason: string}>
    }
    expect(each).to.include({succeeded: 2, failed: 0, total: 2})

    const children = (await runRecords()).filter((r) => r.parent?.run_id === body.run_id)
    const items = children.filter((r) => r.parent!.step === 'each').sort((a, b) => a.parent!.index! - b.parent!.index!)
    expect(items.map((r) => [r.status, r.inputs?.['title'], r.inputs?.['kind']])).to.deep.equal([
      ['succeeded', 'Export your expenses as CSV', 'feature'],
      ['succeeded', 'Three-way splits round correctly', 'fix'],
    ])
    expect(each.items.map((i) => i.run_id)).to.deep.equal(items.map((r) => r.run_id))
    expect(each.items[1]!.reason).to.contain('fix: Three-way splits round correctly')
    for (const item of items) expect((await snapshots(item.run_id)).map((s) => s.step.name)).to.deep.equal(['check', 'ok'])
    const published = children.filter((r) => r.parent!.step === 'publish')
    expect(published.map((r) => r.status)).to.deep.equal(['succeeded'])

    // Published: the notes are a file of the repository, and sections.release_notes of the spec.
    expect(JSON.parse(await readFile(path.join(repo, 'release-notes', `${body.run_id}.json`), 'utf8'))).to.deep.equal(notes)
    const spec = json<CanonicalSpec>(await cli(['spec', 'show', body.spec_version!, '--json'], true))
    expect(spec.sections?.['release_notes']).to.deep.equal(notes)

    // What `pipe audit verify` checks, in this process (helpers/stores.ts).
    await expectAuditPasses(repo)
  })

  it('checks every item even when one fails (fail_fast: false): partial, then publish; internal notes are not published', async () => {
    server = await ModelServer.start()
    const long = 'Expenses can now be exported as CSV, filtered by member, date range, currency and category'
    server.script('draft', {
      content: JSON.stringify({
        items: [
          {title: long, kind: 'feature'},
          {title: 'Three-way splits round correctly', kind: 'fix'},
        ],
      }),
    })
    const result = await run('-i', 'audience=internal')
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson>(result)
    expect(body).to.include({status: 'succeeded', reason: '1 item(s) for internal since v1'})
    const parent = await snapshots(body.run_id)
    expect(parent.map((s) => [s.step.name, s.decisions[0]?.decision])).to.deep.equal([
      ['log', 'success'],
      ['draft', 'success'],
      ['route', 'each'],
      ['each', 'partial'],
      ['publish', 'skipped'],
      ['done', 'succeeded'],
    ])
    const each = parent[3]!.outputs as {succeeded: number; failed: number; items: Array<{status: string; reason: string}>}
    expect(each).to.include({succeeded: 1, failed: 1})
    expect(each.items.map((i) => i.status)).to.deep.equal(['failed', 'succeeded'])
    expect(each.items[0]!.reason).to.contain(`title longer than 80 characters: ${long}`)
    expect((await runRecords()).filter((r) => r.parent).map((r) => r.parent!.step)).to.deep.equal(['each', 'each'])
    expect(existsSync(path.join(repo, 'release-notes')), 'nothing published').to.equal(false)
  })

  it('routes an empty draft through the choice to the nothing end, with its reason', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify({summary: 'Only chores.', items: []})})
    const result = await run()
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson>(result)
    expect(body).to.include({status: 'succeeded', reason: 'nothing to announce since v1 (3 commit(s))'})
    expect(server.requests[0]!.body.messages[1]!.content).to.contain('for internal readers')
    const parent = await snapshots(body.run_id)
    expect(parent.map((s) => [s.step.name, s.decisions[0]?.decision])).to.deep.equal([
      ['log', 'success'],
      ['draft', 'success'],
      ['route', 'nothing'],
      ['nothing', 'succeeded'],
    ])
    expect(
      (await runRecords()).filter((r) => r.parent),
      'no child runs',
    ).to.deep.equal([])
    expect(existsSync(path.join(repo, 'release-notes')), 'nothing published').to.equal(false)
    // What `pipe audit verify` checks, in this process (helpers/stores.ts).
    await expectAuditPasses(repo, body.run_id)
  })

  it('refuses a run without the required since input before anything is written', async () => {
    const result = await cli(['run', file, '--policy', policy, '--json'])
    expect(result.code).to.not.equal(0)
    expect(json<{error: {code: string; message: string}}>(result).error.message).to.contain('since')
  })
})

describe('examples/triage (built CLI, model server on 127.0.0.1)', function () {
  this.timeout(180000)
  const file = path.join(examples, 'triage', 'pipeline.yaml')
  const prd = path.join(examples, 'full-prd.md')

  beforeEach(async () => {
    repo = path.join(dir, 'work')
    await mkdir(repo)
  })

  it('validates and dry-runs, showing its inputs and the triage step inserted before the review', async () => {
    const checked = await cli(['validate', file])
    expect(checked.code, checked.stdout + checked.stderr).to.equal(0)
    const dry = await cli(['run', file, '--input', prd, '-i', 'product=Team Expenses', '--dry-run'])
    expect(dry.code, dry.stdout + dry.stderr).to.equal(0)
    expect(dry.stdout).to.contain('inputs product="Team Expenses" areas="frontend, backend, data, infrastructure"')
    expect(dry.stdout)
      .to.match(/check_plan +gate +pass: triage, fail: clarify_questions/)
      .and.match(/triage +model +manual_review/)
  })

  it('classifies the compiled requirement into sections.triage before the review, and publishes it under triage/', async () => {
    server = await ModelServer.start(cannedReply)
    const triage = {severity: 'major', area: 'expenses', rationale: 'Shared expenses are the product; without them a group has nothing to settle.'}
    server.script('triage', {content: JSON.stringify(triage)})
    const result = await cli(['run', file, '--input', prd, '-i', 'product=Team Expenses', '-i', 'areas=groups, expenses, export', '--decision', 'go', '--json'])
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson & {feature_id: string}>(result)
    expect(body.status).to.equal('succeeded')
    expect(server.count('triage')).to.equal(1)
    const prompt = server.requests.find((r) => r.kind === 'triage')!.body.messages[1]!.content
    expect(prompt).to.contain('the team that owns Team Expenses').and.contain('exactly one of groups, expenses, export')
    // spec.goal and the feature titles, from the version compile wrote.
    expect(prompt).to.contain('Give small teams a shared place to record expenses').and.contain('"Export expenses as CSV"')

    const list = await snapshots(body.run_id)
    expect(list.map((s) => s.step.name)).to.deep.equal([
      'ingest',
      'compile',
      'validate_gates',
      'plan_tasks',
      'check_plan',
      'triage',
      'manual_review',
      'publish',
    ])
    const step = list.find((s) => s.step.name === 'triage')!
    expect(step.outputs).to.deep.include({value: triage})
    const spec = json<CanonicalSpec>(await cli(['spec', 'show', body.spec_version!, '--json']))
    expect(spec.sections?.['triage']).to.deep.equal(triage)
    expect(spec.meta).to.include({created_by_step: 'triage'})
    expect(spec.tasks.length, 'the plan is kept').to.be.greaterThan(0)
    // The version the reviewer approved is the triaged one, and that is what was published.
    const published = JSON.parse(await readFile(path.join(repo, 'triage', body.feature_id, `${body.spec_version}.json`), 'utf8')) as CanonicalSpec
    expect(published.sections?.['triage']).to.deep.equal(triage)

    // What `pipe audit verify` checks, in this process (helpers/stores.ts).
    await expectAuditPasses(repo, body.run_id)
  })

  it('refuses an unknown input before anything is written', async () => {
    const result = await cli(['run', file, '--input', prd, '-i', 'prodcut=x', '--json'])
    expect(result.code).to.not.equal(0)
    expect(json<{error: {message: string}}>(result).error.message).to.contain('prodcut')
    expect(existsSync(path.join(repo, '.pipe', 'runs'))).to.equal(false)
  })
})
