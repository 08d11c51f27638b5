/**
 * Agent tools a pipeline declares (top-level `tools:`): pipe validate's checks at file:line:col,
 * and calls on the built CLI against a scripted chat-completions server on 127.0.0.1, in real git
 * repositories in temp dirs, through the real sandbox and policy (examples/symbol-lookup).
 *
 * The first of each command the file uses (validate, run, snapshot show, confirm) is a `pipe`
 * process; the others run in this process (test/helpers/pipe-here.ts: the same command from argv,
 * its output and exit code, asking the same model server).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {cp, mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {examples, json, pipe, tempDir, type CliOptions, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {ModelServer, type ModelRequest} from '../helpers/model-server.js'

interface RunJson {
  run_id: string
  status: string
  pending?: {kind: string; action?: {tool: string; argv?: string[][]; call_id: string; level: string}}
}
interface Diagnostic {
  file: string
  line: number
  col: number
  path: string
  message: string
  rule: string
  severity?: string
}
interface ValidateJson {
  files: Array<{file: string; valid: boolean; diagnostics: Diagnostic[]; warnings: Diagnostic[]}>
}

const EXAMPLE = path.join(examples, 'symbol-lookup', 'pipeline.yaml')
const EXAMPLE_POLICY = path.join(examples, 'symbol-lookup', 'policy.yaml')
const MEDIAN = 'export function median(values) {\n  const sorted = [...values].sort((a, b) => a - b)\n  return sorted[Math.floor(sorted.length / 2)]\n}\n'
const STATS = "import {median} from './median.js'\n\nexport const middle = (xs) => median(xs)\n"

let dir: string
let cleanup: (() => Promise<void>) | undefined
let server: ModelServer | undefined

afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup?.()
  cleanup = undefined
})

const git = (cwd: string, ...args: string[]): string => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], {cwd, encoding: 'utf8'})

/** A git repository with files, committed (git grep searches what is tracked). */
async function repoWith(name: string, files: Record<string, string>): Promise<string> {
  const repo = path.join(dir, name)
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(repo, file)), {recursive: true})
    await writeFile(path.join(repo, file), text)
  }
  git(repo, 'init', '-q')
  git(repo, 'add', '-A')
  git(repo, 'commit', '-qm', 'start')
  return repo
}

const env = (): Record<string, string> => ({OPENAI_BASE_URL: server!.url, PIPE_HOME: path.join(dir, 'home')})

/** The tool-result messages a request carried, by call id. */
function toolResults(request: ModelRequest): Record<string, string> {
  return Object.fromEntries(request.body.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id!, m.content]))
}

/** `pipe snapshot show RUN --json`, in this process unless `by` is pipe. */
async function snapshots(repo: string, runId: string, by: (args: string[], options: CliOptions) => Promise<CliResult> = pipeHere): Promise<Snapshot[]> {
  return json<Snapshot[]>(await by(['snapshot', 'show', runId, '--json'], {cwd: repo, env: env()}))
}

