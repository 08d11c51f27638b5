/**
 * pipe replay --check of model steps on the built CLI: from the replies the store's cache keeps,
 * and from those a cassette answered a run with, with no endpoint set.
 *
 * One `pipe` process per behaviour (replay --check from the cache, the recording whose note is
 * redacted, replay --check from a cassette's replies); the runs and the further checks run in this
 * process (cliHere/runHere: test/helpers/pipe-here.ts).
 */
import {expect} from 'chai'
import {readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, tempDir} from '../helpers/cli.js'
import {ModelServer} from '../helpers/model-server.js'
import {cassetteCommands, GOOD, type RunJson} from '../helpers/cassette-fixtures.js'

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

describe('pipe replay --check: model steps from the reply cache', function () {
  this.timeout(180000)

  it('reproduces a model step from its cached replies; a changed prompt or reply is a difference, a reply not cached is not checked', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify({items: 'not a list'})}, {content: JSON.stringify(GOOD)})
    const file = await fixture()
    // The run and the checks after the first in this process; the first check is a process.
    const result = await runHere(file, [])
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
    const text = await cliHere(['replay', runId, '--check'], dir)
    expect(text.stdout).to.contain('#1 draft (model, 2 model call(s)): same output from the same requests')

    // The prompt file changed: the first request is not the recorded one.
    const prompt = path.join(dir, 'p', 'prompts', 'notes.md')
    const original = await readFile(prompt, 'utf8')
    await writeFile(prompt, original.replace('Keep it short.', 'Keep it very short.'))
    const changed = await cliHere(['replay', runId, '--check', '--json'], dir)
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
    const other = await cliHere(['replay', runId, '--check'], dir)
    expect(other.code).to.equal(4)
    expect(other.stdout).to.contain('#1 draft (model, 2 model call(s)): DIFFERENT')

    // Without cached replies there is nothing to compare: reported, not failed.
    await rm(replies, {recursive: true})
    const none = await cliHere(['replay', runId, '--check', '--json'], dir)
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
    // The replay in this process; the recording and the check are processes.
    const replayed = await runHere(file, ['--replay', cassette])
    expect(replayed.code, replayed.stderr).to.equal(0)
    const runId = json<RunJson>(replayed).run_id
    await rm(cassette)
    const check = await cli(['replay', runId, '--check', '--json'], dir)
    expect(check.code, check.stderr).to.equal(0)
    const body = json<{same: boolean; models: Array<{step: string; checked: boolean; same: boolean}>}>(check)
    expect(body.models[0]).to.include({step: 'draft', checked: true, same: true})
  })
})
