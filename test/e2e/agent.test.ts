/**
 * kind: agent on the built CLI, against a scripted chat-completions server on 127.0.0.1 that plays
 * tool-call conversations, in a real git repository in a temp dir: the tools, their bounds and
 * answers, the reply protocols, secrets kept out, validate, and a SIGKILL during a turn. The calls a
 * person confirms are agent-confirm.test.ts's.
 *
 * One `pipe` process per behaviour: a run that asks the model server and uses its tools, a run whose
 * secrets are masked, a run that fails, the offline provider's refusal, validate's refusal and the
 * SIGKILL during a turn. The other runs, asking the same server, the second validate and the resume
 * after the kill run in this process (test/helpers/pipe-here.ts: the same command from argv, its
 * output and exit code).
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {mkdir, readdir, readFile, symlink, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'
import {bin, json, pipe, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses} from '../helpers/stores.js'
import type {ModelServer} from '../helpers/model-server.js'
import {agentRepo, BUGGY, FIX, toolResults, type RunJson} from '../helpers/agent-repo.js'

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer

afterEach(async () => {
  await server?.close()
  await cleanup?.()
})

const {setup, env, run, snapshots} = agentRepo({
  get: () => ({dir, repo, cleanup, server}),
  set: (made) => ({dir, repo, cleanup, server} = {dir, repo, cleanup, server, ...made}),
})

/** `run`'s command (`pipe run FILE --json --policy P`) in this process. */
function runHere(file: string, extraEnv: Record<string, string> = {}): Promise<CliResult> {
  return pipeHere(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: {...env(), ...extraEnv}})
}

