/**
 * An agent's cost stays linear in its turns: a conversation that reads a large file again and again
 * is kept within max_context_bytes (the oldest results give way to a note), the reply cache keeps
 * each message text once, and the step's state stays bounded. Before, every turn's whole request was
 * stored again and the state rewritten whole: 8 turns x 50 reads of 60 KiB stored ~120 MB.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readdir, readFile, stat, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {expectAuditPasses} from '../helpers/stores.js'
import {ModelServer} from '../helpers/model-server.js'

async function bytesUnder(dir: string): Promise<number> {
  let total = 0
  for (const entry of await readdir(dir, {withFileTypes: true, recursive: true})) {
    if (entry.isFile()) total += (await stat(path.join(entry.parentPath, entry.name))).size
  }
  return total
}

describe('an agent whose conversation grows: bounded requests, linear storage', function () {
  this.timeout(240000)
  let dir: string
  let cleanup: () => Promise<void>
  let server: ModelServer | undefined

  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-agent-cost-'))
  })
  afterEach(async () => {
    await server?.close()
    await cleanup()
  })

  it('4 turns of 25 reads of a 30 KiB file (3 MB of results): every request within max_context_bytes, the reply cache and state a few MB at most, and the model told what was dropped', async () => {
    const repo = path.join(dir, 'repo')
    await mkdir(repo)
    const line = (i: number): string => `line ${String(i).padStart(5, '0')}: ${'the quick brown fox jumps over the lazy dog '.repeat(2)}\n`
    await writeFile(
      path.join(repo, 'big.txt'),
      Array.from({length: 330}, (_, i) => line(i))
        .join('')
        .slice(0, 30 * 1024),
    )
    execFileSync('git', ['init', '-q'], {cwd: repo})
    await writeFile(path.join(repo, 'task.md'), 'Read big.txt until you are sure.\n')
    await writeFile(
      path.join(repo, 'agent.yaml'),
      'version: 1\nname: reader\nsteps:\n  - id: read\n    kind: agent\n    prompt: task.md\n    tools: [read_file]\n    max_context_bytes: 60000\n',
    )
    server = await ModelServer.start()
    const turns = Array.from({length: 4}, (_, t) => ({
      tool_calls: Array.from({length: 25}, (_, c) => ({id: `t${t}c${c}`, name: 'read_file', arguments: {path: 'big.txt'}})),
    }))
    server.script('read', ...turns, {content: 'I have read it.'})
    const env = {OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(dir, 'home')}
    const result = await pipe(['run', 'agent.yaml', '--json'], {cwd: repo, env, timeoutMs: 200000})
    expect(result.code, result.stderr).to.equal(0)
    expect(json<{status: string}>(result).status).to.equal('succeeded')
    expect(server.requests).to.have.length(5)
    for (const request of server.requests) {
      const text = request.body.messages.map((m) => m.content ?? '').join('')
      expect(Buffer.byteLength(text), 'what one request carried').to.be.at.most(60000)
    }
    // The latest result is whole; an older one says what became of it.
    const last = server.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool')
    expect(last).to.have.length(100)
    expect(last.at(-1)!.content).to.contain('line 00000')
    expect(last[0]!.content).to.contain('was dropped to keep the conversation within 60000 bytes; call the tool again if you need it')
    const store = path.join(repo, '.pipe')
    expect(await bytesUnder(path.join(store, 'replies')), 'the reply cache').to.be.below(2 * 1024 * 1024)
    const runId = json<{run_id: string}>(result).run_id
    expect(await bytesUnder(path.join(store, 'runs', runId, 'state')), 'the step state').to.be.below(1024 * 1024)
    // A text stored once is still checked: the store verifies, and a changed text is named.
    // What `pipe audit verify` checks, in this process (helpers/stores.ts); the damaged store's verdict below is the command's.
    await expectAuditPasses(repo)
    const texts = path.join(store, 'replies', 'texts')
    const [first] = (await readdir(texts)).sort()
    await writeFile(path.join(texts, first!), (await readFile(path.join(texts, first!), 'utf8')).replace('fox', 'cat'))
    const damaged = await pipe(['audit', 'verify'], {cwd: repo, env})
    expect(damaged.code, damaged.stdout + damaged.stderr).to.equal(4)
    expect(damaged.stdout + damaged.stderr).to.contain(first!.slice(0, 12))
  })
})
