// Fills a store with finished runs through the real Store API, then measures one step's writes
// (a snapshot, a spec version and an evidence record) against that history.
import {performance} from 'node:perf_hooks'

function specBody(i) {
  return {goal: `Goal ${i}`, features: [{id: 'FR-001', title: `Feature ${i}`, priority: 'P0'}], constraints: [], non_functional: [], acceptance_criteria: [{id: 'AC-001', text: 'It works'}], open_questions: [], tasks: [], vv: []}
}

function snapshot(runId, seq, specOut, prev) {
  const at = new Date().toISOString()
  return {
    run_id: runId,
    feature_id: 'F-2026-001',
    spec_version_in: null,
    spec_version_out: specOut,
    step: {name: `s${seq}`, kind: 'noop', seq, started_at: at, ended_at: at, duration_ms: 0},
    inputs: {},
    outputs: {},
    decisions: [{decision: 'success', reason: 'bench', next_step: null}],
    evidence_links: [],
    errors: [],
    meta: {engine_version: 'bench', llm_model: null, prev_hash: prev, extensions: {}},
  }
}

async function oneRun(store, i) {
  const now = new Date()
  const at = now.toISOString()
  const run = await store.createRun(
    {feature_id: 'F-2026-001', status: 'succeeded', pipeline: {path: '/bench.yaml', name: 'bench', hash: `sha256:${'0'.repeat(64)}`}, policy_version: `sha256:${'0'.repeat(64)}`, provider: {kind: 'offline', model: null}, input: {kind: 'text', ref: 'text://bench', text: 'x'}, created_at: at, updated_at: at, owner: {pid: 1, host: 'bench', user: 'bench'}, spec_version: null},
    now,
    {at, event: 'created', to: 'succeeded', reason: 'bench'},
  )
  let prev = null
  for (let seq = 1; seq <= 3; seq++) {
    let out = null
    if (seq === 2) out = (await store.writeSpec({...specBody(i), meta: {feature_id: 'F-2026-001', status: 'compiled', parent_version: null, run_id: run.run_id, created_by_step: 's2', created_at: at}}, now)).meta.spec_version
    prev = (await store.writeSnapshot(snapshot(run.run_id, seq, out, prev))).meta.record_hash
  }
  return run.run_id
}

export async function populateRuns(store, count) {
  let sampleRun
  for (let i = 0; i < count; i++) {
    const id = await oneRun(store, i)
    if (i === Math.floor(count / 2)) sampleRun = id
  }
  // One step's writes, timed, on a fresh run in this store.
  const now = new Date()
  const runId = await oneRun(store, -1)
  const times = []
  for (let seq = 4; seq < 54; seq++) {
    const started = performance.now()
    const spec = await store.writeSpec({...specBody(seq), meta: {feature_id: 'F-2026-001', status: 'compiled', parent_version: null, run_id: runId, created_by_step: 'bench', created_at: now.toISOString()}}, now)
    const evidence = await store.writeEvidence({type: 'quote', source: {ref: 'text://bench'}, content: {excerpt: 'x'}, linked_to: [{step: 'bench'}]}, now)
    const snap = snapshot(runId, seq, spec.meta.spec_version, null)
    snap.evidence_links = [{type: 'quote', evidence_id: evidence.evidence_id}]
    await store.writeSnapshot(snap)
    times.push(performance.now() - started)
  }
  times.sort((a, b) => a - b)
  console.log(JSON.stringify({sample_run: sampleRun, step_write_median_ms: times[Math.floor(times.length / 2)]}))
}
