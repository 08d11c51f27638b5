/**
 * Recorded model replies on the built CLI: cassettes recorded against a real chat-completions
 * server on 127.0.0.1 and replayed with the server stopped and no endpoint set, and the store's
 * reply cache.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {PipeError} from '../../src/errors.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {examples, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {expectAuditPasses, snapshotsIn} from '../helpers/stores.js'
import {ModelServer} from '../helpers/model-server.js'
import {resumeHere, type InProcess} from '../helpers/in-process.js'

interface RunJson {
  run_id: string
  status: string
  reason?: string
  error?: {code: string; message: string; hint?: string}
}

let dir: string
let cleanup: () => Promise<void>
let server: ModelServer | undefined

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-cassette-'))
})
afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup()
})

function cli(args: string[], cwd: string, env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return pipe(args, {cwd, env: {...(server ? {OPENAI_BASE_URL: server.url} : {}), PIPE_HOME: path.join(dir, 'home'), ...env}, timeoutMs: 120000})
}

/** `pipe resume RUN [--decision go]` in this process, with the PIPE_HOME this file's processes have. One resume of each kind stays a process in these tests. */
const resumedHere = (cwd: string, runId: string, env: Record<string, string> = {}, decision?: 'go'): Promise<InProcess> =>
  resumeHere(cwd, runId, {PIPE_HOME: path.join(dir, 'home'), ...env}, decision)

/** What `pipe snapshot show RUN --json` prints, read in-process (the tests here are about the runs, not that command). */
const snapshotsOf = snapshotsIn

async function runRecords(cwd: string): Promise<RunRecord[]> {
  const runs = path.join(cwd, '.pipe', 'runs')
  const ids = (await readdir(runs)).filter((n) => n.startsWith('R-')).sort()
  return Promise.all(ids.map(async (id) => JSON.parse(await readFile(path.join(runs, id, 'run.json'), 'utf8')) as RunRecord))
}

/** A snapshot with what differs between any two runs masked: ids, times, hashes, the endpoint, and whether a reply was live or recorded. */
function masked(snapshot: Snapshot): string {
  const text = JSON.stringify(snapshot, null, 2)
    .replace(/R-\d{8}-\d{4,}/g, 'R-X')
    .replace(/F-\d{4}-\d{3,}/g, 'F-X')
    .replace(/S-\d{8}-\d{4,}/g, 'S-X')
    .replace(/E-\d{4,}/g, 'E-X')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, 'TIME')
    .replace(/(sha256|hmac-sha256):[0-9a-f]{64}/g, 'HASH')
    .replace(/"duration_ms": \d+/g, '"duration_ms": 0')
    .replace(/ in \d+ ms/g, ' in N ms')
    .replace(/"endpoint_host": (null|"[^"]*")/g, '"endpoint_host": "HOST"')
    .replace(/"source": "(live|cassette|cache)"/g, '"source": "SOURCE"')
  return text
}

// examples/release-notes: git log -> model -> choice -> foreach -> sub-pipeline publish.

