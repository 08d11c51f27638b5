/**
 * Issue 35, items 1-4: a secret never leaves pipe unmasked, whatever text carries it. One canary
 * value is sent through every field a run can carry (a model step's prompt var and reply, a
 * confirm step's argv and the pause's reason, a failing command's output and error, a hint, the
 * outputs, pipe test's failure report) and then searched for, as it is and encoded, in every byte
 * pipe wrote: the whole store folder, the daily log, stdout and stderr of every command, the
 * cassette, the spans a real OTLP receiver got, the HTML export and the view's run page. The store
 * URL's password (PostgreSQL) and a collector URL's password are searched for the same way, and
 * token shapes written in a pipeline's argv on the progress line.
 *
 * What a real process writes is the subject: the main case (every command of the first test, each
 * with a collector: OpenTelemetry is read once per process) and the runs with a collector's URL are
 * `pipe` processes; the other tests' commands (a `run` and a `resume` again, which the main case runs
 * as processes) run in this process (test/helpers/pipe-here.ts: the same path from argv, its stdout
 * and stderr redacted as a process's).
 */
import {expect} from 'chai'
import {execFileSync, type ChildProcess} from 'node:child_process'
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {ModelServer} from '../helpers/model-server.js'
import {OtlpReceiver} from '../helpers/otlp-receiver.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {raw, startView} from '../helpers/view.js'

const CANARY = 'canary-9f3a7c2e1b-SECRET'
/** Token shapes written in the pipeline itself: no variable names them, their shape does. */
const SK = 'sk-canaryAbCdEfGhIjKlMnOp1234'
const GHP = 'ghp_canaryAbCdEfGhIjKlMnOpQrStUvWxYz0123'

/** The forms a value takes in what pipe writes: as it is, base64 (padded or not, base64url), URL-encoded. */
function formsOf(value: string): string[] {
  const base64 = Buffer.from(value).toString('base64')
  return [...new Set([value, base64, base64.replace(/=+$/, ''), Buffer.from(value).toString('base64url'), encodeURIComponent(value)])]
}

/** Where any form of any of `values` appears in `text`, named by `where`. */
function leaks(where: string, text: string, values: string[]): string[] {
  return values.flatMap((value) =>
    formsOf(value)
      .filter((form) => text.includes(form))
      .map((form) => `${where}: ${form === value ? value : `${value} (as ${form})`}`),
  )
}

async function filesUnder(root: string): Promise<string[]> {
  const entries = await readdir(root, {withFileTypes: true, recursive: true}).catch(() => [])
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))
}

async function leaksInFiles(root: string, values: string[]): Promise<string[]> {
  const out: string[] = []
  for (const file of await filesUnder(root)) out.push(...leaks(path.relative(root, file), await readFile(file, 'latin1'), values))
  return out
}

const outputLeaks = (name: string, result: CliResult, values: string[]): string[] => [
  ...leaks(`${name} stdout`, result.stdout, values),
  ...leaks(`${name} stderr`, result.stderr, values),
]

const SCHEMA = {type: 'object', additionalProperties: false, required: ['items'], properties: {items: {type: 'array', items: {type: 'string'}}}}

const PIPELINE = `version: 1
name: canary
secrets: [HOOK_URL]
steps:
  - id: draft
    kind: model
    prompt: prompts/notes.md
    vars:
      hook: "\${{ secrets.HOOK_URL }}"
    output_schema: schemas/notes.schema.json
    next: hook
  - id: hook
    kind: command
    run: [node, -e, "console.log('posted to ' + process.argv[1]); console.error('could not post to ' + process.argv[1]); process.exit(3)", "\${{ secrets.HOOK_URL }}"]
    confirm: true
    on: {failure: last}
    next: last
  - id: last
    kind: command
    run: [node, -e, "console.error('refused ' + process.argv[1]); process.exit(4)", "\${{ secrets.HOOK_URL }}", "${SK}", "${GHP}"]
    next: done
  - {id: done, kind: end, status: succeeded, reason: it ran}
`

/** For pipe test: a run that pauses on the confirm step, where the test expects it to succeed. */
const PAUSES = `version: 1
name: pauses
secrets: [HOOK_URL]
steps:
  - id: hook
    kind: command
    run: [node, -e, "process.exit(0)", "\${{ secrets.HOOK_URL }}"]
    confirm: true
    next: done
  - {id: done, kind: end, status: succeeded, reason: it ran}
`

const PIPE_TEST = `version: 1
pipeline: pauses.yaml
tests:
  - name: the hook is posted
    input: a requirement
    expect:
      status: succeeded
`

const POLICY = `version: 1\nallowed_commands:\n  - [node, -e, "..."]\n`