describe('kind: agent (a scripted tool-calling model server on 127.0.0.1, a real git repository)', function () {
  this.timeout(180000)

  it('does a task first time: reads a file, applies an edit block, runs a pre-approved test, answers', async () => {
    const file = await setup('tools_preapproved: [[node, test.js]]\nsyntax_checks: {".js": [node, --check, "{path}"]}\n')
    server.script(
      'fix',
      {tool_calls: [{id: 'c1', name: 'read_file', arguments: {path: 'calc.js'}}]},
      {tool_calls: [{id: 'c2', name: 'apply_edit_blocks', arguments: {blocks: FIX}}]},
      {tool_calls: [{id: 'c3', name: 'run_command', arguments: {command: 'node test.js'}}]},
      {content: 'add() now adds; node test.js prints ok.'},
    )
    const result = await run(file)
    expect(result.code, result.stderr + result.stdout).to.equal(0)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a + b')
    // The model was offered the tools as function tools, and saw each result.
    expect(server.requests[0]!.body.tools!.map((t) => t.function.name)).to.include.members(['read_file', 'apply_edit_blocks', 'run_command', 'give_up'])
    expect(toolResults(server.requests[1]!)['c1']).to.contain('return a - b')
    expect(toolResults(server.requests[2]!)['c2']).to.contain('"applied":true')
    expect(toolResults(server.requests[3]!)['c3']).to.contain('ok').and.contain('"exit_code":0')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.decisions[0]!.decision).to.equal('done')
    expect(snap!.outputs).to.include({value: 'add() now adds; node test.js prints ok.', turns: 4, tool_calls: 3})
    expect((snap!.outputs as Record<string, unknown>)['files_changed']).to.deep.equal(['calc.js'])
    expect(snap!.tool_calls!.map((c) => [c.name, c.level, c.decision, c.ok])).to.deep.equal([
      ['read_file', 'safe', 'auto', true],
      ['apply_edit_blocks', 'moderate', 'auto', true],
      ['run_command', 'dangerous', 'preapproved', true],
    ])
    expect(snap!.evidence_links.length).to.be.greaterThan(0)
    // The conversation state beside the records does not trouble the audit.
    await expectAuditPasses(repo, json<RunJson>(result).run_id)
  })

  it('answers invalid arguments with the schema error and denies paths outside the repository, running nothing', async () => {
    const file = await setup()
    await mkdir(path.join(dir, 'outside'))
    await writeFile(path.join(dir, 'outside', 'secret.txt'), 'outside secret\n')
    await symlink(path.join(dir, 'outside'), path.join(repo, 'link'))
    server.script(
      'fix',
      {tool_calls: [{id: 'bad', name: 'apply_edit_blocks', arguments: {blocks: FIX, extra: 1}}]},
      {
        tool_calls: [
          {id: 'up', name: 'read_file', arguments: {path: '../outside/secret.txt'}},
          {id: 'abs', name: 'read_file', arguments: {path: path.join(dir, 'outside', 'secret.txt')}},
          {id: 'sym', name: 'read_file', arguments: {path: 'link/secret.txt'}},
          {id: 'env', name: 'read_file', arguments: {path: '.env'}},
          {id: 'wr', name: 'apply_edit_blocks', arguments: {blocks: 'link/secret.txt\n<<<<<<< SEARCH\noutside secret\n=======\nchanged\n>>>>>>> REPLACE\n'}},
        ],
      },
      {content: 'nothing to do'},
    )
    const result = await runHere(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    const second = toolResults(server.requests[1]!)
    expect(second['bad']).to.contain('invalid arguments').and.contain('extra').and.contain('nothing was run')
    const third = toolResults(server.requests[2]!)
    for (const id of ['up', 'abs', 'sym', 'env', 'wr']) expect(third[id], id).to.contain('denied')
    expect(await readFile(path.join(dir, 'outside', 'secret.txt'), 'utf8')).to.equal('outside secret\n')
    expect(JSON.stringify(third)).not.to.contain('outside secret').and.not.to.contain('sk-secret')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls!.map((c) => c.decision)).to.deep.equal(['invalid', 'denied', 'denied', 'denied', 'denied', 'denied'])
  })

  it('rolls an edit back when the configured syntax checker fails, returning its output', async () => {
    const file = await setup('syntax_checks: {".js": [node, --check, "{path}"]}\n')
    const broken = 'calc.js\n<<<<<<< SEARCH\n  return a - b\n=======\n  return a + (b\n>>>>>>> REPLACE\n'
    server.script('fix', {tool_calls: [{id: 's1', name: 'apply_edit_blocks', arguments: {blocks: broken}}]}, {content: 'gave it a try'})
    const result = await runHere(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    const answer = toolResults(server.requests[1]!)['s1']!
    expect(answer).to.contain('"rolled_back":true').and.contain('SyntaxError')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls![0]).to.include({name: 'apply_edit_blocks', ok: false})
    expect((snap!.outputs as Record<string, unknown>)['files_changed']).to.deep.equal([])
  })

  it('checks each segment of a compound command line: a denied one stops it before anything runs', async () => {
    const file = await setup('confirm: []\n')
    server.script(
      'fix',
      {tool_calls: [{id: 'x1', name: 'run_command', arguments: {command: 'node mark.js && git push'}}]},
      {tool_calls: [{id: 'x2', name: 'run_command', arguments: {command: 'node mark.js > out.txt'}}]},
      {tool_calls: [{id: 'x3', name: 'run_command', arguments: {command: 'node test.js || node mark.js'}}]},
      {content: 'done'},
    )
    const result = await runHere(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(toolResults(server.requests[1]!)['x1']).to.contain('segment 2').and.contain('git').and.contain('nothing was run')
    expect(toolResults(server.requests[2]!)['x2']).to.contain('redirections')
    // node test.js fails (the bug), so || runs node mark.js.
    expect(toolResults(server.requests[3]!)['x3']).to.contain('"ran":true')
    expect(await readFile(path.join(repo, 'marked.txt'), 'utf8')).to.equal('ran')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls!.map((c) => c.decision)).to.deep.equal(['denied', 'auto', 'auto'])
  })

  it('falls back to the JSON reply protocol when the endpoint rejects tools with 400', async () => {
    const file = await setup()
    server.script(
      'fix',
      {status: 400, body: {error: {message: 'this model does not support tools', type: 'invalid_request_error'}}},
      {content: JSON.stringify({tool: 'read_file', arguments: {path: 'calc.js'}})},
      {content: JSON.stringify({final: 'read it'})},
    )
    const result = await runHere(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(server.requests[0]!.body.tools).to.have.length.greaterThan(0)
    const retold = server.requests[1]!.body
    expect(retold.tools).to.equal(undefined)
    expect(retold.messages[0]!.content).to.contain('{"tool": "<name>", "arguments": {...}}').and.contain('read_file')
    const results = server.requests[2]!.body.messages.filter((m) => m.role === 'user' && m.content.startsWith('Result of read_file'))
    expect(results).to.have.length(1)
    expect(results[0]!.content).to.contain('return a - b')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect((snap!.outputs as Record<string, unknown>)['value']).to.equal('read it')
    expect((snap!.inputs as Record<string, unknown>)['protocol']).to.equal('json')
  })

  it('checks the final answer against output_schema, sending an invalid one back (bounded repairs)', async () => {
    const file = await setup('', '    output_schema: answer.schema.json\n')
    await writeFile(
      path.join(dir, 'p', 'answer.schema.json'),
      JSON.stringify({type: 'object', required: ['fixed'], additionalProperties: false, properties: {fixed: {type: 'boolean'}}}),
    )
    server.script('fix', {content: 'I fixed it'}, {content: '{"fixed": "yes"}'}, {content: '{"fixed": true}'})
    const result = await runHere(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(server.requests[1]!.body.messages.at(-1)!.content).to.contain('not JSON')
    expect(server.requests[2]!.body.messages.at(-1)!.content).to.contain('/fixed must be boolean')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect((snap!.outputs as Record<string, unknown>)['value']).to.deep.equal({fixed: true})
    // One pipe validate of the pipeline as it ran and of a copy that reads a field the schema does not
    // have: each file is judged on its own, and the exit code is the typo's.
    const typoFile = path.join(dir, 'p', 'typo.yaml')
    await writeFile(
      typoFile,
      `${await readFile(file, 'utf8')}    next: after\n  - id: after\n    kind: end\n    status: succeeded\n    reason: "\${{ steps.fix.outputs.value.fixd }}"\n`,
    )
    // (validate's refusal from a process: the test of unknown tools below.)
    const checked = await pipeHere(['validate', file, typoFile], {cwd: repo})
    expect(checked.code).to.equal(2)
    const out = checked.stdout + checked.stderr
    expect(out, 'the pipeline as it ran is valid').to.contain(`ok  ${file} (pipeline)`)
    expect(out).to.contain('1 error(s) in 1 of 2 file(s)')
    expect(out).to.contain('typo.yaml:').and.contain('steps.fix.outputs.value has no field "fixd"').and.not.contain('unreachable')
  })

  it('keeps secrets out of the transcript: the prompt, tool results and replies are masked in requests and records', async () => {
    const file = await setup()
    const token = 'tok-3f9a8b7c6d5e4f3a2b1c'
    await writeFile(path.join(dir, 'p', 'task.md'), 'Deploy with {{token}}: {{task}}\n')
    await writeFile(
      file,
      (await readFile(file, 'utf8'))
        .replace('name: agent\n', 'name: agent\nsecrets: [API_TOKEN]\n')
        .replace('      task: add() subtracts\n', '      task: add() subtracts\n      token: ${{ secrets.API_TOKEN }}\n'),
    )
    await writeFile(path.join(repo, 'deploy.cfg'), `token=${token}\n`)
    server.script('fix', {tool_calls: [{id: 'r', name: 'read_file', arguments: {path: 'deploy.cfg'}}]}, {content: `the token is ${token}`})
    const result = await pipe(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {
      cwd: repo,
      env: {...env(), API_TOKEN: token},
      timeoutMs: 120000,
    })
    expect(result.code, result.stderr).to.equal(0)
    expect(JSON.stringify(server.requests.map((r) => r.body.messages))).not.to.contain(token)
    const store = path.join(repo, '.pipe')
    const files = (await readdir(store, {recursive: true, withFileTypes: true})).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))
    expect(
      files.some((f) => f.includes(`${path.sep}state${path.sep}`)),
      'the conversation state is among the records',
    ).to.equal(true)
    const leaking = []
    for (const f of files) if ((await readFile(f, 'utf8')).includes(token)) leaking.push(f)
    expect(leaking).to.deep.equal([])
  })

  it('masks a secret that has quotes and backslashes in a tool result (the nearest lines of a failed edit block), in requests and records', async () => {
    const file = await setup()
    // JSON writes it escaped (\" and \\): masking the JSON text of a result would not find it.
    const token = 'tok"3f9a\\8b7c6d5e4f3a'
    await writeFile(file, (await readFile(file, 'utf8')).replace('name: agent\n', 'name: agent\nsecrets: [API_TOKEN]\n'))
    await writeFile(path.join(repo, 'deploy.cfg'), `token=${token}\n`)
    const block = 'deploy.cfg\n<<<<<<< SEARCH\ntoken=wrong\n=======\ntoken=right\n>>>>>>> REPLACE\n'
    server.script('fix', {tool_calls: [{id: 'e', name: 'apply_edit_blocks', arguments: {blocks: block}}]}, {content: 'done'})
    // (A run with secrets from a process: the test before.)
    const result = await runHere(file, {API_TOKEN: token})
    expect(result.code, result.stderr).to.equal(0)
    const sent = toolResults(server.requests[1]!)['e']!
    expect(sent, 'the failed block came back with the nearest lines').to.contain('nearest').and.contain('[REDACTED]')
    // The secret's tail, twelve hex digits: written raw or JSON-escaped it is there; a record's
    // sha256 seals hold four given hex digits now and then, but not twelve.
    const tail = '8b7c6d5e4f3a'
    expect(sent).not.to.contain(tail)
    const store = path.join(repo, '.pipe')
    const files = (await readdir(store, {recursive: true, withFileTypes: true})).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))
    const leaking = []
    for (const f of files) if ((await readFile(f, 'utf8')).includes(tail)) leaking.push(f)
    expect(leaking).to.deep.equal([])
  })

  it('runs at most 50 tool calls of one reply; the rest are answered with an error, unrun', async () => {
    const file = await setup()
    // Two calls past the bound are enough to show the rest are refused, not only the one after it.
    const calls = Array.from({length: 52}, (_, i) => ({
      id: `c${i}`,
      name: 'apply_edit_blocks',
      arguments: {blocks: `new${i}.txt\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n`},
    }))
    server.script('fix', {tool_calls: calls}, {content: 'done'})
    const result = await runHere(file)
    expect(result.code, result.stderr).to.equal(0)
    const created = (await readdir(repo)).filter((n) => /^new\d+\.txt$/.test(n))
    expect(created).to.have.length(50)
    expect(existsSync(path.join(repo, 'new50.txt'))).to.equal(false)
    // Every call of the reply got its result (the endpoint requires one per call id).
    const results = toolResults(server.requests[1]!)
    expect(Object.keys(results)).to.have.length(52)
    expect(results['c51']).to.contain('at most 50 tools').and.contain('not run')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls!.filter((c) => c.decision === 'invalid').map((c) => c.call_id)).to.deep.equal(calls.slice(50).map((c) => c.id))
  })

  it('ends gave_up at max_turns; the unrouted failure fails the run', async () => {
    const file = await setup('', '    max_turns: 2\n')
    server.script('fix', {tool_calls: [{name: 'read_file', arguments: {path: 'calc.js'}}]}, {tool_calls: [{name: 'read_file', arguments: {path: 'calc.js'}}]})
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(1)
    expect(server.count()).to.equal(2)
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.decisions[0]!.decision).to.equal('gave_up')
    // The same safe call again, with nothing changed in between, is answered from the cache.
    expect(snap!.tool_calls!.map((c) => c.cache_hit)).to.deep.equal([false, true])
  })

  it('fails with E_CONFIG and a hint on the offline provider', async () => {
    const file = await setup()
    const result = await pipe(['run', file, '--provider', 'offline', '--policy', path.join(dir, 'p', 'policy.yaml')], {
      cwd: repo,
      env: {PIPE_HOME: path.join(dir, 'home')},
    })
    expect(result.code).to.equal(1)
    expect(result.stderr).to.contain('Error [E_CONFIG]').and.contain('offline rules provider').and.contain('OPENAI_BASE_URL')
    expect(server.count()).to.equal(0)
  })

  it('validate names unknown tools with did-you-mean and bad fields at file:line:col', async () => {
    const file = await setup('', '    max_turns: 0\n')
    await writeFile(file, (await readFile(file, 'utf8')).replace('tools: [list_directory,', 'tools: [read_fil, list_directory,'))
    const result = await pipe(['validate', file], {cwd: repo})
    expect(result.code).to.equal(2)
    const out = result.stdout + result.stderr
    expect(out).to.match(/agent\.yaml:\d+:\d+.*unknown tool "read_fil".*did you mean "read_file"/i)
    expect(out).to.match(/agent\.yaml:\d+:\d+.*max_turns/)
  })

  it('continues after a SIGKILL during a turn without running again a call that changed files', async () => {
    const file = await setup()
    const append = 'calc.js\n<<<<<<< SEARCH\nexport function add(a, b) {\n=======\n// checked\nexport function add(a, b) {\n>>>>>>> REPLACE\n'
    server.script('fix', {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: append}}]}, {hang: true}, {content: 'added the comment'})
    const childEnv: NodeJS.ProcessEnv = {...process.env, ...env(), NO_COLOR: '1'}
    delete childEnv.PIPE_STORE
    delete childEnv.OPENAI_API_KEY
    const child = spawn(process.execPath, [bin, 'run', file, '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: childEnv, stdio: 'ignore'})
    const exited = new Promise((resolve) => child.on('exit', resolve))
    await server.waitForRequests(2)
    child.kill('SIGKILL')
    await exited
    // The killed run, the store's only one.
    const [runId] = (await readdir(path.join(repo, '.pipe', 'runs'))).filter((n) => n.startsWith('R-'))
    expect(runId, 'the killed run is recorded').to.be.a('string')
    // pipe resume in this process, with the endpoint its process would have (the kill above is a real process's).
    const resumed = await pipeHere(['resume', runId!, '--json'], {cwd: repo, env: env()})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    const text = await readFile(path.join(repo, 'calc.js'), 'utf8')
    expect(text.match(/\/\/ checked/g)).to.have.length(1)
    // Turn 1 was not asked again: the resumed request carries the edit's result.
    expect(server.count()).to.equal(3)
    expect(toolResults(server.requests[2]!)['e1']).to.contain('"applied":true')
    const [snap] = await snapshots(runId!)
    expect(snap!.tool_calls!.filter((c) => c.name === 'apply_edit_blocks')).to.have.length(1)
  })
})