/** A repository with args.js (prints its arguments as JSON, leaves a mark per run) and a pipeline of three tools over it. */
async function probe(policyExtra = ''): Promise<{repo: string; p: string}> {
  ;({dir, cleanup} = await tempDir('pipe-tools-'))
  const repo = await repoWith('repo', {
    'package.json': '{"type": "module"}\n',
    // Prints the arguments it was given as JSON, and leaves a mark for each call that ran.
    'args.js': "import {appendFileSync} from 'node:fs'\nappendFileSync('ran.txt', 'x')\nconsole.log(JSON.stringify(process.argv.slice(2)))\n",
    'notes.txt': 'notes\n',
  })
  await mkdir(path.join(dir, 'outside'))
  await writeFile(path.join(dir, 'outside', 'secret.txt'), 'outside secret\n')
  const p = path.join(dir, 'p')
  await mkdir(p)
  await writeFile(path.join(p, 'task.md'), 'Probe the tools.\n')
  await writeFile(
    path.join(p, 'policy.yaml'),
    `version: 1
allowed_commands:
  - [node, args.js, "{arg}"]
  - [node, args.js, --, "{path}"]
  - [node, args.js, done]
sandbox: auto
${policyExtra}`,
  )
  await writeFile(
    path.join(p, 'probe.yaml'),
    `version: 1
name: probe
tools:
  echo_text:
    description: echoes one text
    parameters: {type: object, additionalProperties: false, required: [text], properties: {text: {type: string, maxLength: 200000}}}
    argv: [node, args.js, "\${{ args.text }}"]
    level: moderate
  show_file:
    description: names a file of the repository
    parameters: {type: object, additionalProperties: false, required: [path], properties: {path: {type: string, pattern: "^[^-]"}}}
    argv: [node, args.js, --, "\${{ args.path }}"]
    level: moderate
  finish:
    description: a dangerous step a person confirms
    parameters: {type: object, additionalProperties: false, properties: {}}
    argv: [node, args.js, done]
    level: dangerous
steps:
  - id: probe
    kind: agent
    prompt: task.md
    tools: [echo_text, show_file, finish]
    on: {denied: stop, gave_up: stop}
  - id: stop
    kind: end
    status: succeeded
`,
  )
  return {repo, p}
}