describe('cassettes: examples/release-notes recorded against a server, replayed without one', function () {
  this.timeout(300000)
  const file = path.join(examples, 'release-notes', 'pipeline.yaml')
  const policy = path.join(examples, 'release-notes', 'policy.yaml')
  const notes = {
    summary: 'Two changes.',
    items: [
      {title: 'Export your expenses as CSV', kind: 'feature', commits: ['3f2a9c1']},
      {title: 'Three-way splits round correctly', kind: 'fix', commits: ['9b7e4d2']},
    ],
  }
  let repo: string
  const git = (...args: string[]): string => execFileSync('git', args, {cwd: repo, encoding: 'utf8', env: {...process.env, GIT_CONFIG_NOSYSTEM: '1'}})
  const run = (...extra: string[]): Promise<CliResult> =>
    cli(['run', file, '--policy', policy, '-i', 'since=v1', '-i', 'audience=customers', '--json', ...extra], repo)

  beforeEach(async () => {
    repo = path.join(dir, 'repo')
    await mkdir(repo)
    git('init', '-q')
    git('config', 'user.email', 'dev@example.com')
    git('config', 'user.name', 'Dev')
    git('commit', '-q', '--allow-empty', '-m', 'Initial commit')
    git('tag', 'v1')
    for (const message of ['Add CSV export of expenses', 'Fix rounding when an expense is split three ways'])
      git('commit', '-q', '--allow-empty', '-m', message)
  })

  it('records a run, then replays it with the server stopped and no endpoint: same status, same snapshots (masked), a cassette recorded twice is byte-identical, a replay leaves it as it was', async () => {
    server = await ModelServer.start()
    server.script(
      'draft',
      {content: JSON.stringify(notes), usage: {prompt_tokens: 321, completion_tokens: 54}},
      {content: JSON.stringify(notes), usage: {prompt_tokens: 321, completion_tokens: 54}},
    )
    const cassette = path.join(dir, 'notes.cassette.jsonl')
    const recorded = await run(
      '--record',
      cassette,
      '--record-note',
      'recorded against the scripted test server (test/helpers/model-server.ts), not a real model',
    )
    expect(recorded.code, recorded.stderr).to.equal(0)
    const first = json<RunJson>(recorded)
    expect(first.status).to.equal('succeeded')
    expect(server.count()).to.equal(1)

    // The same run recorded again gives the same bytes.
    const again = path.join(dir, 'again.cassette.jsonl')
    const second = await run('--record', again, '--record-note', 'recorded against the scripted test server (test/helpers/model-server.ts), not a real model')
    expect(second.code, second.stderr).to.equal(0)
    const bytes = await readFile(cassette, 'utf8')
    expect(await readFile(again, 'utf8')).to.equal(bytes)
    const lines = bytes
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(lines[0]).to.deep.equal({
      type: 'header',
      format: 'pipe-cassette/3',
      note: 'recorded against the scripted test server (test/helpers/model-server.ts), not a real model',
    })
    expect(lines.slice(1).map((l) => [l['type'], l['step']])).to.deep.equal([['interaction', 'draft']])
    expect(bytes).to.not.match(/R-\d{8}|127\.0\.0\.1|"at":|created_at/)
    // Each line is canonical: keys sorted.
    expect(Object.keys(lines[1]!)).to.deep.equal(['key', 'reply', 'request', 'step', 'type'])

    // The server is gone and no endpoint is set: the cassette alone answers.
    await server.close()
    server = undefined
    const replayed = await run('--replay', cassette)
    expect(replayed.code, replayed.stderr).to.equal(0)
    const third = json<RunJson>(replayed)
    expect(third.status).to.equal(first.status)
    expect(third.reason).to.equal(first.reason)
    const record = (await runRecords(repo)).find((r) => r.run_id === third.run_id)!
    expect(record.provider).to.deep.include({kind: 'openai', endpoint_host: null})
    expect(record.provider.cassette).to.deep.include({file: cassette, mode: 'replay', missing: 'error'})
    expect(record.provider.cassette?.sha256).to.match(/^sha256:[0-9a-f]{64}$/)

    const before = await snapshotsOf(repo, first.run_id)
    const after = await snapshotsOf(repo, third.run_id)
    expect(after.map(masked)).to.deep.equal(before.map(masked))
    const draft = after.find((s) => s.step.name === 'draft')!
    expect(draft.meta.model_calls).to.have.length(1)
    expect(draft.meta.model_calls![0]!.source).to.equal('cassette')
    expect(before.find((s) => s.step.name === 'draft')!.meta.model_calls![0]).to.deep.equal({key: draft.meta.model_calls![0]!.key, source: 'live'})
    expect(draft.meta.usage).to.include({prompt_tokens: 321, completion_tokens: 54, calls: 1})
    // The child runs too: the foreach's items and the publish sub-pipeline.
    const children = (id: string): Promise<string[][]> =>
      runRecords(repo).then((all) =>
        Promise.all(
          all
            .filter((r) => r.parent?.run_id === id)
            .sort((a, b) => (a.parent!.step + String(a.parent!.index ?? 0)).localeCompare(b.parent!.step + String(b.parent!.index ?? 0)))
            .map(async (r) => (await snapshotsOf(repo, r.run_id)).map(masked)),
        ),
      )
    expect(await children(third.run_id)).to.deep.equal(await children(first.run_id))
    expect(JSON.parse(await readFile(path.join(repo, 'release-notes', `${third.run_id}.json`), 'utf8'))).to.deep.equal(notes)

    // Replaying leaves the cassette as it was, so a later replay answers from the same bytes (the
    // replay above already ran on a store holding an earlier run: it is the same run, masked).
    expect(await readFile(cassette, 'utf8'), 'a replay does not write its cassette').to.equal(bytes)
  })
})

// A model step fixture: one prompt file, one output schema.

const SCHEMA = {
  type: 'object',
  required: ['items'],
  properties: {items: {type: 'array', items: {type: 'object', required: ['title'], properties: {title: {type: 'string'}}}}},
}
const GOOD = {items: [{title: 'CSV export'}]}

async function fixture(steps?: string, extra = ''): Promise<string> {
  const p = path.join(dir, 'p')
  await mkdir(path.join(p, 'prompts'), {recursive: true})
  await mkdir(path.join(p, 'schemas'), {recursive: true})
  await writeFile(path.join(p, 'prompts', 'notes.md'), 'Notes for {{audience}} from:\n{{commits}}\nKeep it short.\n')
  await writeFile(path.join(p, 'schemas', 'notes.schema.json'), JSON.stringify(SCHEMA))
  const file = path.join(p, 'p.yaml')
  await writeFile(
    file,
    `version: 1\nname: notes\n${extra}steps:\n${
      steps ??
      `  - id: draft
    kind: model
    prompt: prompts/notes.md
    vars:
      audience: customers
      commits: ["3f2a9c1 Add CSV export", "9b7e4d2 Fix rounding"]
    output_schema: schemas/notes.schema.json
`
    }`,
  )
  return file
}

function runIn(file: string, extra: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return cli(['run', file, '--json', ...extra], dir, env)
}

/** The error opening a cassette gives, through the door every session opens one by (`replySources`), in-process. */
async function openedCassette(flag: '--replay' | '--record', file: string): Promise<PipeError> {
  const {replySources} = await import('../../src/app/sessions/shared.js')
  const cassette = flag === '--replay' ? ({file, mode: 'replay', missing: 'error'} as const) : ({file, mode: 'record'} as const)
  const error = await replySources({cwd: dir, store: '.pipe', cassette}).then(
    () => undefined,
    (e: unknown) => e,
  )
  // By its shape: the module a dynamic import loads may be another instance of the PipeError class.
  if (!(error instanceof Error) || typeof (error as PipeError).code !== 'string') throw new Error(`${flag} ${file}: expected a PipeError, got ${String(error)}`)
  return error as PipeError
}

