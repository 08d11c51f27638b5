/**
 * Recorded model replies on the built CLI: cassettes recorded against a real chat-completions
 * server on 127.0.0.1 and replayed with the server stopped and no endpoint set. The cassette files
 * pipe refuses or reads are cassette-files.test.ts's, the store's reply cache reply-cache.test.ts's,
 * and replay --check of model steps cassette-replay.test.ts's.
 *
 * One `pipe` process per behaviour (a recording, its replay with no server, a replay that fails on a
 * changed prompt, the recording killed at a fault point, a foreach's children recording at once, a
 * secret kept out of what is written, a recording resumed, a replayed run resumed with no endpoint);
 * the runs that set them up and the variants after them run in this process (cliHere/runHere:
 * test/helpers/pipe-here.ts, with the same model server, which always answers).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {examples, json, tempDir, type CliResult} from '../helpers/cli.js'
import {ModelServer} from '../helpers/model-server.js'
import {cassetteCommands, GOOD, runRecords, snapshotsOf, type RunJson} from '../helpers/cassette-fixtures.js'

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

const {cli, cliHere, fixture, runIn, runHere} = cassetteCommands(() => ({dir, server}))

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

async function interactions(cassette: string): Promise<Array<{key: string; step: string; request: {messages: Array<{content: string}>}}>> {
  return (await readFile(cassette, 'utf8'))
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((l) => JSON.parse(l) as {key: string; step: string; request: {messages: Array<{content: string}>}})
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
  const args = (extra: string[]): string[] => ['run', file, '--policy', policy, '-i', 'since=v1', '-i', 'audience=customers', '--json', ...extra]
  const run = (...extra: string[]): Promise<CliResult> => cli(args(extra), repo)
  /** `run` in this process. */
  const runHereIn = (...extra: string[]): Promise<CliResult> => cliHere(args(extra), repo)

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

    // The same run recorded again gives the same bytes (in this process; the first recording and the replay are processes).
    const again = path.join(dir, 'again.cassette.jsonl')
    const second = await runHereIn(
      '--record',
      again,
      '--record-note',
      'recorded against the scripted test server (test/helpers/model-server.ts), not a real model',
    )
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

describe('cassettes and the reply cache (model step fixture, server on 127.0.0.1)', function () {
  this.timeout(180000)

  it('a changed prompt file makes replay fail naming the step and the changed line; --replay-missing live without --record asks the endpoint and leaves the cassette as it was; with --record it fills the gap', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)})
    const file = await fixture()
    const cassette = path.join(dir, 'c.jsonl')
    // The failed replay is a process (its exit code, error and stderr); the other commands run in this process.
    expect((await runHere(file, ['--record', cassette])).code).to.equal(0)
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
    const live = await runHere(file, ['--replay', cassette, '--replay-missing', 'live'])
    expect(live.code, live.stderr).to.equal(0)
    expect(server.count(), 'the changed request was asked of the endpoint').to.equal(1)
    expect(await readFile(cassette, 'utf8'), 'without --record the cassette is left as it was').to.equal(bytes)

    // The gap is filled from the live endpoint and kept in the cassette.
    server.script('draft', {content: JSON.stringify({items: [{title: 'Changed'}]})})
    const filled = await runHere(file, ['--replay', cassette, '--record', cassette, '--replay-missing', 'live'])
    expect(filled.code, filled.stderr).to.equal(0)
    expect(server.count()).to.equal(2)
    expect((await interactions(cassette)).map((i) => i.request.messages[1]!.content.split('\n')[0])).to.have.members([
      'Notes for customers from:',
      'Release notes for customers from:',
    ])
    await server.close()
    server = undefined
    const replayed = await runHere(file, ['--replay', cassette])
    expect(replayed.code, replayed.stderr).to.equal(0)
    const snap = (await snapshotsOf(dir, json<RunJson>(replayed).run_id))[0]!
    expect(snap.outputs).to.deep.equal({value: {items: [{title: 'Changed'}]}})
    const shown = await cliHere(['snapshot', 'show', json<RunJson>(replayed).run_id], dir)
    expect(shown.stdout).to.contain('model calls 1: 1 cassette')
    const plan = await cliHere(['run', file, '--replay', cassette, '--dry-run'], dir)
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
    // The run that completes it in this process (the kill is a process's).
    const completed = await runHere(file, ['--replay', cassette, '--record', cassette, '--replay-missing', 'live'])
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
    // Recorded again and replayed in this process (the first recording, its children at once, is a process).
    expect((await runHere(file, ['--record', cassette])).code).to.equal(0)
    expect(await readFile(cassette, 'utf8'), 'recorded again: the same bytes, whatever order the children ran in').to.equal(bytes)
    await server.close()
    server = undefined

    const replayed = await runHere(file, ['--replay', cassette])
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
    // The run that pauses and the replay in this process; the resume that keeps recording is a process.
    const paused = await runHere(file, ['--record', cassette])
    expect(paused.code, paused.stderr).to.equal(10)
    const resumed = await cli(['resume', json<RunJson>(paused).run_id, '--decision', 'go', '--json'], dir)
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect((await interactions(cassette)).map((i) => i.step)).to.deep.equal(['draft', 'short'])
    await server.close()
    server = undefined

    const replayed = await runHere(file, ['--replay', cassette])
    expect(replayed.code, replayed.stderr).to.equal(10)
    // Resumed with no endpoint: the run's cassette answers. In this process, the resume command itself
    // (the default pipeline's test below resumes a replayed run so as a process).
    const done = await cliHere(['resume', json<RunJson>(replayed).run_id, '--decision', 'go', '--json'], dir)
    expect(done.code, done.stderr).to.equal(0)
    expect(json<RunJson>(done).status).to.equal('succeeded')
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
    // Replayed with another value of the secret: the key does not depend on it (in this process; the recording is a process).
    await server.close()
    server = undefined
    const replayed = await runHere(file, ['--replay', cassette], {RELEASE_TOKEN: 'another-value-entirely'})
    expect(replayed.code, replayed.stderr).to.equal(0)
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
    // The recording, its resume and the replay in this process; the replayed run's resume with no endpoint is a process.
    const first = await cliHere(['run', defaultPipeline, '--input', prd, '--record', cassette, '--json'], dir)
    expect(first.code, first.stderr).to.equal(10)
    const recorded = json<RunJson>(first)
    const asked = server.count()
    expect(asked).to.be.greaterThan(2)
    // Resumed under the same cassette, recording on: the review needs no model. In this process, the
    // resume command itself with the server's endpoint (the paused fixture's test resumes a recording run as a process).
    const go = await cliHere(['resume', recorded.run_id, '--decision', 'go', '--json'], dir)
    expect(go.code, go.stderr).to.equal(0)
    await server.close()
    server = undefined

    const replayed = await cliHere(['run', defaultPipeline, '--input', prd, '--replay', cassette, '--json'], dir)
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