describe('agent tools a pipeline declares (tools:)', function () {
  this.timeout(180000)

  it('pipe validate reports a clashing name, a bad schema, an unknown argument, a non-args read and a denied command at file:line:col', async () => {
    ;({dir, cleanup} = await tempDir('pipe-tools-'))
    await writeFile(path.join(dir, 'task.md'), 'Look up {{symbol}}.\n')
    await writeFile(path.join(dir, 'policy.yaml'), 'version: 1\nallowed_commands:\n  - [git, grep, -n, -e, "{arg}"]\n')
    await writeFile(
      path.join(dir, 'bad.yaml'),
      `version: 1
name: bad
tools:
  read_file:
    description: clashes with the built-in read_file
    parameters: {type: object}
    argv: [cat, notes.txt]
  lookup:
    description: finds a symbol
    parameters: {type: object, properties: {symbol: {type: string, maxLenght: 9}}}
    argv: [git, grep, -n, -e, "\${{ args.symbol }}"]
  typo:
    description: names an argument the schema does not have
    parameters: {type: object, required: [symbol], properties: {symbol: {type: string}}}
    argv: [git, grep, -n, -e, "\${{ args.symbl }}", "\${{ run.id }}"]
steps:
  - id: look
    kind: agent
    prompt: task.md
    vars: {symbol: median}
    tools: [lookup, typo, lokup]
`,
    )
    await writeFile(
      path.join(dir, 'denied.yaml'),
      `version: 1
name: denied
tools:
  shell:
    description: a shell line, which no policy here allows
    parameters: {type: object, required: [line], properties: {line: {type: string}}}
    argv: [sh, -c, "\${{ args.line }}"]
steps:
  - id: look
    kind: agent
    prompt: task.md
    vars: {symbol: median}
    tools: [shell]
`,
    )
    const result = await pipe(['validate', 'bad.yaml', 'denied.yaml', '--policy', 'policy.yaml', '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(2)
    const body = json<ValidateJson>(result)
    const shown = (file: string): string[] =>
      body.files.find((f) => f.file === file)!.diagnostics.map((d) => `${d.line}:${d.col} ${d.path} ${d.message.split(';')[0]!.split(':')[0]}`)
    expect(shown('bad.yaml')).to.deep.equal([
      '4:3 tools.read_file tool "read_file" has the name of a built-in tool',
      '10:17 tools.lookup.parameters the parameters of tool "lookup" is not a valid JSON Schema',
      '15:41 tools.typo.argv[4] args has no field "symbl" (it has symbol) — did you mean "symbol"?',
      '15:53 tools.typo.argv[5] run.id',
      '21:27 steps[0].tools[2] unknown tool "lokup" — did you mean "lookup"? (tools',
    ])
    const bad = body.files.find((f) => f.file === 'bad.yaml')!.diagnostics
    expect(bad[1]!.message).to.contain('maxLenght')
    expect(bad[3]!.message).to.contain("a tool's argv reads only args")
    const denied = body.files.find((f) => f.file === 'denied.yaml')!.diagnostics
    expect(denied.map((d) => [d.line, d.col, d.path, d.rule])).to.deep.equal([[7, 11, 'tools.shell.argv', 'policy-denied']])
    expect(denied[0]!.message).to.contain('["sh","-c","${{ args.line }}"]').and.contain('every call of tool "shell" would be denied')
    // The shipped example passes against its own policy.
    const ok = await pipeHere(['validate', EXAMPLE, '--policy', EXAMPLE_POLICY, '--json'], {cwd: dir})
    expect(ok.code, ok.stdout + ok.stderr).to.equal(0)
  })

  it('the agent calls the shipped symbol_lookup, gets real git grep output, and the run replays from its cassette in another folder', async () => {
    ;({dir, cleanup} = await tempDir('pipe-tools-'))
    const repo = await repoWith('repo', {'src/median.js': MEDIAN, 'src/stats.js': STATS, 'README.md': 'Statistics helpers.\n'})
    server = await ModelServer.start()
    server.script(
      'explain',
      {tool_calls: [{id: 'look', name: 'symbol_lookup', arguments: {symbol: 'median'}}]},
      {tool_calls: [{id: 'narrow', name: 'symbol_lookup', arguments: {symbol: 'median', path: 'src/stats.js'}}]},
      {content: 'median is defined in src/median.js:1 and used by middle() in src/stats.js:3.'},
    )
    const cassette = path.join(dir, 'explain.cassette.json')
    const args = ['run', EXAMPLE, '--policy', EXAMPLE_POLICY, '-i', 'symbol=median', '--json']
    const result = await pipe([...args, '--record', cassette], {cwd: repo, env: env(), timeoutMs: 120000})
    expect(result.code, result.stderr + result.stdout).to.equal(0)
    // Offered with its JSON Schema, as the pipeline declares it.
    const offered = server.requests[0]!.body.tools!.find((t) => t.function.name === 'symbol_lookup')
    const declared = {
      type: 'object',
      additionalProperties: false,
      required: ['symbol'],
      properties: {
        symbol: {type: 'string', pattern: '^[A-Za-z_$][A-Za-z0-9_$]*$', maxLength: 200, description: 'the identifier'},
        path: {
          type: 'string',
          pattern: '^[A-Za-z0-9_.][A-Za-z0-9_./-]*$',
          maxLength: 500,
          description: 'a folder or file to search in (default: the whole repository)',
        },
      },
    }
    expect(offered?.function.parameters).to.deep.equal(declared)
    // What git grep printed, relative to the repository.
    const first = JSON.parse(toolResults(server.requests[1]!)['look']!) as {argv: string[]; exit_code: number; stdout: string}
    expect(first.argv).to.deep.equal(['git', 'grep', '-n', '-w', '-I', '-e', 'median', '--', '.'])
    expect(first.exit_code).to.equal(0)
    expect(first.stdout.split('\n').filter(Boolean)).to.deep.equal([
      'src/median.js:1:export function median(values) {',
      "src/stats.js:1:import {median} from './median.js'",
      'src/stats.js:3:export const middle = (xs) => median(xs)',
    ])
    const second = JSON.parse(toolResults(server.requests[2]!)['narrow']!) as {argv: string[]; stdout: string}
    expect(second.argv.at(-1)).to.equal('src/stats.js')
    expect(second.stdout).not.to.contain('src/median.js')
    const runId = json<RunJson>(result).run_id
    const [snap] = await snapshots(repo, runId, pipe)
    expect(snap!.tool_calls!.map((c) => [c.call_id, c.name, c.level, c.decision, c.ok, c.summary])).to.deep.equal([
      ['look', 'symbol_lookup', 'safe', 'auto', true, 'git grep -n -w -I -e median -- . exited 0'],
      ['narrow', 'symbol_lookup', 'safe', 'auto', true, 'git grep -n -w -I -e median -- src/stats.js exited 0'],
    ])
    expect((snap!.inputs as Record<string, unknown>)['declared_tools']).to.deep.equal({
      symbol_lookup: {argv: ['git', 'grep', '-n', '-w', '-I', '-e', '${{ args.symbol }}', '--', "${{ has(args.path) ? args.path : '.' }}"], level: 'safe'},
    })
    const value = (snap!.outputs as Record<string, unknown>)['value']

    // The same run from the cassette, in a copy of the repository elsewhere, with the model server gone.
    const copy = path.join(dir, 'elsewhere', 'checkout')
    await cp(repo, copy, {recursive: true})
    const asked = server.requests.length
    await server.close()
    const replayed = await pipeHere([...args, '--replay', cassette], {cwd: copy, env: env()})
    server = undefined
    expect(replayed.code, replayed.stderr + replayed.stdout).to.equal(0)
    expect(asked).to.equal(3)
    const [again] = json<Snapshot[]>(
      await pipeHere(['snapshot', 'show', json<RunJson>(replayed).run_id, '--json'], {cwd: copy, env: {PIPE_HOME: path.join(dir, 'home')}}),
    )
    expect((again!.outputs as Record<string, unknown>)['value']).to.equal(value)
    expect(again!.tool_calls!.map((c) => [c.name, c.ok])).to.deep.equal([
      ['symbol_lookup', true],
      ['symbol_lookup', true],
    ])
    expect(await readFile(cassette, 'utf8')).not.to.contain(dir)
  })

  it('hostile arguments stay one argv element each; schema failures, leading dashes, huge strings and denied paths run nothing; a dangerous tool waits for a person', async () => {
    const {repo, p} = await probe()
    server = await ModelServer.start()
    const hostile = ['; rm -rf / #', '$(touch pwned) `id` && echo x > y', 'a b\tc\nd', '\'"\\']
    server.script(
      'probe',
      {
        tool_calls: [
          ...hostile.map((text, i) => ({id: `h${i}`, name: 'echo_text', arguments: {text}})),
          {id: 'dash', name: 'echo_text', arguments: {text: '--output=/etc/x'}},
          {id: 'huge', name: 'echo_text', arguments: {text: 'x'.repeat(70000)}},
          {id: 'extra', name: 'echo_text', arguments: {text: 'a', then: 'b'}},
          {id: 'type', name: 'echo_text', arguments: {text: 7}},
          {id: 'pat', name: 'show_file', arguments: {path: '--help'}},
          {id: 'up', name: 'show_file', arguments: {path: '../outside/secret.txt'}},
          {id: 'abs', name: 'show_file', arguments: {path: path.join(dir, 'outside', 'secret.txt')}},
          {id: 'in', name: 'show_file', arguments: {path: 'notes.txt'}},
        ],
      },
      {tool_calls: [{id: 'fin', name: 'finish', arguments: {}}]},
      {content: 'probed'},
    )
    const paused = await pipeHere(['run', path.join(p, 'probe.yaml'), '--policy', path.join(p, 'policy.yaml'), '--json'], {cwd: repo, env: env()})
    expect(paused.code, paused.stderr + paused.stdout).to.equal(10)
    const results = toolResults(server.requests[1]!)
    // Each hostile text reached the program as exactly one argument, unchanged: no shell saw it.
    hostile.forEach((text, i) => {
      const answer = JSON.parse(results[`h${i}`]!) as {stdout: string; exit_code: number}
      expect(answer.exit_code, text).to.equal(0)
      expect(JSON.parse(answer.stdout), text).to.deep.equal([text])
    })
    expect(existsSync(path.join(repo, 'pwned'))).to.equal(false)
    expect(results['dash']).to.contain('starts with \\"-\\"').and.contain('nothing was run')
    expect(results['huge']).to.contain('more than 65536 bytes').and.contain('nothing was run')
    for (const id of ['extra', 'type', 'pat']) expect(results[id], id).to.contain('invalid arguments').and.contain('nothing was run')
    for (const id of ['up', 'abs']) expect(results[id], id).to.contain('is not allowed').and.contain('nothing was run')
    expect(JSON.stringify(results)).not.to.contain('outside secret')
    expect((JSON.parse(results['in']!) as {stdout: string}).stdout).to.equal('["--","notes.txt"]\n')
    // Four hostile texts and notes.txt ran; nothing else did.
    expect(await readFile(path.join(repo, 'ran.txt'), 'utf8')).to.equal('xxxxx')

    // The dangerous tool paused the run before anything ran, showing the argv it would run.
    const body = json<RunJson>(paused)
    expect(body.pending?.action).to.deep.include({tool: 'finish', call_id: 'fin', level: 'dangerous', argv: [['node', 'args.js', 'done']]})
    const refused = await pipe(['confirm', body.run_id, '--no', '--note', 'not now', '--json'], {cwd: repo, env: env(), timeoutMs: 120000})
    expect(refused.code, refused.stderr + refused.stdout).to.equal(0)
    expect(toolResults(server.requests[2]!)['fin']).to.contain('refused').and.contain('not now')
    expect(await readFile(path.join(repo, 'ran.txt'), 'utf8')).to.equal('xxxxx')

    const [snap] = await snapshots(repo, body.run_id)
    expect(snap!.decisions.at(-1)!.decision).to.equal('done')
    const decisions = Object.fromEntries(snap!.tool_calls!.map((c) => [c.call_id, [c.decision, c.ok]]))
    expect(decisions).to.deep.equal({
      h0: ['auto', true],
      h1: ['auto', true],
      h2: ['auto', true],
      h3: ['auto', true],
      dash: ['auto', false],
      huge: ['auto', false],
      extra: ['invalid', false],
      type: ['invalid', false],
      pat: ['invalid', false],
      up: ['denied', false],
      abs: ['denied', false],
      in: ['auto', true],
      fin: ['refused', false],
    })
  })
  it("a policy makes a pipeline's tool stricter: a moderate tool the policy calls dangerous waits for pipe confirm, which runs the argv it showed", async () => {
    const {repo, p} = await probe('tools: {echo_text: dangerous}\n')
    server = await ModelServer.start()
    server.script('probe', {tool_calls: [{id: 'e1', name: 'echo_text', arguments: {text: 'hi there'}}]}, {content: 'echoed'})
    const paused = await pipeHere(['run', path.join(p, 'probe.yaml'), '--policy', path.join(p, 'policy.yaml'), '--json'], {cwd: repo, env: env()})
    expect(paused.code, paused.stderr + paused.stdout).to.equal(10)
    const body = json<RunJson>(paused)
    expect(body.pending?.action).to.deep.include({tool: 'echo_text', call_id: 'e1', level: 'dangerous', argv: [['node', 'args.js', 'hi there']]})
    expect(existsSync(path.join(repo, 'ran.txt'))).to.equal(false)
    const confirmed = await pipeHere(['confirm', body.run_id, '--yes', '--json'], {cwd: repo, env: env()})
    expect(confirmed.code, confirmed.stderr + confirmed.stdout).to.equal(0)
    expect(JSON.parse((JSON.parse(toolResults(server.requests[1]!)['e1']!) as {stdout: string}).stdout)).to.deep.equal(['hi there'])
    const [snap] = await snapshots(repo, body.run_id)
    expect(snap!.tool_calls!.map((c) => [c.name, c.level, c.decision, c.ok])).to.deep.equal([['echo_text', 'dangerous', 'confirmed', true]])
  })
})
