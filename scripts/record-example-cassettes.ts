/**
 * Records the cassettes the shipped pipeline tests replay. The replies come from a scripted
 * OpenAI-compatible server on 127.0.0.1 (test/helpers/model-server.ts), not from a real model, and
 * every cassette's header says so. Run after `npm run build`:
 *
 *   npx tsx scripts/record-example-cassettes.ts          # fill what the cassettes lack
 *   npx tsx scripts/record-example-cassettes.ts --fresh  # delete them first and record them whole
 *
 * It runs `pipe test --record` over the shipped test files with OPENAI_BASE_URL pointing at the
 * server, so a cassette holds exactly the requests its tests make.
 */
import {spawn} from 'node:child_process'
import {cpSync, existsSync, mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {cannedReply, ModelServer, type ModelRequest, type Scripted} from '../test/helpers/model-server.js'
import {isMedianRequest, medianReply} from '../test/helpers/coding-agent-server.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const NOTE =
  "recorded by scripts/record-example-cassettes.ts --fresh (pipe test --record, under pipe test's own clock) against a scripted OpenAI-compatible server on 127.0.0.1, not a real model"

const cassettes = [
  'examples/release-notes/cassettes/release-notes.jsonl',
  'examples/triage/cassettes/triage.jsonl',
  'pipelines/cassettes/default-openai.jsonl',
  'examples/coding-agent/cassettes/coding-agent.jsonl',
]
const testFiles = [
  'examples/release-notes/release-notes.pipe-test.yaml',
  'examples/triage/triage.pipe-test.yaml',
  'pipelines/default-openai.pipe-test.yaml',
  'examples/coding-agent/coding-agent.pipe-test.yaml',
]

/** Release notes drawn from the commit lines the prompt quotes, as a model might. */
function draft(prompt: string): unknown {
  // The step's vars put the lines in as a JSON list: ["3f2a9c1 Add CSV export", ...].
  const commits = prompt.split('Commits (newest first):\n')[1] ?? ''
  const lines = [...commits.matchAll(/"([0-9a-f]{4,40}) ([^"]*)"/g)]
  const items = lines
    .filter((m) => !/^(ci|chore):/.test(m[2]!))
    .map((m) => {
      const subject = m[2]!
      const kind = /^fix/i.test(subject) ? 'fix' : /^remove/i.test(subject) ? 'removal' : 'feature'
      const title = kind === 'fix' ? 'Three-way splits now round correctly' : 'Export your expenses as a CSV file'
      return {title, kind, commits: [m[1]!]}
    })
    .reverse()
  return {summary: items.length === 0 ? 'Nothing to announce.' : `${items.length} change(s).`, items}
}

/** The agent template's explain step: look the name up, read its definition, answer. */
function explain(request: ModelRequest): Scripted {
  const results = request.body.messages.filter((m) => m.role === 'tool').length
  if (results === 0) return {tool_calls: [{name: 'find_symbol', arguments: {symbol: 'apply_discount'}}], usage: {prompt_tokens: 380, completion_tokens: 20}}
  if (results === 1) return {tool_calls: [{name: 'read_file', arguments: {path: 'shop/prices.py'}}], usage: {prompt_tokens: 470, completion_tokens: 20}}
  return {
    content:
      'apply_discount is defined in shop/prices.py (line 1): it takes a price and a percent between 0 and 100 and returns the price with that percent taken off, rounded to cents (a percent outside 0-100 is a ValueError). shop/cart.py imports it (line 1) and total() applies it to every item (line 6).',
    usage: {prompt_tokens: 610, completion_tokens: 70},
  }
}

/** The coding template's implement step: read calc.js, fix add() with one block, say so. */
function implement(request: ModelRequest): Scripted {
  const results = request.body.messages.filter((m) => m.role === 'tool').length
  if (results === 0) return {tool_calls: [{name: 'read_file', arguments: {path: 'calc.js'}}], usage: {prompt_tokens: 520, completion_tokens: 20}}
  if (results === 1) {
    const blocks =
      'calc.js\n<<<<<<< SEARCH\nexport function add(a, b) {\n  return a - b\n}\n=======\nexport function add(a, b) {\n  return a + b\n}\n>>>>>>> REPLACE\n'
    return {tool_calls: [{name: 'apply_edit_blocks', arguments: {blocks}}], usage: {prompt_tokens: 640, completion_tokens: 60}}
  }
  return {
    content: 'add() in calc.js subtracted its arguments; it now returns a + b, which the test add adds expects.',
    usage: {prompt_tokens: 720, completion_tokens: 30},
  }
}

function reply(request: ModelRequest): Scripted {
  // The coding-agent example: its spec steps, architect, planner, agent conversation and summary.
  if (isMedianRequest(request)) return medianReply(request)
  const prompt = request.body.messages.find((m) => m.role === 'user')?.content ?? ''
  if (request.kind === 'draft') return {content: JSON.stringify(draft(prompt)), usage: {prompt_tokens: 310, completion_tokens: 90}}
  if (request.kind === 'classify') {
    return {
      content: JSON.stringify({label: 'bug', summary: 'Logins fail with a 500 since the last deploy.', confidence: 0.9}),
      usage: {prompt_tokens: 160, completion_tokens: 25},
    }
  }
  if (request.kind === 'explain') return explain(request)
  if (request.kind === 'implement' && !isMedianRequest(request)) return implement(request)
  if (request.kind === 'triage') {
    return {
      content: JSON.stringify({severity: 'major', area: 'expenses', rationale: 'Shared expenses are the product; without them a group has nothing to settle.'}),
      usage: {prompt_tokens: 420, completion_tokens: 40},
    }
  }
  return cannedReply(request)
}

const server = await ModelServer.start(reply)
try {
  if (process.argv.includes('--fresh')) for (const file of cassettes) rmSync(path.join(root, file), {force: true})
  const env = {...process.env, OPENAI_BASE_URL: server.url, OPENAI_API_KEY: 'not-a-real-key'}
  // Not spawnSync: the server answers from this process's event loop while the tests run.
  const child = spawn(process.execPath, [path.join(root, 'bin', 'run.js'), 'test', ...testFiles, '--record', '--record-note', NOTE], {
    cwd: root,
    env,
    stdio: 'inherit',
  })
  const code = await new Promise<number>((resolve) => child.on('close', (status) => resolve(status ?? 1)))
  // The templates' cassettes: their files hold placeholders, so each is recorded in a scaffold of it.
  const scaffold = mkdtempSync(path.join(os.tmpdir(), 'pipe-template-'))
  const run = (args: string[], cwd: string): Promise<number> =>
    new Promise((resolve) =>
      spawn(process.execPath, [path.join(root, 'bin', 'run.js'), ...args], {cwd, env, stdio: 'inherit'}).on('close', (status) => resolve(status ?? 1)),
    )
  let recorded = 0
  for (const [name, cassette] of [
    ['model', 'classify.jsonl'],
    ['agent', 'explain.jsonl'],
    ['coding', 'implement.jsonl'],
  ] as const) {
    const template = path.join(root, 'templates', name, 'cassettes', cassette)
    if (process.argv.includes('--fresh')) rmSync(template, {force: true})
    if (recorded === 0) recorded = await run(['init', name, '--template', name], scaffold)
    if (existsSync(template)) cpSync(template, path.join(scaffold, name, 'cassettes', cassette))
    if (recorded === 0) recorded = await run(['test', '--record', '--record-note', NOTE], path.join(scaffold, name))
    if (recorded === 0) cpSync(path.join(scaffold, name, 'cassettes', cassette), template)
  }
  rmSync(scaffold, {recursive: true, force: true})
  console.error(`${server.count()} request(s) reached the scripted server`)
  process.exitCode = code || recorded
} finally {
  await server.close()
}