async function interactions(cassette: string): Promise<Array<{key: string; step: string; request: {messages: Array<{content: string}>}}>> {
  return (await readFile(cassette, 'utf8'))
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((l) => JSON.parse(l) as {key: string; step: string; request: {messages: Array<{content: string}>}})
}

describe('cassettes and the reply cache (model step fixture, server on 127.0.0.1)', function () {
  this.timeout(180000)

  it('a changed prompt file makes replay fail naming the step and the changed line; --replay-missing live without --record asks the endpoint and leaves the cassette as it was; with --record it fills the gap', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)})
    const file = await fixture()
    const cassette = path.join(dir, 'c.jsonl')
    expect((await runIn(file, ['--record', cassette])).code).to.equal(0)
    const url = server.url
    await server.close()
    server = undefined

    await writeFile(path.join(dir, 'p', 'prompts', 'notes.md'), 'Release notes for {{audience}} from:\n{{commits}}\nKeep it short.\n')
    const failed = await runIn(file, ['--replay', cassette])
    expect(failed.code).to.equal(1)
    const body = json<RunJson>(failed)
    expect(body.status).to.equal('failed')
    expect(body.error?.code).to.equal('E_MODEL')
    expect(body.error?.message).to.contain('step draft').and.contain('no recorded reply')
    expect(body.error?.message).to.contain('-Notes for customers from:').and.contain('+Release notes for customers from:')
    expect(body.error?.message, 'unchanged lines are context, not changes').to.not.contain('-Keep it short.')
    expect(body.error?.hint).to.contain('--replay-missing live')
    expect(failed.stderr).to.not.match(/\n\s+at .+\.js:\d+/)

    // --replay-missing live without --record: the endpoint answers the gap, the cassette stays as it was.
    server = await ModelServer.start(undefined, Number(new URL(url).port))
    server.script('draft', {content: JSON.stringify(GOOD)})
    const bytes = await readFile(cassette, 'utf8')
    const live = await runIn(file, ['--replay', cassette, '--replay-missing', 'live'])
    expect(live.code, live.stderr).to.equal(0)
    expect(server.count(), 'the changed request was asked of the endpoint').to.equal(1)
    expect(await readFile(cassette, 'utf8'), 'without --record the cassette is left as it was').to.equal(bytes)

    // The gap is filled from the live endpoint and kept in the cassette.
    server.script('draft', {content: JSON.stringify({items: [{title: 'Changed'}]})})
    const filled = await runIn(file, ['--replay', cassette, '--record', cassette, '--replay-missing', 'live'])
    expect(filled.code, filled.stderr).to.equal(0)
    expect(server.count()).to.equal(2)
    expect((await interactions(cassette)).map((i) => i.request.messages[1]!.content.split('\n')[0])).to.have.members([
      'Notes for customers from:',
      'Release notes for customers from:',
    ])
    await server.close()
    server = undefined
    const replayed = await runIn(file, ['--replay', cassette])
    expect(replayed.code, replayed.stderr).to.equal(0)
    const snap = (await snapshotsOf(dir, json<RunJson>(replayed).run_id))[0]!
    expect(snap.outputs).to.deep.equal({value: {items: [{title: 'Changed'}]}})
    const shown = await cli(['snapshot', 'show', json<RunJson>(replayed).run_id], dir)
    expect(shown.stdout).to.contain('model calls 1: 1 cassette')
    const plan = await cli(['run', file, '--replay', cassette, '--dry-run'], dir)
    expect(plan.code, plan.stderr).to.equal(0)
    expect(plan.stdout).to.contain(`provider openai / gpt-4o-mini (replaying ${cassette})`)
  })

  it('a recording killed mid-run leaves a valid cassette of what it had recorded, which a later run completes', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)}, {content: JSON.stringify(GOOD)})
    server.script('short', {content: JSON.stringify({items: [{title: 'Short'}]})}, {content: JSON.stringify({items: [{title: 'Short'}]})})
    const draft = `  - id: draft
    kind: model
    prompt: prompts/notes.md
    vars: {audience: customers, commits: ["3f2a9c1 Add CSV export"]}
    output_schema: schemas/notes.schema.json
`
    const file = await fixture(`${draft}    next: short
${draft.replace('id: draft', 'id: short')}`)
    const cassette = path.join(dir, 'c.jsonl')
    // Killed just before the second reply is written to the cassette.
    const killed = await runIn(file, ['--record', cassette], {PIPE_FAULT_KILL_AT: 'cassette-write#2'})
    expect(killed.signal).to.equal('SIGKILL')
    expect((await interactions(cassette)).map((i) => i.step)).to.deep.equal(['draft'])
    // It died holding the cassette's lock: the next run takes it over (its holder is gone).
    expect((await readdir(dir)).includes('c.jsonl.lock')).to.equal(true)
    const countBefore = server.count()
    const completed = await runIn(file, ['--replay', cassette, '--record', cassette, '--replay-missing', 'live'])
    expect(completed.code, completed.stderr).to.equal(0)
    expect(server.count() - countBefore, 'only the missing reply was asked').to.equal(1)
    expect((await interactions(cassette)).map((i) => i.step)).to.deep.equal(['draft', 'short'])
  })

  it('foreach children share the cassette: equal items are asked once, every child request is recorded, and the replay gives each child its reply', async () => {
    server = await ModelServer.start((request) => ({
      content: JSON.stringify({items: [{title: `for ${/Notes for (\w+)/.exec(request.body.messages[1]!.content)![1]}`}]}),
    }))
    const file = await fixture(`  - id: each
    kind: foreach
    items: "${'${{'} ['a', 'b', 'a', 'c', 'd'] }}"
    pipeline: ./item.yaml
    with: {name: "${'${{'} item }}"}
    concurrency: 3
`)
    await writeFile(
      path.join(dir, 'p', 'item.yaml'),
      `version: 1\nname: item\ninputs:\n  name: {type: string, required: true}\nsteps:\n  - id: ask\n    kind: model\n    prompt: prompts/notes.md\n    vars: {audience: "${'${{'} inputs.name }}", commits: ["x"]}\n    output_schema: schemas/notes.schema.json\n`,
    )
    const cassette = path.join(dir, 'c.jsonl')
    const recorded = await runIn(file, ['--record', cassette])
    expect(recorded.code, recorded.stderr).to.equal(0)
    expect(server.count(), 'the equal item is asked once').to.equal(4)
    expect((await interactions(cassette)).map((i) => i.step)).to.deep.equal(['ask', 'ask', 'ask', 'ask'])
    const bytes = await readFile(cassette, 'utf8')
    expect((await runIn(file, ['--record', cassette])).code).to.equal(0)
    expect(await readFile(cassette, 'utf8'), 'recorded again: the same bytes, whatever order the children ran in').to.equal(bytes)
    await server.close()
    server = undefined

    const replayed = await runIn(file, ['--replay', cassette])
    expect(replayed.code, replayed.stderr).to.equal(0)
    const children = (await runRecords(dir))
      .filter((r) => r.parent?.run_id === json<RunJson>(replayed).run_id)
      .sort((x, y) => x.parent!.index! - y.parent!.index!)
    expect(children).to.have.length(5)
    const outputs = await Promise.all(children.map(async (c) => (await snapshotsOf(dir, c.run_id))[0]!))
    expect(outputs.map((o) => (o.outputs as {value: {items: Array<{title: string}>}}).value.items[0]!.title)).to.deep.equal([
      'for a',
      'for b',
      'for a',
      'for c',
      'for d',
    ])
    expect(outputs.map((o) => o.meta.model_calls![0]!.source)).to.deep.equal(['cassette', 'cassette', 'cassette', 'cassette', 'cassette'])
  })

  it('a recorded run resumed after a pause keeps recording into its cassette, keeping what it recorded before the pause', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)})
    server.script('short', {content: JSON.stringify({items: [{title: 'Short'}]})})
    const model = (id: string, audience: string): string => `  - id: ${id}
    kind: model
    prompt: prompts/notes.md
    vars: {audience: ${audience}, commits: ["3f2a9c1 Add CSV export"]}
    output_schema: schemas/notes.schema.json
`
    const file = await fixture(
      `${model('draft', 'customers')}    spec_path: notes\n    next: check\n  - id: check\n    kind: review\n    on: {go: short}\n${model('short', 'engineers')}`,
    )
    const cassette = path.join(dir, 'c.jsonl')
    const paused = await runIn(file, ['--record', cassette])
    expect(paused.code, paused.stderr).to.equal(10)
    const resumed = await cli(['resume', json<RunJson>(paused).run_id, '--decision', 'go', '--json'], dir)
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect((await interactions(cassette)).map((i) => i.step)).to.deep.equal(['draft', 'short'])
    await server.close()
    server = undefined

    const replayed = await runIn(file, ['--replay', cassette])
    expect(replayed.code, replayed.stderr).to.equal(10)
    // Resumed with no endpoint: the run's cassette answers. In this process, through the session the
    // command calls (the default pipeline's test below resumes a replayed run so as a process).
    const done = await resumedHere(dir, json<RunJson>(replayed).run_id, {}, 'go')
    expect(done.code, done.error?.message).to.equal(0)
    expect(done.outcome?.status).to.equal('succeeded')
  })

  it('never writes a pipeline secret, the API key or an Authorization header into a cassette or the reply cache', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify({items: [{title: 'token tok-9f8e7d6c5b4a3210 leaked back'}]})})
    const file = await fixture(
      `  - id: draft
    kind: model
    prompt: prompts/notes.md
    vars:
      audience: "${'${{'} secrets.RELEASE_TOKEN }}"
      commits: ["3f2a9c1 Add CSV export"]
    output_schema: schemas/notes.schema.json
`,
      'secrets: [RELEASE_TOKEN]\n',
    )
    const cassette = path.join(dir, 'c.jsonl')
    const apiKey = 'sk-test-0123456789abcdefghijklmnop'
    const result = await runIn(file, ['--record', cassette], {RELEASE_TOKEN: 'tok-9f8e7d6c5b4a3210', OPENAI_API_KEY: apiKey})
    expect(result.code, result.stderr).to.equal(0)
    // The secret did reach the model (the test would prove nothing otherwise), with the key as Authorization.
    expect(server.requests[0]!.body.messages[1]!.content).to.contain('tok-9f8e7d6c5b4a3210')
    expect(server.requests[0]!.headers.authorization).to.equal(`Bearer ${apiKey}`)
    const written = [await readFile(cassette, 'utf8')]
    const replies = path.join(dir, '.pipe', 'replies')
    for (const name of await readdir(replies)) written.push(await readFile(path.join(replies, name), 'utf8'))
    expect(written).to.have.length(2)
    for (const text of written) {
      expect(text)
        .to.not.contain('tok-9f8e7d6c5b4a3210')
        .and.not.contain(apiKey)
        .and.not.match(/authorization|bearer/i)
      expect(text).to.contain('[REDACTED]')
    }
    // Replayed with another value of the secret: the key does not depend on it.
    await server.close()
    server = undefined
    const replayed = await runIn(file, ['--replay', cassette], {RELEASE_TOKEN: 'another-value-entirely'})
    expect(replayed.code, replayed.stderr).to.equal(0)
  })

  it('refuses a corrupt, truncated, foreign, wrong-version or missing cassette with E_CONFIG at its line, before a run exists', async () => {
    const file = await fixture()
    const cases: Array<[string, string, RegExp]> = [
      ['foreign.jsonl', '{"name":"something else"}\n', /foreign\.jsonl:1: the first line is not a cassette header/],
      ['version.jsonl', '{"type":"header","format":"pipe-cassette/9"}\n', /version\.jsonl:1: cassette format pipe-cassette\/9 is not one this pipe reads/],
      ['truncated.jsonl', '{"type":"header","format":"pipe-cassette/1"}\n{"type":"interaction","key":"sha256:ab\n', /truncated\.jsonl:2: not a JSON line/],
      [
        'schema.jsonl',
        '{"type":"header","format":"pipe-cassette/1"}\n{"type":"interaction","key":"sha256:' +
          'a'.repeat(64) +
          '","step":"draft","request":{"model":"m","messages":[]}}\n',
        /schema\.jsonl:2: does not match the cassette schema.*reply/,
      ],
      ['empty.jsonl', '', /empty\.jsonl:1: the cassette is empty/],
      ['yaml.jsonl', 'type: header\n', /yaml\.jsonl:1: not a JSON line/],
    ]
    // Every case through the one door a run, a resume and a replay open a cassette by; the first
    // also as a process: that such an error exits 2 with it as JSON, no stack, before a run exists.
    for (const [index, [name, text, pattern]] of cases.entries()) {
      await writeFile(path.join(dir, name), text)
      const error = await openedCassette('--replay', path.join(dir, name))
      expect(error.code, name).to.equal('E_CONFIG')
      expect(error.message, name).to.match(pattern)
      expect(error.hint, name).to.contain('--record')
      if (index > 0) continue
      const result = await runIn(file, ['--replay', path.join(dir, name)])
      expect(result.code, `${name}: ${result.stderr}`).to.equal(2)
      const shown = json<{error: {code: string; message: string; hint?: string}}>(result).error
      expect(shown).to.deep.include({code: error.code, message: error.message, hint: error.hint})
      expect(result.stderr, name).to.not.match(/\n\s+at .+\.js:\d+/)
    }
    // A missing cassette through the same door (the first case above showed such an error exits 2 as a process).
    const missing = await openedCassette('--replay', path.join(dir, 'nope.jsonl'))
    expect(missing.code).to.equal('E_CONFIG')
    expect(missing.message).to.contain('nope.jsonl does not exist')
    const mixed = await runIn(file, ['--replay', path.join(dir, 'a.jsonl'), '--record', path.join(dir, 'b.jsonl'), '--replay-missing', 'live'])
    expect(mixed.code).to.equal(2)
    // Nothing was started.
    expect(await readdir(path.join(dir, '.pipe', 'runs')).catch(() => [])).to.deep.equal([])
  })

  it('refuses a cassette path that is a FIFO or a directory, and a line nested too deeply, without hanging or crashing; reads one saved with a BOM or CRLF', async () => {
    const file = await fixture()
    const fifo = path.join(dir, 'fifo.jsonl')
    execFileSync('mkfifo', [fifo])
    await mkdir(path.join(dir, 'folder.jsonl'))
    const deep = path.join(dir, 'deep.jsonl')
    const nested = `${'['.repeat(100000)}${']'.repeat(100000)}`
    await writeFile(
      deep,
      `{"type":"header","format":"pipe-cassette/1"}\n{"type":"interaction","key":"sha256:${'a'.repeat(64)}","step":"draft","request":{"model":"m","messages":[],"response_format":{"type":"json_object","x":${nested}}},"reply":{"model":"m","finish_reason":"stop","message":{"role":"assistant","content":"{}"}}}\n`,
    )
    const refused = [
      ['--replay', fifo, /fifo\.jsonl is not a regular file \(it is a FIFO/],
      ['--record', fifo, /fifo\.jsonl is not a regular file \(it is a FIFO/],
      ['--replay', path.join(dir, 'folder.jsonl'), /folder\.jsonl is not a regular file \(it is a directory\)/],
      ['--replay', deep, /deep\.jsonl:2: the line is nested too deeply/],
    ] as const
    for (const [flag, given, pattern] of refused) {
      const error = await openedCassette(flag, given)
      expect(error.code, `${flag} ${given}`).to.equal('E_CONFIG')
      expect(error.message, `${flag} ${given}`).to.match(pattern)
    }
    // The FIFO and the too-deep line as processes too: the CLI neither hangs on the one nor crashes on the other.
    for (const [flag, given, pattern] of [refused[0], refused[3]]) {
      const result = await runIn(file, [flag, given])
      expect(result.code, `${flag} ${given}: ${result.stderr}`).to.equal(2)
      expect(json<{error: {code: string; message: string}}>(result).error.message).to.match(pattern)
    }
    // A cassette an editor saved with a byte order mark and CRLF line ends still reads.
    const bom = path.join(dir, 'bom.jsonl')
    await writeFile(bom, '\uFEFF{"type":"header","format":"pipe-cassette/1"}\r\n')
    // Opened through the door every run, resume and replay opens a cassette by (what the run of a
    // pipeline that asks no model would do with it): read, not refused.
    const {replySources} = await import('../../src/app/sessions/shared.js')
    const opened = await replySources({cwd: dir, store: '.pipe', cassette: {file: bom, mode: 'replay', missing: 'error'}})
    expect(opened.cassette, 'the cassette saved with a BOM and CRLF is opened').to.not.equal(undefined)
  })

  it('--cache reuse answers a request the store answered before: no request reaches the server, the snapshot says cache; a tampered cache entry is an integrity error, not a reply', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)})
    const file = await fixture()
    const first = await runIn(file, [])
    expect(first.code, first.stderr).to.equal(0)
    expect(server.count()).to.equal(1)
    const cached = await readdir(path.join(dir, '.pipe', 'replies'))
    expect(cached).to.have.length(1)
    expect(cached[0]).to.match(/^[0-9a-f]{64}\.json$/)

    const second = await runIn(file, ['--cache', 'reuse'])
    expect(second.code, second.stderr).to.equal(0)
    expect(server.count(), 'no second request').to.equal(1)
    const [a] = await snapshotsOf(dir, json<RunJson>(first).run_id)
    const [b] = await snapshotsOf(dir, json<RunJson>(second).run_id)
    expect(a!.meta.model_calls).to.deep.equal([{key: `sha256:${cached[0]!.replace('.json', '')}`, source: 'live'}])
    expect(b!.meta.model_calls).to.deep.equal([{key: a!.meta.model_calls![0]!.key, source: 'cache'}])
    expect(b!.outputs).to.deep.equal(a!.outputs)
    const record = (await runRecords(dir)).find((r) => r.run_id === json<RunJson>(second).run_id)!
    expect(record.provider.cache).to.equal('reuse')

    // Without --cache reuse a run asks again.
    server.script('draft', {content: JSON.stringify(GOOD)})
    expect((await runIn(file, [])).code).to.equal(0)
    expect(server.count()).to.equal(2)

    // pipe replay reuses the cache by default; --cache off asks again.
    const replay = await cli(['replay', json<RunJson>(first).run_id, '--from', 'draft', '--json'], dir)
    expect(replay.code, replay.stderr).to.equal(0)
    expect(server.count(), 'a replay answered from the cache').to.equal(2)
    const [c] = await snapshotsOf(dir, json<RunJson>(replay).run_id)
    expect(c!.meta.model_calls![0]!.source).to.equal('cache')
    server.script('draft', {content: JSON.stringify(GOOD)})
    expect((await cli(['replay', json<RunJson>(first).run_id, '--from', 'draft', '--cache', 'off', '--json'], dir)).code).to.equal(0)
    expect(server.count()).to.equal(3)

    // The cache is part of the store that audit verify checks, and it passes.
    await expectAuditPasses(dir)

    // A tampered cache entry is an integrity error, not a reply.
    const replies = path.join(dir, '.pipe', 'replies')
    const [name] = await readdir(replies)
    const cacheFile = path.join(replies, name!)
    const text = await readFile(cacheFile, 'utf8')
    expect(text).to.contain('\\"CSV export\\"')
    await writeFile(cacheFile, text.replace('\\"CSV export\\"', '\\"Something else\\"'))
    const result = await runIn(file, ['--cache', 'reuse'])
    expect(result.code).to.not.equal(0)
    const body = json<RunJson>(result)
    expect(body.error?.code).to.equal('E_INTEGRITY')
    expect(body.error?.message).to.contain(name!).and.contain('seal')
    expect(server.count(), 'the tampered reply was not silently asked again either').to.equal(3)
    const audit = await cli(['audit', 'verify'], dir)
    expect(audit.code).to.not.equal(0)
    expect(audit.stdout + audit.stderr)
      .to.contain(name!)
      .and.contain('seal')
  })

  it('a redriven run reuses the replies that already succeeded: only the failed request is asked again', async () => {
    server = await ModelServer.start()
    // An agent's first turn (a tool call) is answered; the next request is refused (400, not retried): the step fails.
    server.script(
      'draft',
      {tool_calls: [{id: 'r1', name: 'read_file', arguments: {path: 'p/prompts/notes.md'}}]},
      {status: 400, body: {error: {message: 'bad request: too many tokens'}}},
    )
    const file = await fixture(
      '  - id: draft\n    kind: agent\n    prompt: prompts/notes.md\n    vars: {audience: customers, commits: "3f2a9c1 Add CSV export"}\n    tools: [read_file]\n',
    )
    const failed = await runIn(file, [])
    expect(failed.code, failed.stderr).to.equal(1)
    const runId = json<RunJson>(failed).run_id
    expect(server.count()).to.equal(2)

    server.script('draft', {content: 'Notes: CSV export.'})
    const resumed = await cli(['resume', runId, '--json'], dir)
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    expect(server.count(), 'the first request came from the cache; only the refused one was asked').to.equal(3)
    const snaps = await snapshotsOf(dir, runId)
    expect(snaps.at(-1)!.meta.model_calls!.map((c) => c.source)).to.deep.equal(['cache', 'live'])

    // A reply its step rejected (it broke the output schema) is not reused: the redrive asks for it again.
    server.script('draft', {content: JSON.stringify({items: 'not a list'})}, {status: 400, body: {error: {message: 'bad request: too many tokens'}}})
    const model = await fixture()
    const broke = json<RunJson>(await runIn(model, []))
    const asked = server.count()
    server.script('draft', {content: JSON.stringify(GOOD)})
    // In this process (the resume above and the --cache off one below are processes): the session's code.
    const redriven = await resumedHere(dir, broke.run_id, {OPENAI_BASE_URL: server.url})
    expect(redriven.code, redriven.error?.message).to.equal(0)
    expect(server.count() - asked).to.equal(1)
    const last = (await snapshotsOf(dir, broke.run_id)).at(-1)!
    expect(last.meta.model_calls!.map((c) => c.source)).to.deep.equal(['live'])
    expect(last.outputs).to.deep.equal({value: GOOD})
    const cached = JSON.parse(await readFile(path.join(dir, '.pipe', 'replies', `${last.meta.model_calls![0]!.key.slice('sha256:'.length)}.json`), 'utf8')) as {
      reply: {message: {content: string}}
      rejected?: string
    }
    expect(cached.reply.message.content, 'the new reply replaced the rejected one').to.equal(JSON.stringify(GOOD))
    expect(cached.rejected).to.equal(undefined)

    // So is an agent's final answer that broke its output_schema.
    server.script('draft', {content: JSON.stringify({items: 'not a list'})})
    const agent = await fixture(
      '  - id: draft\n    kind: agent\n    prompt: prompts/notes.md\n    vars: {audience: customers, commits: "3f2a9c1 Add CSV export"}\n    tools: [read_file]\n    output_schema: schemas/notes.schema.json\n    max_repairs: 0\n',
    )
    const invalid = json<RunJson>(await runIn(agent, []))
    expect(invalid.status).to.equal('failed')
    expect(invalid.error?.code).to.equal('E_MODEL')
    const sent = server.count()
    server.script('draft', {content: JSON.stringify(GOOD)})
    const fixed = await resumedHere(dir, invalid.run_id, {OPENAI_BASE_URL: server.url})
    expect(fixed.code, fixed.error?.message).to.equal(0)
    expect(server.count() - sent).to.equal(1)
    expect((await snapshotsOf(dir, invalid.run_id)).at(-1)!.meta.model_calls!.map((c) => c.source)).to.deep.equal(['live'])

    // --cache off on a redrive asks everything again, the agent's first turn too, which was answered
    // and cached: without the flag that turn comes from the cache (the first case above).
    const turns = await fixture(
      '  - id: draft\n    kind: agent\n    prompt: prompts/notes.md\n    vars: {audience: customers, commits: "3f2a9c1 Add CSV export"}\n    tools: [read_file]\n',
    )
    const firstTurn = {tool_calls: [{id: 'r1', name: 'read_file', arguments: {path: 'p/prompts/notes.md'}}]}
    server.script('draft', firstTurn, {status: 400, body: {error: {message: 'refused'}}})
    const again = json<RunJson>(await runIn(turns, []))
    expect(again.status).to.equal('failed')
    const before = server.count()
    server.script('draft', firstTurn, {content: 'Notes: CSV export.'})
    const off = await cli(['resume', again.run_id, '--cache', 'off', '--json'], dir)
    expect(off.code, off.stderr).to.equal(0)
    expect(server.count() - before, 'both turns asked again').to.equal(2)
    expect((await snapshotsOf(dir, again.run_id)).at(-1)!.meta.model_calls!.map((c) => c.source)).to.deep.equal(['live', 'live'])
  })
})

