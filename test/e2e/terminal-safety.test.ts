/**
 * Text pipe did not write (model replies, spec content, file content) never drives the terminal:
 * escape sequences, carriage returns and bidi overrides reach stdout and stderr escaped and visible,
 * while the store keeps the original text and --json gives it back exactly.
 *
 * The first use of each command (run, spec show, validate, an unknown command) and the prompt at a
 * terminal (stdin) are `pipe` processes; the other commands run in this process
 * (test/helpers/pipe-here.ts: the command's own code, its stdout and stderr redacted as a process
 * writes them).
 */
import {expect} from 'chai'
import {cp, mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'
import {examples, json, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {cannedReply, ModelServer, type ModelRequest, type Scripted} from '../helpers/model-server.js'

const prd = path.join(examples, 'full-prd.md')

// Clipboard write (OSC 52), a hidden link (OSC 8), clear screen, a carriage return with a forged
// success line, a C1 CSI, and a right-to-left override.
const HOSTILE =
  'Tracker\u001B]52;c;SGFja2Vk\u0007\u001B]8;;http://evil.example/\u0007docs\u001B]8;;\u0007\u001B[2J\r  ✓ #9 publish success\u009B31m\u202Egnp.exe'
const ESCAPED = 'Tracker\\x1b]52;c;SGFja2Vk\\x07\\x1b]8;;http://evil.example/\\x07docs\\x1b]8;;\\x07\\x1b[2J\\r  ✓ #9 publish success\\u009b31m\\u202egnp.exe'

/** Any character that a terminal would act on rather than show. */
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069]/

function expectSafe(result: CliResult, what: string): void {
  for (const [name, text] of [
    ['stdout', result.stdout],
    ['stderr', result.stderr],
  ] as const) {
    const at = RAW.exec(text)
    expect(
      at,
      `${what}: ${name} holds a raw control character ${JSON.stringify(at?.[0])} near ${JSON.stringify(text.slice(Math.max(0, (at?.index ?? 0) - 40), (at?.index ?? 0) + 40))}`,
    ).to.equal(null)
  }
}

let dir: string
let cleanup: () => Promise<void>
let server: ModelServer | undefined

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-term-'))
  await cp(path.join(repoRoot, 'pipelines'), path.join(dir, 'pipelines'), {recursive: true})
})
afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup()
})

function env(): Record<string, string> {
  return {OPENAI_BASE_URL: server!.url, OPENAI_API_KEY: 'sk-test-terminal-0000000000', PIPE_HOME: path.join(dir, 'home')}
}

/** run(extra) as a `pipe` process. */
function run(extra: string[], input?: string, more: Record<string, string> = {}): Promise<CliResult> {
  return pipe(['run', path.join(dir, 'pipelines', 'default.yaml'), '--input', prd, '--provider', 'openai', ...extra], {
    cwd: dir,
    env: {...env(), ...more},
    ...(input !== undefined ? {input} : {}),
  })
}

/** run(extra) in this process. */
function runHere(extra: string[]): Promise<CliResult> {
  return pipeHere(['run', path.join(dir, 'pipelines', 'default.yaml'), '--input', prd, '--provider', 'openai', ...extra], {cwd: dir, env: env()})
}

/** The canned replies, with hostile text in the compile reply's title, goal, a feature and a constraint. */
function hostileCompile(request: ModelRequest): Scripted {
  if (request.kind !== 'compile') return cannedReply(request)
  const reply = JSON.parse(cannedReply(request).content!) as {title: string; goal: string; features: Array<{title: string}>; constraints: string[]}
  reply.title = HOSTILE
  reply.goal = `${HOSTILE}\nsecond line\tafter a tab`
  reply.features[0]!.title = HOSTILE
  reply.constraints[0] = HOSTILE
  return {content: JSON.stringify(reply)}
}

