/**
 * How pipe test runs the tests (the built CLI as a process): at once, each in its own store and
 * workspace (--jobs), in a copy of a workspace: folder, after setup commands run without a shell
 * (Ctrl-C kills their whole process tree), with the confirmations and stand-in secrets a test gives,
 * from a cassette --record fills, and hermetic: never the endpoint in the environment.
 */
import {expect} from 'chai'
import {execFileSync, spawn} from 'node:child_process'
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, rm} from 'node:fs/promises'
import path from 'node:path'
import {bin, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {snapshotsInStore} from '../helpers/stores.js'
import {changeIn} from '../helpers/wait.js'
import {FLOW, testFolder, type Report} from '../helpers/test-command-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-testcmd-'))
})
afterEach(async () => (process.env.KEEP_TMP ? undefined : cleanup()))

const {file, home} = testFolder(() => dir)

describe('pipe test (CLI)', function () {
  this.timeout(180000)

  it('--jobs 2 runs tests at once, each in its own store and workspace: two commands that each wait for the other both finish', async () => {
    const meet = await file(
      'meet.cjs',
      [
        '// Announces ARG2 in DIR, then waits (watching DIR, no polling) until ARG3 is announced there.',
        "const fs = require('fs'), path = require('path')",
        'const [dir, me, other] = process.argv.slice(2)',
        "fs.writeFileSync(path.join(dir, me), '')",
        'const done = () => { if (fs.existsSync(path.join(dir, other))) { fs.writeFileSync("saw-" + other, ""); process.exit(0) } }',
        'fs.watch(dir, done)',
        'done()',
        '',
      ].join('\n'),
    )
    const meeting = path.join(dir, 'meeting')
    await import('node:fs/promises').then((fs) => fs.mkdir(meeting))
    await file(
      'policy.yaml',
      `version: 1\nallowed_commands:\n  - [node, "..."]\nsandbox: off\nforbidden_paths: []\nmax_patch_lines: 10\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 60000}\n`,
    )
    await file(
      'meet.yaml',
      `version: 1\nname: meet\ninputs:\n  me: {type: string, required: true}\n  other: {type: string, required: true}\nsteps:\n  - id: meet\n    kind: command\n    timeout_ms: 60000\n    run: [node, "${meet}", "${meeting}", "\${{ inputs.me }}", "\${{ inputs.other }}"]\n`,
    )
    await file(
      'meet.pipe-test.yaml',
      'version: 1\npipeline: meet.yaml\npolicy: policy.yaml\ntests:\n  - name: a meets b\n    inputs: {me: a, other: b}\n    expect: {status: succeeded, outcomes: {meet: success}}\n  - name: b meets a\n    inputs: {me: b, other: a}\n    expect: {status: succeeded, outcomes: {meet: success}}\n',
    )
    const r = await pipe(['test', '--jobs', '2', '--keep', '--json'], {cwd: dir, env: home(), timeoutMs: 120000})
    expect(r.code, r.stderr).to.equal(0)
    const body = json<Report>(r)
    expect(body).to.include({passed: 2, failed: 0})
    expect((await readdir(meeting)).sort()).to.deep.equal(['a', 'b'])
    const [a, b] = body.tests
    expect(a!.kept).to.be.a('string').and.not.equal(b!.kept)
    // Each store holds its own run only, and each workspace what its own command wrote.
    for (const [t, other] of [
      [a!, 'b'],
      [b!, 'a'],
    ] as const) {
      expect(await readdir(path.join(t.kept!, 'store', 'runs'))).to.deep.equal([t.run!.run_id])
      expect(await readdir(path.join(t.kept!, 'workspace'))).to.deep.equal([`saw-${other}`])
    }
    for (const t of body.tests) await rm(t.kept!, {recursive: true, force: true})
  })

  it('copies a workspace: directory into the test workspace, where commands run; the original stays as it was', async () => {
    const fixture = path.join(dir, 'fixture')
    await import('node:fs/promises').then((fs) => fs.mkdir(fixture))
    await file('fixture/data.txt', 'hello')
    // The policy comes with the workspace: a run reads policy.yaml in its working directory.
    await file(
      'fixture/policy.yaml',
      `version: 1\nallowed_commands:\n  - [node, "..."]\nsandbox: off\nforbidden_paths: []\nmax_patch_lines: 10\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 60000}\n`,
    )
    await file(
      'copy.yaml',
      `version: 1\nname: copy\nsteps:\n  - {id: copy, kind: command, run: [node, -e, "const fs = require('fs'); fs.writeFileSync('out.txt', fs.readFileSync('data.txt', 'utf8') + '!'); process.stdout.write(fs.readFileSync('out.txt', 'utf8'))"], parse: text}\n`,
    )
    await file(
      'copy.pipe-test.yaml',
      'version: 1\npipeline: copy.yaml\nworkspace: fixture\ntests:\n  - name: copies\n    expect: {status: succeeded, outputs: {copy.text: "hello!"}}\n',
    )
    const r = await pipe(['test'], {cwd: dir, env: home()})
    expect(r.code, r.stdout + r.stderr).to.equal(0)
    expect((await readdir(fixture)).sort()).to.deep.equal(['data.txt', 'policy.yaml'])
  })

  it("runs setup commands without a shell and with a fixed git identity and date: the same commit id in every test; a failing one fails its test before the run; a test's own setup adds to the file's", async () => {
    await file('log.yaml', 'version: 1\nname: log\nsteps:\n  - {id: head, kind: command, run: [git, rev-parse, HEAD], parse: text}\n')
    await file(
      'policy.yaml',
      `version: 1\nallowed_commands:\n  - [git, rev-parse, HEAD]\nsandbox: off\nforbidden_paths: []\nmax_patch_lines: 10\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 60000}\n`,
    )
    const setup = 'setup:\n  - [git, init, -q]\n  - [git, commit, -q, --allow-empty, -m, "first; echo not a shell > owned"]\n'
    await file(
      'log.pipe-test.yaml',
      `version: 1\npipeline: log.yaml\npolicy: policy.yaml\n${setup}tests:\n  - {name: one, expect: {status: succeeded}}\n  - {name: two, expect: {status: succeeded}}\n  - name: broken setup\n    setup: [[git, no-such-subcommand]]\n    expect: {status: succeeded}\n  - name: adds a commit\n    setup: [[git, commit, -q, --allow-empty, -m, second]]\n    expect: {status: succeeded}\n`,
    )
    const r = await pipe(['test', 'log.pipe-test.yaml', '--json', '--keep'], {cwd: dir, env: home()})
    expect(r.code, r.stdout + r.stderr).to.equal(1)
    const report = json<Report>(r)
    const byName = new Map(report.tests.map((t) => [t.name, t]))
    const heads = await Promise.all(
      ['one', 'two'].map(async (name) => {
        const t = byName.get(name)!
        expect(t.status, JSON.stringify(t.failures)).to.equal('passed')
        // What `pipe snapshot show RUN --json --store KEPT/store` prints, read in-process.
        const shown = await snapshotsInStore(path.join(t.kept!, 'store'), t.run!.run_id)
        expect(existsSync(path.join(t.kept!, 'workspace', 'owned')), 'the message was one argument, not shell').to.equal(false)
        return (shown[0]!.outputs as {text: string}).text.trim()
      }),
    )
    expect(heads[0]).to.match(/^[0-9a-f]{40}$/)
    expect(heads[1]).to.equal(heads[0])
    const broken = byName.get('broken setup')!
    expect(broken.status).to.equal('failed')
    expect(broken.run, 'no run started').to.equal(undefined)
    expect(broken.failures[0]!.message).to.contain('setup command failed: git no-such-subcommand')
    // A test's own setup adds to the file's, after it: the commit goes on the repository the file's made.
    const added = byName.get('adds a commit')!
    expect(added.status, JSON.stringify(added.failures)).to.equal('passed')
    const log = execFileSync('git', ['log', '--format=%s'], {cwd: path.join(added.kept!, 'workspace'), encoding: 'utf8'})
    expect(log.trim().split('\n')).to.deep.equal(['second', 'first; echo not a shell > owned'])
    for (const t of report.tests) if (t.kept) await rm(t.kept, {recursive: true, force: true})
  })

  it('a test gives the confirmations the run waits for, in order, as pipe confirm would; more than the run asks for fails the test', async () => {
    await file(
      'ask.yaml',
      'version: 1\nname: ask\nsteps:\n  - {id: ask, kind: noop, confirm: true, on: {denied: refused}, next: done}\n  - {id: refused, kind: end, status: failed, reason: said no}\n  - {id: done, kind: end, status: succeeded, reason: said yes}\n',
    )
    await file(
      'ask.pipe-test.yaml',
      [
        'version: 1',
        'pipeline: ask.yaml',
        'tests:',
        '  - {name: yes, confirm: yes, expect: {status: succeeded}}',
        '  - {name: no, confirm: [no], expect: {status: failed}}',
        '  - {name: nobody, expect: {status: awaiting_input}}',
        '  - {name: too many, confirm: [yes, yes], expect: {status: succeeded}}',
        '',
      ].join('\n'),
    )
    const r = await pipe(['test', 'ask.pipe-test.yaml', '--json'], {cwd: dir, env: home()})
    expect(r.code, r.stdout + r.stderr).to.equal(1)
    const byName = new Map(json<Report>(r).tests.map((t) => [t.name, t]))
    for (const name of ['yes', 'no', 'nobody']) expect(byName.get(name)!.status, JSON.stringify(byName.get(name)!.failures)).to.equal('passed')
    const extra = byName.get('too many')!
    expect(extra.status).to.equal('failed')
    expect(extra.failures[0]!.message).to.equal('the test gives 2 confirmation(s), but the run asked for 1 before it stopped succeeded')
  })

  it("a test's stand-in secrets are its run's, never the environment's: the file's for every test, a test's own over them", async () => {
    await file(
      'sec.yaml',
      "version: 1\nname: sec\nsecrets: [PIPE_TEST_FAKE_TOKEN]\nsteps:\n  - {id: check, kind: choice, choices: [{when: \"${{ secrets.PIPE_TEST_FAKE_TOKEN == 'stand-in-one' }}\", next: one}], default: other}\n  - {id: one, kind: end, status: succeeded, reason: the file's}\n  - {id: other, kind: end, status: failed, reason: another}\n",
    )
    await file(
      'sec.pipe-test.yaml',
      [
        'version: 1',
        'pipeline: sec.yaml',
        'secrets: {PIPE_TEST_FAKE_TOKEN: stand-in-one}',
        'tests:',
        '  - {name: the file secret, expect: {status: succeeded}}',
        '  - {name: its own secret, secrets: {PIPE_TEST_FAKE_TOKEN: stand-in-two}, expect: {status: failed}}',
        '',
      ].join('\n'),
    )
    const r = await pipe(['test', 'sec.pipe-test.yaml', '--json'], {cwd: dir, env: {...home(), PIPE_TEST_FAKE_TOKEN: undefined}})
    expect(r.code, r.stdout + r.stderr).to.equal(0)
    for (const t of json<Report>(r).tests) expect(t.status, `${t.name}: ${JSON.stringify(t.failures)}`).to.equal('passed')
    const dry = await pipe(['run', 'sec.yaml', '--dry-run'], {cwd: dir, env: {...home(), PIPE_TEST_FAKE_TOKEN: undefined}})
    expect(dry.code, dry.stderr).to.equal(0)
  })

  it('Ctrl-C during a setup command that hangs kills its whole process tree: the test fails as interrupted, no temporary directory is left', async () => {
    const tmp = path.join(dir, 'tmp')
    await mkdir(tmp)
    const pidFile = path.join(dir, 'sleeper.pid')
    await file('flow.yaml', FLOW)
    // The shell waits on a child of its own, which holds the output pipes: killing the shell alone would leave both.
    await file(
      'hang.pipe-test.yaml',
      `version: 1\npipeline: flow.yaml\nsetup:\n  - [sh, -c, "sleep 300 & echo $! > ${pidFile}; wait"]\ntests:\n  - name: hangs in setup\n    inputs: {n: 9}\n    expect: {status: succeeded}\n`,
    )
    const env: NodeJS.ProcessEnv = {...process.env, ...home(), TMPDIR: tmp, NO_COLOR: '1'}
    delete env.PIPE_STORE
    const child = spawn(process.execPath, [bin, 'test', 'hang.pipe-test.yaml'], {cwd: dir, env})
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d))
    const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    const killer = setTimeout(() => child.kill('SIGKILL'), 120000)
    // Wait for the setup's grandchild to exist (its pid written: watched, not polled).
    await changeIn(dir, async () => existsSync(pidFile) && (await readFile(pidFile, 'utf8')).trim() !== '', 'the setup writing its pid', closed).catch(
      (error: Error) => {
        throw new Error(`${error.message}:\n${out}`)
      },
    )
    const sleeper = Number((await readFile(pidFile, 'utf8')).trim())
    child.kill('SIGINT')
    const code = await closed
    clearTimeout(killer)
    const alive = (pid: number): boolean => {
      try {
        // A zombie has ended; only its parent (init, here) has yet to reap it.
        return !/^\d+ \(.*\) Z/.test(execFileSync('cat', [`/proc/${pid}/stat`], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore']}))
      } catch {
        return false
      }
    }
    if (alive(sleeper)) process.kill(sleeper, 'SIGKILL')
    expect(code, out).to.equal(1)
    expect(out)
      .to.match(/✗ hang\.pipe-test\.yaml › hangs in setup/)
      .and.contain('pipe test was interrupted')
    expect(out).not.to.contain('quitting now')
    expect(alive(sleeper), "the setup command's child was killed").to.equal(false)
    expect(await readdir(tmp)).to.deep.equal([])
  })

  it('--record fills a missing cassette from the endpoint in the environment (with its note, no key in it); the tests then pass from it with the endpoint gone', async () => {
    const {ModelServer} = await import('../helpers/model-server.js')
    await import('node:fs/promises').then((fs) => fs.mkdir(path.join(dir, 'schemas')))
    await file('ask.md', 'Name a colour for {{thing}}.\n')
    await file(
      'schemas/colour.json',
      JSON.stringify({type: 'object', required: ['colour'], properties: {colour: {type: 'string'}}, additionalProperties: false}),
    )
    await file(
      'ask.yaml',
      'version: 1\nname: ask\ninputs:\n  thing: {type: string, required: true}\nsteps:\n  - {id: ask, kind: model, prompt: ask.md, vars: {thing: "${{ inputs.thing }}"}, output_schema: schemas/colour.json}\n',
    )
    await file(
      'ask.pipe-test.yaml',
      'version: 1\npipeline: ask.yaml\ncassette: cassettes/ask.jsonl\ntests:\n  - {name: sky, inputs: {thing: sky}, expect: {status: succeeded, outputs: {ask.value.colour: blue}}}\n  - {name: grass, inputs: {thing: grass}, expect: {status: succeeded, outputs: {ask.value.colour: green}}}\n',
    )
    const offline = await pipe(['test', 'ask.pipe-test.yaml'], {cwd: dir, env: home()})
    expect(offline.code, 'a missing cassette is a bad test file').to.equal(2)
    expect(offline.stderr).to.contain('cassette cassettes/ask.jsonl not found')
    const server = await ModelServer.start((request) => ({
      content: JSON.stringify({colour: request.body.messages.at(-1)!.content.includes('sky') ? 'blue' : 'green'}),
    }))
    const key = 'sk-test-secret-key-0123456789abcdef'
    try {
      const recorded = await pipe(['test', 'ask.pipe-test.yaml', '--record', '--record-note', 'scripted server in the pipe test suite'], {
        cwd: dir,
        env: {...home(), OPENAI_BASE_URL: server.url, OPENAI_API_KEY: key},
      })
      expect(recorded.code, recorded.stdout + recorded.stderr).to.equal(0)
      expect(server.count()).to.equal(2)
    } finally {
      await server.close()
    }
    const cassette = await readFile(path.join(dir, 'cassettes', 'ask.jsonl'), 'utf8')
    expect(cassette.split('\n')[0]).to.contain('"note":"scripted server in the pipe test suite"')
    expect(cassette.trim().split('\n')).to.have.length(3)
    expect(cassette).to.not.contain(key)
    const replayed = await pipe(['test', 'ask.pipe-test.yaml'], {cwd: dir, env: home()})
    expect(replayed.code, replayed.stdout + replayed.stderr).to.equal(0)
    expect(replayed.stdout).to.contain('Tests: 2 passed, 2 total')
  })

  it('is hermetic: with OPENAI_API_KEY and OPENAI_BASE_URL set, the runs still use the offline provider and send nothing', async () => {
    let requests = 0
    const server = http.createServer((_req, res) => {
      requests++
      res.writeHead(500).end()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const port = (server.address() as AddressInfo).port
      const r = await pipe(['test', 'pipelines/default.pipe-test.yaml', '--filter', 'full PRD', '--json'], {
        cwd: repoRoot,
        env: {...home(), OPENAI_API_KEY: 'sk-test-not-a-real-key-123456', OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`},
        timeoutMs: 120000,
      })
      expect(r.code, r.stdout + r.stderr).to.equal(0)
      expect(json<Report>(r)).to.include({passed: 1, failed: 0})
      expect(requests).to.equal(0)
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
