/**
 * The store's reply cache on the built CLI, against a real chat-completions server on 127.0.0.1:
 * --cache reuse, a tampered cache entry, and a redriven run that asks again only what failed.
 *
 * One `pipe` process per behaviour (a run with --cache reuse, a replay answered from the cache, the
 * run refused a tampered entry, audit verify's finding, a redrive that reuses the cache, one with
 * --cache off); the runs that set them up and the variants after them run in this process
 * (cliHere/runHere: test/helpers/pipe-here.ts, with the same model server, which always answers).
 */
import {expect} from 'chai'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, tempDir} from '../helpers/cli.js'
import {expectAuditPasses} from '../helpers/stores.js'
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

describe('cassettes and the reply cache (model step fixture, server on 127.0.0.1)', function () {
  this.timeout(180000)

  it('--cache reuse answers a request the store answered before: no request reaches the server, the snapshot says cache; a tampered cache entry is an integrity error, not a reply', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)})
    const file = await fixture()
    const first = await runHere(file, [])
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
    expect((await runHere(file, [])).code).to.equal(0)
    expect(server.count()).to.equal(2)

    // pipe replay reuses the cache by default; --cache off asks again.
    const replay = await cli(['replay', json<RunJson>(first).run_id, '--from', 'draft', '--json'], dir)
    expect(replay.code, replay.stderr).to.equal(0)
    expect(server.count(), 'a replay answered from the cache').to.equal(2)
    const [c] = await snapshotsOf(dir, json<RunJson>(replay).run_id)
    expect(c!.meta.model_calls![0]!.source).to.equal('cache')
    server.script('draft', {content: JSON.stringify(GOOD)})
    expect((await cliHere(['replay', json<RunJson>(first).run_id, '--from', 'draft', '--cache', 'off', '--json'], dir)).code).to.equal(0)
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
    // The runs that fail and two of the redrives in this process; the redrive that reuses the cache and the one with --cache off are processes.
    const failed = await runHere(file, [])
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
    const broke = json<RunJson>(await runHere(model, []))
    const asked = server.count()
    server.script('draft', {content: JSON.stringify(GOOD)})
    // In this process (the resume above and the --cache off one below are processes): the resume command itself.
    const redriven = await cliHere(['resume', broke.run_id, '--json'], dir)
    expect(redriven.code, redriven.stderr).to.equal(0)
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
    const invalid = json<RunJson>(await runHere(agent, []))
    expect(invalid.status).to.equal('failed')
    expect(invalid.error?.code).to.equal('E_MODEL')
    const sent = server.count()
    server.script('draft', {content: JSON.stringify(GOOD)})
    const fixed = await cliHere(['resume', invalid.run_id, '--json'], dir)
    expect(fixed.code, fixed.stderr).to.equal(0)
    expect(server.count() - sent).to.equal(1)
    expect((await snapshotsOf(dir, invalid.run_id)).at(-1)!.meta.model_calls!.map((c) => c.source)).to.deep.equal(['live'])

    // --cache off on a redrive asks everything again, the agent's first turn too, which was answered
    // and cached: without the flag that turn comes from the cache (the first case above).
    const turns = await fixture(
      '  - id: draft\n    kind: agent\n    prompt: prompts/notes.md\n    vars: {audience: customers, commits: "3f2a9c1 Add CSV export"}\n    tools: [read_file]\n',
    )
    const firstTurn = {tool_calls: [{id: 'r1', name: 'read_file', arguments: {path: 'p/prompts/notes.md'}}]}
    server.script('draft', firstTurn, {status: 400, body: {error: {message: 'refused'}}})
    const again = json<RunJson>(await runHere(turns, []))
    expect(again.status).to.equal('failed')
    const before = server.count()
    server.script('draft', firstTurn, {content: 'Notes: CSV export.'})
    const off = await cli(['resume', again.run_id, '--cache', 'off', '--json'], dir)
    expect(off.code, off.stderr).to.equal(0)
    expect(server.count() - before, 'both turns asked again').to.equal(2)
    expect((await snapshotsOf(dir, again.run_id)).at(-1)!.meta.model_calls!.map((c) => c.source)).to.deep.equal(['live', 'live'])
  })
})