describe('pipe replay --check: model steps from the reply cache', function () {
  this.timeout(180000)

  it('reproduces a model step from its cached replies; a changed prompt or reply is a difference, a reply not cached is not checked', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify({items: 'not a list'})}, {content: JSON.stringify(GOOD)})
    const file = await fixture()
    const result = await runIn(file, [])
    expect(result.code, result.stderr).to.equal(0)
    const runId = json<RunJson>(result).run_id
    await server.close()
    server = undefined

    const check = await cli(['replay', runId, '--check', '--json'], dir)
    expect(check.code, check.stderr).to.equal(0)
    const body = json<{same: boolean; models: Array<{step: string; checked: boolean; same: boolean; calls: number; error?: string}>}>(check)
    expect(body.same).to.equal(true)
    expect(body.models).to.have.length(1)
    expect(body.models[0]).to.include({step: 'draft', checked: true, same: true, calls: 2})
    const text = await cli(['replay', runId, '--check'], dir)
    expect(text.stdout).to.contain('#1 draft (model, 2 model call(s)): same output from the same requests')

    // The prompt file changed: the first request is not the recorded one.
    const prompt = path.join(dir, 'p', 'prompts', 'notes.md')
    const original = await readFile(prompt, 'utf8')
    await writeFile(prompt, original.replace('Keep it short.', 'Keep it very short.'))
    const changed = await cli(['replay', runId, '--check', '--json'], dir)
    expect(changed.code).to.equal(4)
    const diff = json<{same: boolean; models: Array<{same: boolean; error?: string}>}>(changed)
    expect(diff.same).to.equal(false)
    expect(diff.models[0]!.error).to.contain('-Keep it short.').and.contain('+Keep it very short.')
    await writeFile(prompt, original)

    // A cached reply re-sealed with other content: same requests, different output.
    const {sealRecord} = await import('../../src/store/trail/integrity.js')
    const replies = path.join(dir, '.pipe', 'replies')
    for (const name of await readdir(replies)) {
      const record = JSON.parse(await readFile(path.join(replies, name), 'utf8')) as {seal?: string; reply: {message: {content: string}}}
      if (!record.reply.message.content.includes('CSV export')) continue
      record.reply.message.content = JSON.stringify({items: [{title: 'Something else'}]})
      delete record.seal
      await writeFile(path.join(replies, name), JSON.stringify(sealRecord(record)))
    }
    const other = await cli(['replay', runId, '--check'], dir)
    expect(other.code).to.equal(4)
    expect(other.stdout).to.contain('#1 draft (model, 2 model call(s)): DIFFERENT')

    // Without cached replies there is nothing to compare: reported, not failed.
    await rm(replies, {recursive: true})
    const none = await cli(['replay', runId, '--check', '--json'], dir)
    expect(none.code, none.stderr).to.equal(0)
    expect(json<{models: Array<{checked: boolean; error?: string}>}>(none).models[0]).to.include({
      checked: false,
      error: '2 of 2 replies are not in the reply cache',
    })
  })
})

