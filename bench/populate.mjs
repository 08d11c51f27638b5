#!/usr/bin/env node
// Fills a store with real runs of the default pipeline, through the engine, in one process:
//   node bench/populate.mjs --store DIR --runs N
//   node bench/populate.mjs --store DIR --runs N --pipeline FILE   runs of FILE on `--text x` instead
// Each run is what `pipe run pipelines/default.yaml --input … --decision go` does (own feature,
// snapshots, spec versions, evidence, timeline, ledger entry). Every fourth run takes the clarify
// loop (a one-sentence requirement with its answers). fsync is off in this process only, to fill
// 10,000 runs in minutes; the records are the same bytes, and the store passes `pipe audit verify`.
// PIPE_BENCH_DIST=DIR loads the engine from a copy of dist/, so a long populate survives a rebuild.
import {mkdirSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const {values} = parseArgs({
  options: {store: {type: 'string'}, runs: {type: 'string', default: '10'}, sync: {type: 'boolean', default: false}, pipeline: {type: 'string'}},
})
if (!values.store) throw new Error('--store DIR is required')
const count = Number(values.runs)
const store = path.resolve(values.store)
const cwd = path.dirname(store)
mkdirSync(cwd, {recursive: true})

const dist = process.env.PIPE_BENCH_DIST ?? path.join(root, 'dist')
const {durability} = await import(path.join(dist, 'util/fs.js'))
const {startSession} = await import(path.join(dist, 'app/sessions/start.js'))
durability.sync = values.sync
delete process.env.OPENAI_API_KEY
delete process.env.OPENAI_BASE_URL

const pipeline = values.pipeline ? path.resolve(values.pipeline) : path.join(root, 'pipelines/default.yaml')
const shapes = values.pipeline
  ? [{text: 'x'}]
  : [
      {input: path.join(root, 'examples/full-prd.md')},
      {input: path.join(root, 'examples/full-prd.md')},
      {input: path.join(root, 'examples/full-prd.md')},
      {input: path.join(root, 'examples/one-sentence.txt'), answers: path.join(root, 'examples/one-sentence.answers.yaml')},
    ]
const started = Date.now()
let sample
for (let i = 0; i < count; i++) {
  const outcome = await startSession({cwd, store, pipeline, decision: 'go', provider: 'offline', env: {}, ...shapes[i % shapes.length]})
  if (outcome.status !== 'succeeded') throw new Error(`run ${i} ended ${outcome.run.status}`)
  if (i === Math.floor(count / 2)) sample = {run: outcome.run_id, feature: outcome.feature_id, spec: outcome.spec_version}
  if ((i + 1) % 500 === 0) process.stderr.write(`  ${i + 1}/${count} runs, ${((Date.now() - started) / 1000).toFixed(0)} s\n`)
}
console.log(JSON.stringify({runs: count, seconds: (Date.now() - started) / 1000, sample}))
