#!/usr/bin/env node
// The benchmark's peer: a LangGraph.js StateGraph of the shape of pipe's default pipeline
// (pipelines/default.yaml), checkpointed to SQLite after every step with durability "sync".
//   node bench/peer/graph.mjs --input REQ.txt --answers ANSWERS.yaml --decision go --out DIR
//   node bench/peer/graph.mjs --chain N --out DIR          a chain of N cheap nodes (per-step cost)
// Exits 0 when the graph finished (the spec was published, or the chain counted to N), non-zero on
// any failure. DIR gets checkpoints.sqlite (a fresh file: an existing one is an error) and, for the
// pipeline, published/<feature>/<version>.json.
//
// Each node does cheap, deterministic work of the same kind as pipe's offline step (read the
// requirement, build or change a spec object, seal each spec version with sha256 over canonical
// JSON, check the default gates, write the published spec). It does NOT do pipe's schema validation,
// evidence records, timeline, ledger, audit chain or policy checks: it measures LangGraph's engine
// and checkpointer with a comparable amount of application work, not an equivalent product.
import {createHash} from 'node:crypto'
import {closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeSync} from 'node:fs'
import path from 'node:path'
import {parseArgs} from 'node:util'
import {Annotation, END, START, StateGraph} from '@langchain/langgraph'
import {SqliteSaver} from '@langchain/langgraph-checkpoint-sqlite'
import Database from 'better-sqlite3'
import YAML from 'yaml'

const {values: opts} = parseArgs({
  options: {
    input: {type: 'string'},
    answers: {type: 'string'},
    decision: {type: 'string', default: 'go'},
    out: {type: 'string'},
    chain: {type: 'string'},
  },
})

// pipe's default gates and completeness weights (pipelines/default.yaml), as plain data.
const GATES = [
  {id: 'goal', check: (s) => typeof s.goal === 'string' && s.goal.length >= 10},
  {id: 'features', check: (s) => s.features.length >= 1},
  {id: 'acceptance_criteria', check: (s) => s.acceptance_criteria.length >= 1},
  {id: 'non_functional', check: (s) => s.non_functional.length >= 1},
  {id: 'constraints', check: (s) => s.constraints.length >= 1},
  {id: 'priority', check: (s) => s.features.every((f) => f.priority)},
]
const WEIGHTS = {goal: 2, features: 3, acceptance_criteria: 3, non_functional: 1, constraints: 1}
const THRESHOLD = 0.8
const MAX_ROUNDS = 3