describe('pipe replay --check: a run answered from a cassette', function () {
  this.timeout(180000)

  it('keeps the cassette replies that answered a run in the store, so replay --check re-checks its model steps with no cassette and no endpoint; --record-note never writes the API key or a token= value into the cassette header', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)})
    const file = await fixture()
    const cassette = path.join(dir, 'c.jsonl')
    const apiKey = 'sk-test-0123456789abcdefghijklmnop'
    const token = 'tk-4f3e2d1c0b9a8877'
    const recorded = await runIn(
      file,
      ['--record', cassette, '--store', path.join(dir, 'recording'), '--record-note', `recorded with ${apiKey} against a server, token=${token} for its admin`],
      {OPENAI_API_KEY: apiKey},
    )
    expect(recorded.code, recorded.stderr).to.equal(0)
    const header = JSON.parse((await readFile(cassette, 'utf8')).split('\n')[0]!) as {type: string; note: string}
    expect(header.type).to.equal('header')
    expect(header.note, 'the note as written, the key and the token redacted').to.equal(
      'recorded with [REDACTED] against a server, token=[REDACTED] for its admin',
    )
    await server.close()
    server = undefined
    const replayed = await runIn(file, ['--replay', cassette])
    expect(replayed.code, replayed.stderr).to.equal(0)
    const runId = json<RunJson>(replayed).run_id
    await rm(cassette)
    const check = await cli(['replay', runId, '--check', '--json'], dir)
    expect(check.code, check.stderr).to.equal(0)
    const body = json<{same: boolean; models: Array<{step: string; checked: boolean; same: boolean}>}>(check)
    expect(body.models[0]).to.include({step: 'draft', checked: true, same: true})
  })
})