describe('terminal-safe output of text pipe did not write', function () {
  this.timeout(120000)

  it('a hostile model reply is shown escaped by run, spec show, spec diff, snapshot show and runs show, and stored as it was', async () => {
    server = await ModelServer.start(hostileCompile)
    const result = await run(['--decision', 'go'])
    expect(result.code, result.stderr).to.equal(0)
    expectSafe(result, 'pipe run')
    const runId = /run (R-[0-9A-Za-z-]+)/.exec(result.stdout)![1]!
    const spec = /spec (S-\d{8}-\d{4})/.exec(result.stdout)![1]!

    // spec show is a process too: the spec's own text, escaped, as a terminal gets it.
    const markdown = await pipe(['spec', 'show', spec], {cwd: dir})
    expect(markdown.code, markdown.stderr).to.equal(0)
    expectSafe(markdown, 'spec show')
    expect(markdown.stdout).to.contain(ESCAPED)
    // A spec's own line breaks and tabs are text of several lines, kept as they are.
    expect(markdown.stdout).to.contain('\nsecond line\tafter a tab')

    const yaml = await pipeHere(['spec', 'show', spec, '--format', 'yaml'], {cwd: dir})
    expect(yaml.code, yaml.stderr).to.equal(0)
    expectSafe(yaml, 'spec show --format yaml')

    // The store holds the reply's text unchanged; --json gives it back exactly (bidi and C1 as \u escapes).
    const stored = await pipeHere(['spec', 'show', spec, '--json'], {cwd: dir})
    expectSafe(stored, 'spec show --json')
    expect(stored.stdout).to.contain('\\u202e').and.to.contain('\\u009b').and.to.contain('\\u001b]52;c;')
    const record = json<CanonicalSpec>(stored)
    expect(record.meta.title).to.equal(HOSTILE)
    expect(record.goal).to.equal(`${HOSTILE}\nsecond line\tafter a tab`)
    expect(record.constraints[0]!.text).to.equal(HOSTILE)
    const file = JSON.parse(await readFile(path.join(dir, '.pipe', 'specs', `${spec}.json`), 'utf8').catch(() => 'null')) as CanonicalSpec | null
    if (file) expect(file.goal).to.equal(record.goal)

    expectSafe(await pipeHere(['spec', 'list'], {cwd: dir}), 'spec list')
    // The compiled version against the last: the diff quotes neither changed field, but the first version's goal is hostile.
    const diff = await pipeHere(['spec', 'diff', record.meta.parent_version!, spec], {cwd: dir})
    expect(diff.code, diff.stderr).to.equal(0)
    expectSafe(diff, 'spec diff')

    const snapshots = await pipeHere(['snapshot', 'show', runId], {cwd: dir})
    expect(snapshots.code, snapshots.stderr).to.equal(0)
    expectSafe(snapshots, 'snapshot show')
    expect(snapshots.stdout).to.contain('compile')

    const show = await pipeHere(['runs', 'show', runId], {cwd: dir})
    expect(show.code, show.stderr).to.equal(0)
    expectSafe(show, 'runs show')
    expectSafe(await pipeHere(['runs', 'list'], {cwd: dir}), 'runs list')
    expectSafe(await pipeHere(['snapshot', 'list', runId], {cwd: dir}), 'snapshot list')
  })

  it("a model step's hostile reply is escaped in snapshot show and, through an end step's reason, in the run's result and progress", async () => {
    // A line break in a one-line field would forge a progress line of its own.
    const title = `${HOSTILE}\n  ✓ #3 forged success`
    server = await ModelServer.start(() => ({content: JSON.stringify({items: [{title}]})}))
    await mkdir(path.join(dir, 'p', 'prompts'), {recursive: true})
    await writeFile(path.join(dir, 'p', 'prompts', 'notes.md'), 'Notes\n')
    await writeFile(
      path.join(dir, 'p', 'notes.schema.json'),
      JSON.stringify({
        type: 'object',
        required: ['items'],
        properties: {items: {type: 'array', items: {type: 'object', required: ['title'], properties: {title: {type: 'string'}}}}},
      }),
    )
    const file = path.join(dir, 'p', 'p.yaml')
    await writeFile(
      file,
      'version: 1\nname: notes\nsteps:\n  - {id: draft, kind: model, prompt: prompts/notes.md, output_schema: notes.schema.json, next: stop}\n  - {id: stop, kind: end, status: failed, reason: "${{ steps.draft.outputs.value.items[0].title }}"}\n',
    )
    const result = await pipeHere(['run', file], {cwd: dir, env: env()})
    expect(result.code, result.stderr).to.equal(1)
    expectSafe(result, 'pipe run (end step quoting the reply)')
    // The result's reason and the progress lines are one-line fields; the error channel's message may span lines (a list of diagnostics).
    expect(result.stdout).to.not.contain('\n  ✓ #3 forged')
    expect(result.stderr.slice(0, result.stderr.indexOf('Error ['))).to.not.contain('\n  ✓ #3 forged')
    // A multi-line reason is said in full once, by the error channel; the result keeps to its first line.
    expect(result.stdout).to.contain(`reason: step stop failed: ${ESCAPED} […1 more line(s): the error on stderr]`)
    const runId = /run (R-[0-9A-Za-z-]+)/.exec(result.stdout)![1]!

    const snapshots = await pipeHere(['snapshot', 'show', runId], {cwd: dir})
    expect(snapshots.code, snapshots.stderr).to.equal(0)
    expectSafe(snapshots, 'snapshot show (model step outputs)')
    // Outputs are shown as YAML, which writes ESC as \e itself; C1 controls and bidi overrides are escaped by pipe.
    expect(snapshots.stdout)
      .to.match(/\\(e|x1b)\]52;c;/)
      .and.to.contain('\\u009b31m\\u202egnp.exe')
    const draft = json<Snapshot[]>(await pipeHere(['snapshot', 'show', runId, '--json'], {cwd: dir})).find((s) => s.step.name === 'draft')!
    expect(draft.outputs).to.deep.equal({value: {items: [{title}]}})
    const show = await pipeHere(['runs', 'show', runId], {cwd: dir})
    expectSafe(show, 'runs show (end step quoting the reply)')
    expect(show.stdout).to.not.contain('\n  ✓ #3 forged')
  })

  it('an error quoting a hostile reply is escaped on stderr, in the progress lines, and in runs show and snapshot show', async () => {
    // V8's JSON.parse message quotes the reply's first ten characters or so: they hold the escape sequence.
    server = await ModelServer.start((request) => (request.kind === 'compile' ? {content: `\u001B]52;c;${HOSTILE}`} : cannedReply(request)))
    const result = await runHere(['--decision', 'go'])
    expect(result.code).to.equal(1)
    expect(result.stderr).to.contain('Error [E_MODEL]')
    expect(result.stderr).to.contain('"\\x1b]52;c;')
    expectSafe(result, 'pipe run (failed)')
    const runId = /run (R-[0-9A-Za-z-]+)/.exec(result.stdout)![1]!
    const show = await pipeHere(['runs', 'show', runId], {cwd: dir})
    expectSafe(show, 'runs show (failed)')
    expect(show.stdout).to.contain('"\\x1b]52;c;')
    const snapshots = await pipeHere(['snapshot', 'show', runId], {cwd: dir})
    expectSafe(snapshots, 'snapshot show (failed)')
    expect(snapshots.stdout).to.contain('"\\x1b]52;c;')
    // The recorded error keeps the reply's text as it was.
    const compile = json<Snapshot[]>(await pipeHere(['snapshot', 'show', runId, '--json'], {cwd: dir})).find((s) => s.step.name === 'compile')!
    expect(compile.errors[0]!.message).to.contain('"\u001B]52;c;')
    // --json errors stay one exact JSON document.
    const asJson = await runHere(['--decision', 'go', '--json'])
    const body = json<{error: {message: string}}>(asJson)
    expect(body.error.message).to.contain('"\u001B]52;c;')
    expectSafe(asJson, 'pipe run --json (failed)')
  })

  it('hostile clarifying questions are escaped where the run lists them, at the prompt, and in pipe answer', async () => {
    server = await ModelServer.start((request) => {
      if (request.kind === 'compile') {
        const reply = JSON.parse(cannedReply(request).content!) as {acceptance_criteria: unknown[]}
        reply.acceptance_criteria = []
        return {content: JSON.stringify(reply)}
      }
      if (request.kind === 'clarify_questions') return {content: JSON.stringify({questions: [{field: 'acceptance_criteria', question: HOSTILE}]})}
      return cannedReply(request)
    })
    const paused = await runHere([])
    expect(paused.code, paused.stderr).to.equal(10)
    expectSafe(paused, 'pipe run (paused at questions)')
    expect(paused.stdout).to.contain(ESCAPED)
    const runId = /run (R-[0-9A-Za-z-]+)/.exec(paused.stdout)![1]!

    const listed = await pipeHere(['answer', runId, '--questions'], {cwd: dir})
    expectSafe(listed, 'pipe answer (list)')
    expect(listed.stdout + listed.stderr).to.contain(ESCAPED)

    // A process: the prompt reads its stdin.
    const prompted = await run([], '', {PIPE_INTERACTIVE: '1'})
    expectSafe(prompted, 'pipe run at the prompt')
    expect(prompted.stderr).to.contain(ESCAPED)

    const show = await pipeHere(['runs', 'show', runId], {cwd: dir})
    expectSafe(show, 'runs show (awaiting answers)')
    expect(show.stdout).to.contain(ESCAPED)
  })

  it('a pipeline file with escape sequences in it is reported escaped by validate and by run', async () => {
    const file = path.join(dir, 'bad.yaml')
    const text = await readFile(path.join(dir, 'pipelines', 'default.yaml'), 'utf8')
    await writeFile(file, text.replace('steps:\n', `steps:\n  - {id: "x\u001B[2J\u001B]0;owned\u0007\u202E", kind: noop}\n`))
    const validated = await pipe(['validate', file], {cwd: dir})
    expect(validated.code).to.not.equal(0)
    expectSafe(validated, 'pipe validate')
    expect(validated.stdout + validated.stderr)
      .to.contain('owned')
      .and.to.contain('\\u202e')
    const ran = await pipeHere(['run', file, '--input', prd], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(ran.code).to.not.equal(0)
    expectSafe(ran, 'pipe run of a bad pipeline')
  })

  it('the daily log, read with cat or tail -f, gets the same text escaped, one line per entry', async () => {
    const home = path.join(dir, 'home')
    // A newline in the text would forge a log entry of its own (no colon: the router reads a colon as a topic's separator).
    const forged = '\n2026-01-01T00 INFO pid=1 all good'
    const unknown = await pipeHere([`\u001B[2Jrn\u202E${forged}`], {cwd: dir, env: {PIPE_HOME: home}})
    expect(unknown.code).to.not.equal(0)
    server = await ModelServer.start((request) => (request.kind === 'compile' ? {content: `\u001B]52;c;${HOSTILE}${forged}`} : cannedReply(request)))
    const failed = await runHere(['--decision', 'go'])
    expect(failed.code).to.equal(1)
    const logs = await readdir(path.join(home, 'logs'))
    expect(logs).to.have.length(1)
    const text = await readFile(path.join(home, 'logs', logs[0]!), 'utf8')
    const at = RAW.exec(text)
    expect(at, `the log holds a raw control character near ${JSON.stringify(text.slice(Math.max(0, (at?.index ?? 0) - 40), (at?.index ?? 0) + 40))}`).to.equal(
      null,
    )
    expect(text).to.contain('\\x1b[2Jrn\\u202e\\n2026-01-01T00 INFO pid=1 all good')
    expect(text).to.contain('\\x1b]52;c;')
    // Each entry is a line of its own, and what follows it (a stack) is indented.
    for (const entry of text.split('\n').filter((l) => l !== '')) expect(entry, entry).to.match(/^(\d{4}-\d\d-\d\dT\S+ (ERROR|WARN|INFO) pid=\d+ | {4})/)
    expect(text, 'a forged entry').to.not.match(/^2026-01-01T00/m)
  })

  it('an unknown command with escape sequences in its name is echoed escaped', async () => {
    const result = await pipe(['\u001B[2Jrn\u202E'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(result.code).to.not.equal(0)
    expectSafe(result, 'unknown command')
    expect(result.stderr).to.contain('\\x1b[2Jrn\\u202e')
    const asJson = await pipeHere(['\u001B[2Jrn\u202E', '--json'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expectSafe(asJson, 'unknown command --json')
    expect(json<{error: {message: string}}>(asJson).error.message).to.contain('\u001B[2Jrn\u202E')
    for (const args of [
      ['help', '\u001B[2Jrn\u202E'],
      ['help', '\u001B[2Jrn\u202E', '--json'],
    ]) {
      const help = await pipeHere(args, {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
      expect(help.code).to.not.equal(0)
      expectSafe(help, args.join(' '))
      expect(help.stderr).to.contain('\\x1b[2Jrn\\u202e')
    }
  })
})