function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value && typeof value === 'object') return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`
  return JSON.stringify(value)
}
const sha256 = (text) => createHash('sha256').update(text).digest('hex')

/** A new immutable spec version: the spec sealed with the sha256 of its canonical JSON. */
function seal(state, spec, by) {
  const n = state.versions.length + 1
  const body = {id: `S-${String(n).padStart(4, '0')}`, feature: 'F-0001', parent: state.versions.at(-1)?.id ?? null, by, spec}
  return {...body, sha256: sha256(canonical(body))}
}

const replace = (_, next) => next
const State = Annotation.Root({
  input: Annotation({reducer: replace, default: () => null}),
  answers_file: Annotation({reducer: replace, default: () => null}),
  decision: Annotation({reducer: replace, default: () => null}),
  out: Annotation({reducer: replace, default: () => null}),
  requirement: Annotation({reducer: replace, default: () => null}),
  spec: Annotation({reducer: replace, default: () => null}),
  versions: Annotation({reducer: (a, b) => [...a, ...b], default: () => []}),
  gate: Annotation({reducer: replace, default: () => null}),
  round: Annotation({reducer: replace, default: () => 0}),
  questions: Annotation({reducer: replace, default: () => []}),
  answers: Annotation({reducer: replace, default: () => ({})}),
  review: Annotation({reducer: replace, default: () => null}),
  published: Annotation({reducer: replace, default: () => null}),
})

function ingest(state) {
  const text = readFileSync(state.input, 'utf8')
  return {requirement: {source: path.resolve(state.input), text, bytes: Buffer.byteLength(text), lines: text.split('\n').filter(Boolean).length, sha256: sha256(text)}}
}

/** Markdown sections of a PRD (## Goal, ## Features …) or one sentence, plus any applied answers. */
function compile(state) {
  const {text} = state.requirement
  const sections = {}
  let current = null
  for (const line of text.split('\n')) {
    const heading = /^##\s+(.*)$/.exec(line)
    if (heading) current = heading[1].toLowerCase()
    else if (current && line.trim()) (sections[current] ??= []).push(line.replace(/^[-*]\s+/, '').trim())
  }
  const listOf = (field, heading) => [...(sections[heading] ?? []), ...(state.answers[field] ?? [])]
  const sentence = text.split('\n').find((l) => l.trim() && !l.startsWith('#'))?.trim() ?? ''
  const featureLines = sections.features ?? [sentence]
  const spec = {
    title: /^#\s+(.*)$/m.exec(text)?.[1] ?? sentence.slice(0, 60),
    goal: (sections.goal ?? [sentence]).join(' '),
    features: featureLines.map((line, i) => {
      const tagged = /^\[(P\d)\]\s*(.*)$/.exec(line)
      return {id: `FR-${i + 1}`, title: tagged ? tagged[2] : line, priority: tagged ? tagged[1] : 'P0'}
    }),
    acceptance_criteria: listOf('acceptance_criteria', 'acceptance criteria').map((t, i) => ({id: `AC-${i + 1}`, text: t})),
    non_functional: listOf('non_functional', 'non-functional requirements').map((t, i) => ({id: `NFR-${i + 1}`, text: t})),
    constraints: listOf('constraints', 'constraints').map((t, i) => ({id: `C-${i + 1}`, text: t})),
  }
  return {spec, versions: [seal(state, spec, 'compile')]}
}

function validateGates(state) {
  const failures = GATES.filter((g) => !g.check(state.spec)).map((g) => g.id)
  const total = Object.values(WEIGHTS).reduce((a, b) => a + b, 0)
  const have = Object.entries(WEIGHTS).reduce((sum, [field, w]) => sum + (Array.isArray(state.spec[field]) ? (state.spec[field].length ? w : 0) : state.spec[field] ? w : 0), 0)
  const completeness = have / total
  return {gate: {pass: failures.length === 0 && completeness >= THRESHOLD, failures, completeness}}
}

function afterGates(state) {
  if (state.gate.pass) return 'plan_tasks'
  if (state.round >= MAX_ROUNDS) throw new Error(`gates still fail after ${MAX_ROUNDS} clarify rounds: ${state.gate.failures.join(', ')}`)
  return 'clarify_questions'
}

function clarifyQuestions(state) {
  const fields = state.gate.failures.filter((f) => f in WEIGHTS)
  return {round: state.round + 1, questions: fields.map((field, i) => ({id: `Q-${state.round + 1}-${i + 1}`, field, text: `What are the ${field.replace('_', ' ')}?`}))}
}

function applyAnswers(state) {
  if (!state.answers_file) throw new Error(`the gates ask about ${state.questions.map((q) => q.field).join(', ')} and no --answers file was given`)
  const given = YAML.parse(readFileSync(state.answers_file, 'utf8')).answers ?? {}
  const answers = {...state.answers}
  for (const q of state.questions) {
    const text = given[q.id] ?? given[q.field]
    if (typeof text !== 'string') throw new Error(`no answer for ${q.id} (${q.field})`)
    answers[q.field] = text.split('\n').map((l) => l.trim()).filter(Boolean)
  }
  const spec = {...state.spec}
  for (const [field, lines] of Object.entries(answers)) spec[field] = lines.map((t, i) => ({id: `${field}-${i + 1}`, text: t}))
  return {answers, spec, versions: [seal(state, spec, 'apply_answers')]}
}

function planTasks(state) {
  const tasks = state.spec.features.map((f, i) => ({id: `T-${i + 1}`, feature: f.id, title: `Implement ${f.title}`, covers: state.spec.acceptance_criteria.map((a) => a.id)}))
  const spec = {...state.spec, tasks}
  return {spec, versions: [seal(state, spec, 'plan_tasks')]}
}

function generateVv(state) {
  const verification = [...state.spec.acceptance_criteria, ...state.spec.non_functional].map((item, i) => ({id: `V-${i + 1}`, checks: item.id, method: 'test'}))
  const spec = {...state.spec, vv: {verification, validation: [{id: 'VAL-1', text: `A user confirms: ${state.spec.goal}`}]}}
  return {spec, versions: [seal(state, spec, 'generate_vv')]}
}

function manualReview(state) {
  // The decision is given up front, like `pipe run --decision go`.
  return {review: {decision: state.decision, version: state.versions.at(-1).id, sha256: state.versions.at(-1).sha256}}
}

const afterReview = (state) => (state.review.decision === 'go' ? 'publish' : END)

function publish(state) {
  const version = state.versions.at(-1)
  const dir = path.join(state.out, 'published', version.feature)
  mkdirSync(dir, {recursive: true})
  const file = path.join(dir, `${version.id}.json`)
  // Durable like the checkpoints: written and fsynced before the step counts as done.
  const fd = openSync(file, 'wx')
  try {
    writeSync(fd, `${JSON.stringify(version, null, 2)}\n`)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  return {published: file}
}

function pipelineGraph() {
  return new StateGraph(State)
    .addNode('ingest', ingest)
    .addNode('compile', compile)
    .addNode('validate_gates', validateGates)
    .addNode('clarify_questions', clarifyQuestions)
    .addNode('apply_answers', applyAnswers)
    .addNode('plan_tasks', planTasks)
    .addNode('generate_vv', generateVv)
    .addNode('manual_review', manualReview)
    .addNode('publish', publish)
    .addEdge(START, 'ingest')
    .addEdge('ingest', 'compile')
    .addEdge('compile', 'validate_gates')
    .addConditionalEdges('validate_gates', afterGates, ['clarify_questions', 'plan_tasks'])
    .addEdge('clarify_questions', 'apply_answers')
    .addEdge('apply_answers', 'compile')
    .addEdge('plan_tasks', 'generate_vv')
    .addEdge('generate_vv', 'manual_review')
    .addConditionalEdges('manual_review', afterReview, ['publish', END])
    .addEdge('publish', END)
}

const ChainState = Annotation.Root({count: Annotation({reducer: replace, default: () => 0})})

/** N nodes in a line, each a cheap step (increments a counter), like pipe's chain of `noop` steps. */
function chainGraph(n) {
  const graph = new StateGraph(ChainState)
  for (let i = 0; i < n; i++) graph.addNode(`s${i}`, (s) => ({count: s.count + 1}))
  graph.addEdge(START, 's0')
  for (let i = 0; i + 1 < n; i++) graph.addEdge(`s${i}`, `s${i + 1}`)
  graph.addEdge(`s${n - 1}`, END)
  return graph
}

async function main() {
  if (!opts.out) throw new Error('--out DIR is required')
  const chain = opts.chain === undefined ? undefined : Number(opts.chain)
  if (chain !== undefined && !(Number.isInteger(chain) && chain >= 1)) throw new Error('--chain N needs a whole number ≥ 1')
  if (chain === undefined && !opts.input) throw new Error('--input FILE is required (or --chain N)')
  const out = path.resolve(opts.out)
  mkdirSync(out, {recursive: true})
  const dbFile = path.join(out, 'checkpoints.sqlite')
  if (existsSync(dbFile)) throw new Error(`${dbFile} exists: each run needs a fresh checkpoint file`)
  const db = new Database(dbFile)
  // SQLite's own default, set explicitly: with the WAL journal the saver switches on, FULL syncs the
  // WAL at every commit, so each checkpoint is on disk before the next step starts.
  db.pragma('synchronous = FULL')
  const checkpointer = new SqliteSaver(db)
  try {
    const graph = (chain === undefined ? pipelineGraph() : chainGraph(chain)).compile({checkpointer})
    const input = chain === undefined ? {input: path.resolve(opts.input), answers_file: opts.answers ? path.resolve(opts.answers) : null, decision: opts.decision, out} : {count: 0}
    // A step per superstep: the pipeline takes 11 (one clarify round), a chain N; leave headroom.
    const recursionLimit = (chain ?? 30) + 10
    const final = await graph.invoke(input, {configurable: {thread_id: 'bench'}, durability: 'sync', recursionLimit})
    if (chain === undefined ? !final.published : final.count !== chain) throw new Error(`the graph ended without finishing: ${JSON.stringify(chain === undefined ? {review: final.review, gate: final.gate} : {count: final.count})}`)
    const checkpoints = db.prepare('SELECT count(*) AS n FROM checkpoints').get().n
    const settings = {journal_mode: db.pragma('journal_mode', {simple: true}), synchronous: db.pragma('synchronous', {simple: true})}
    console.log(JSON.stringify(chain === undefined ? {status: 'published', published: final.published, versions: final.versions.length, rounds: final.round, checkpoints, ...settings} : {status: 'done', count: final.count, checkpoints, ...settings}))
  } finally {
    db.close()
  }
}

try {
  await main()
} catch (error) {
  console.error(`peer: ${error instanceof Error ? error.stack : String(error)}`)
  process.exitCode = 1
}