describe('cassettes: the default pipeline, paused for review and resumed', function () {
  this.timeout(240000)

  it('records a run that pauses for review, replays it offline, and a replayed run resumes from the same cassette with no endpoint', async () => {
    const {cannedReply} = await import('../helpers/model-server.js')
    const {defaultPipeline} = await import('../helpers/cli.js')
    server = await ModelServer.start(cannedReply)
    const cassette = path.join(dir, 'default.jsonl')
    const prd = path.join(examples, 'full-prd.md')
    const first = await cli(['run', defaultPipeline, '--input', prd, '--record', cassette, '--json'], dir)
    expect(first.code, first.stderr).to.equal(10)
    const recorded = json<RunJson>(first)
    const asked = server.count()
    expect(asked).to.be.greaterThan(2)
    // Resumed under the same cassette, recording on: the review needs no model. In this process,
    // through the session the command calls (the paused fixture's test resumes a recording run as a process).
    const go = await resumedHere(dir, recorded.run_id, {OPENAI_BASE_URL: server.url}, 'go')
    expect(go.code, go.error?.message).to.equal(0)
    await server.close()
    server = undefined

    const replayed = await cli(['run', defaultPipeline, '--input', prd, '--replay', cassette, '--json'], dir)
    expect(replayed.code, replayed.stderr).to.equal(10)
    const second = json<RunJson>(replayed)
    // No endpoint and no flag: the run's own cassette answers whatever the rest of it asks.
    const resumed = await cli(['resume', second.run_id, '--decision', 'go', '--json'], dir)
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    const a = (await snapshotsOf(dir, recorded.run_id)).map(masked)
    const b = (await snapshotsOf(dir, second.run_id)).map(masked)
    expect(b).to.deep.equal(a)
    expect(a.length).to.be.greaterThan(5)
  })
})