describe('secrets never leave pipe unmasked (issue 35)', function () {
  this.timeout(240000)

  let dir: string
  let cleanup: () => Promise<void>
  let server: ModelServer | undefined
  let receiver: OtlpReceiver | undefined
  const servers: ChildProcess[] = []

  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-canary-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
  })
  afterEach(async () => {
    for (const child of servers.splice(0)) child.kill('SIGTERM')
    await server?.close()
    await receiver?.close()
    server = undefined
    receiver = undefined
    await cleanup()
  })

  it('a canary secret sent through every field of a run is found nowhere: store, log, stdout/stderr, cassette, spans, HTML export, view', async () => {
    await mkdir(path.join(dir, 'prompts'))
    await mkdir(path.join(dir, 'schemas'))
    await writeFile(path.join(dir, 'prompts', 'notes.md'), 'Write notes for the hook {{hook}}.\n')
    await writeFile(path.join(dir, 'schemas', 'notes.schema.json'), JSON.stringify(SCHEMA))
    await writeFile(path.join(dir, 'p.yaml'), PIPELINE)
    await writeFile(path.join(dir, 'pauses.yaml'), PAUSES)
    await writeFile(path.join(dir, 'canary.pipe-test.yaml'), PIPE_TEST)
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    server = await ModelServer.start()
    // The model echoes the secret it was given, into the step's outputs.
    server.script('draft', {content: JSON.stringify({items: [`posted to ${CANARY}`]})})
    receiver = await OtlpReceiver.start()
    const home = path.join(dir, 'home')
    // HOOK_URL is named like no secret: only the pipeline's secrets: makes it one.
    const env = {
      HOOK_URL: CANARY,
      PIPE_INTERACTIVE: '0',
      PIPE_HOME: home,
      OPENAI_BASE_URL: server.url,
      OPENAI_API_KEY: 'test-key-for-the-local-server',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    }
    const cli = (args: string[]): Promise<CliResult> => pipe(args, {cwd: dir, env, timeoutMs: 90000})
    const results: Array<[string, CliResult]> = []
    const call = async (args: string[]): Promise<CliResult> => {
      const result = await cli(args)
      results.push([`pipe ${args.join(' ')}`, result])
      return result
    }

    const started = await call(['run', 'p.yaml', '--text', 'post the hook', '--record', 'cassette.jsonl'])
    expect(started.code, started.stderr).to.equal(10)
    const runId = /run (R-\d{8}-\d{4})/.exec(started.stdout)![1]!
    expect(started.stdout, 'the pause is shown').to.contain('waits for a person to confirm it')
    const confirmed = await call(['confirm', runId, '--yes', '--json'])
    expect(confirmed.code, confirmed.stderr).to.equal(1)
    expect(confirmed.stderr, 'the last step failed, and its error was said').to.contain('E_BUILD_FAIL')
    expect(confirmed.stderr, 'item 4: the token shapes are masked on the progress line').to.contain('[REDACTED]')
    const redriven = await call(['resume', runId])
    expect(redriven.code, redriven.stderr).to.equal(1)
    await call(['resume', runId, '--json'])
    for (const args of [
      ['snapshot', 'show', runId],
      ['snapshot', 'show', runId, '--json'],
      ['snapshot', 'show', runId, '--step', 'draft', '--prompt'],
      ['runs', 'show', runId],
      ['runs', 'show', runId, '--json'],
      ['runs', 'list', '--json'],
      ['audit', 'verify'],
      ['audit', 'verify', '--json'],
      ['export', runId, '--html', 'run.html'],
    ])
      await call(args)
    const audit = results.find(([name]) => name === 'pipe audit verify')![1]
    expect(audit.code, `${audit.stdout}${audit.stderr}`).to.equal(0)
    const tested = await call(['test', 'canary.pipe-test.yaml'])
    expect(tested.code, 'the pipe test fails (the run pauses)').to.not.equal(0)
    expect(`${tested.stdout}${tested.stderr}`).to.contain('awaiting_input')

    const view = await startView(dir, servers, [], env)
    const page = await raw(`${view.url}runs/${runId}`)
    expect(page.status).to.equal(200)

    const values = [CANARY, SK, GHP]
    const found = [
      ...results.flatMap(([name, result]) => outputLeaks(name, result, values)),
      ...(await leaksInFiles(path.join(dir, '.pipe'), values)).map((l) => `.pipe/${l}`),
      ...(await leaksInFiles(home, values)).map((l) => `PIPE_HOME/${l}`),
      ...leaks('cassette.jsonl', await readFile(path.join(dir, 'cassette.jsonl'), 'utf8'), values),
      ...leaks('run.html', await readFile(path.join(dir, 'run.html'), 'utf8'), values),
      ...leaks('spans', JSON.stringify(receiver.spans), values),
      ...leaks('pipe view run page', page.body, values),
      ...leaks('pipe view stderr', view.stderr(), values),
    ]
    expect(found, 'every place a secret was found').to.deep.equal([])
    // The canary did reach what it went through: the model was asked with it, the spans and the cassette exist.
    expect(JSON.stringify(server.requests[0]!.body.messages)).to.contain(CANARY)
    expect(receiver.spans.length).to.be.greaterThan(0)
  })

  it('token shapes written in a pipeline without secrets: (sk-..., ghp_...) are masked on the progress line as in the records', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    await writeFile(
      path.join(dir, 'tokens.yaml'),
      `version: 1\nname: tokens\nsteps:\n  - {id: last, kind: command, run: [node, -e, "process.exit(4)", "${SK}", "${GHP}"]}\n`,
    )
    const home = path.join(dir, 'home')
    const plain = await pipeHere(['run', 'tokens.yaml', '--text', 'x'], {cwd: dir, env: {PIPE_HOME: home}})
    const asJson = await pipeHere(['run', 'tokens.yaml', '--text', 'x', '--json'], {cwd: dir, env: {PIPE_HOME: home}})
    for (const result of [plain, asJson]) {
      expect(result.code, result.stderr).to.equal(1)
      expect(result.stderr, 'the progress line names the failed command').to.match(
        /✗ #1 last failure .*node -e process\.exit\(4\) \[REDACTED\] \[REDACTED\] exited 4/,
      )
    }
    const found = [
      ...outputLeaks('run', plain, [SK, GHP]),
      ...outputLeaks('run --json', asJson, [SK, GHP]),
      ...(await leaksInFiles(path.join(dir, '.pipe'), [SK, GHP])),
    ]
    expect(found).to.deep.equal([])
  })

  it('a collector URL with a password (OTEL_EXPORTER_OTLP_ENDPOINT, ..._TRACES_ENDPOINT) is not printed when traces are not delivered', async () => {
    await writeFile(path.join(dir, 'one.yaml'), 'version: 1\nname: one\nsteps:\n  - {id: a, kind: noop}\n')
    // A collector that is gone: its port refuses the connection.
    const gone = await OtlpReceiver.start()
    await gone.close()
    const password = 'canaryOtelPw9f3a7c'
    const withPassword = gone.url.replace('http://', `http://collector:${password}@`)
    const plain = await pipe(['run', 'one.yaml'], {cwd: dir, env: {OTEL_EXPORTER_OTLP_ENDPOINT: withPassword, PIPE_HOME: path.join(dir, 'home')}})
    const asJson = await pipe(['run', 'one.yaml', '--json'], {
      cwd: dir,
      env: {OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${withPassword}/v1/traces`, PIPE_HOME: path.join(dir, 'home')},
    })
    for (const result of [plain, asJson]) {
      expect(result.code, result.stderr).to.equal(0)
      expect(result.stderr, 'the lost traces are said').to.contain('traces were not delivered to http://[REDACTED]@127.0.0.1')
    }
    expect([...outputLeaks('run', plain, [password]), ...outputLeaks('run --json', asJson, [password])]).to.deep.equal([])
  })

  describe('on a PostgreSQL store whose URL has a password', function () {
    let cluster: Cluster
    before(async function () {
      cluster = await startCluster(this)
    })
    after(async () => cluster?.stop())

    it('the command that continues a failed run names the store without its password, and it continues the run', async () => {
      const password = 'canaryPgPw9f3a7c2e'
      const database = await cluster.createDatabase()
      // The test cluster trusts local connections: a URL with a password is accepted, which is enough to see where it is printed.
      const store = cluster.url(database).replace('postgres://postgres@', `postgres://postgres:${password}@`)
      await writeFile(path.join(dir, 'fails.yaml'), 'version: 1\nname: fails\nsteps:\n  - {id: a, kind: command, run: [node, -e, "process.exit(3)"]}\n')
      await writeFile(path.join(dir, 'policy.yaml'), POLICY)
      const env = {PIPE_HOME: path.join(dir, 'home'), PIPE_INTERACTIVE: '0'}
      const plain = await pipeHere(['run', 'fails.yaml', '--text', 'x', '--store', store], {cwd: dir, env})
      expect(plain.code, plain.stderr).to.equal(1)
      const asJson = await pipeHere(['run', 'fails.yaml', '--text', 'x', '--store', store, '--json'], {cwd: dir, env})
      expect(asJson.code, asJson.stderr).to.equal(1)
      const next = json<{next_command?: string}>(asJson).next_command
      const storeShown = cluster.url(database)
      expect(next).to.match(new RegExp(`^pipe resume R-\\d{8}-\\d{4} --store ${storeShown.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`))
      expect(plain.stdout).to.contain(`--store ${storeShown}`)
      // The command as printed continues the run (the password comes from PGPASSWORD or ~/.pgpass where one is needed).
      const resumed = await pipeHere(next!.split(' ').slice(1), {cwd: dir, env})
      expect(resumed.stderr, 'the run was redriven, not refused').to.contain('E_BUILD_FAIL')
      expect(resumed.code).to.equal(1)
      expect([
        ...outputLeaks('run', plain, [password]),
        ...outputLeaks('run --json', asJson, [password]),
        ...outputLeaks('resume', resumed, [password]),
      ]).to.deep.equal([])
    })
  })
})
