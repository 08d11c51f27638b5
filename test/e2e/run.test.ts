/**
 * `pipe run` of the default pipeline end to end, offline. A real `pipe` process stays for the first
 * use of each command (the shared full-PRD run, snapshot show, answer, resume, spec show, spec diff),
 * a paused run resumed by another process, the runs of another locale, stdin and runs at once on one
 * store; the other commands run in this process (test/helpers/pipe-here.ts: the CLI's path from argv,
 * its output and exit code).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {check} from '../../src/schema/registry.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'
import {defaultPipeline, examples, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {madeOnce, snapshotsIn, specIn} from '../helpers/stores.js'

interface RunJson {
  run_id: string
  feature_id: string
  status: string
  spec_version: string | null
  pending?: RunRecord['pending']
  next_command?: string
  error?: {code: string; message: string}
}

const SPEC_CHANGING = new Set(['compile', 'apply_answers', 'plan_tasks', 'generate_vv'])

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-e2e-')))
afterEach(async () => cleanup())

function run(args: string[], input?: string): Promise<CliResult> {
  return pipe(['run', defaultPipeline, ...args], {cwd: dir, ...(input !== undefined ? {input} : {})})
}

/** `pipe run` of the default pipeline in this process. */
function runHere(args: string[]): Promise<CliResult> {
  return pipeHere(['run', defaultPipeline, ...args], {cwd: dir})
}

/** What `pipe snapshot show RUN --json` prints, read in-process. */
function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(dir, runId)
}

/**
 * The full PRD run to a published spec (--decision go), run once for the file: each test that starts
 * from it gets a copy of its folder (store and published files) in its own `dir`.
 */
const fullPrdDone = madeOnce((at) => pipe(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'], {cwd: at}))
async function fullPrdRun(): Promise<{result: CliResult; body: RunJson}> {
  const result = await fullPrdDone(dir)
  expect(result.code, result.stderr).to.equal(0)
  return {result, body: json<RunJson>(result)}
}

async function storeListing(): Promise<string[]> {
  const root = path.join(dir, '.pipe')
  if (!existsSync(root)) return []
  const out: string[] = []
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, {withFileTypes: true})) {
      const full = path.join(at, entry.name)
      out.push(path.relative(root, full))
      if (entry.isDirectory()) await walk(full)
    }
  }
  await walk(root)
  return out.sort()
}

/** The audit invariants every finished run must keep. */
function checkTrail(list: Snapshot[]): void {
  expect(list.length).to.be.greaterThan(0)
  list.forEach((s, i) => {
    const valid = check('snapshot', s)
    expect(valid.errors, `snapshot ${i + 1} valid`).to.deep.equal([])
    expect(s.step.seq).to.equal(i + 1)
    expect(s.decisions.length).to.be.greaterThan(0)
    for (const d of s.decisions) {
      expect(d.reason).to.be.a('string').and.not.equal('')
      expect(d).to.have.property('next_step')
    }
    if (SPEC_CHANGING.has(s.step.kind) && s.errors.length === 0) expect(s.spec_version_out, `${s.step.name} writes a version`).to.match(/^S-\d{8}-\d{4}$/)
    else expect(s.spec_version_out, `${s.step.name} writes no version`).to.equal(null)
    expect(s.meta.prev_hash).to.equal(i === 0 ? null : list[i - 1]!.meta.record_hash)
    if (i > 0) expect(s.step.name).to.equal(list[i - 1]!.decisions.at(-1)!.next_step)
  })
}

describe('pipe run: the default pipeline end to end (offline, real processes)', function () {
  // Six runs at once on a loaded 2-core machine took more than mocha's default minute.
  this.timeout(240000)
  it('takes the full PRD to a published spec, with one valid snapshot per step', async () => {
    const {body} = await fullPrdRun()
    expect(body.status).to.equal('succeeded')
    const list = await snapshots(body.run_id)
    checkTrail(list)
    expect(list.map((s) => s.step.name)).to.deep.equal(['ingest', 'compile', 'validate_gates', 'plan_tasks', 'generate_vv', 'manual_review', 'publish'])
    expect(list.filter((s) => s.spec_version_out !== null)).to.have.length(3)
    const published = path.join(dir, 'published', body.feature_id, `${body.spec_version}.json`)
    const spec = JSON.parse(await readFile(published, 'utf8')) as CanonicalSpec
    expect(check('spec', spec).errors).to.deep.equal([])
    expect(spec.meta.status).to.equal('verified')
    expect(spec.features.map((f) => f.priority)).to.deep.equal(['P0', 'P0', 'P0', 'P1', 'P1', 'P2'])
    expect(spec.acceptance_criteria[0]).to.include({given: 'a group with three members'})
    expect(spec.tasks.length).to.be.greaterThan(0)
    expect(spec.vv.some((v) => v.kind === 'validation')).to.equal(true)
    expect(existsSync(published.replace(/\.json$/, '.md'))).to.equal(true)
    // The review decision records who decided.
    const review = list.find((s) => s.step.name === 'manual_review')!
    expect(review.decisions[0]).to.include({decision: 'go', next_step: 'publish'})
    expect(review.decisions[0]!.by).to.be.a('string').and.not.equal('')
    // Evidence for the input, with its sha256.
    const evidenceId = list[0]!.evidence_links[0]!.evidence_id
    const evidence = JSON.parse(await readFile(path.join(dir, '.pipe', 'evidence', `${evidenceId}.json`), 'utf8')) as {source: {hash: string}}
    expect(check('evidence', evidence).errors).to.deep.equal([])
    expect(evidence.source.hash).to.match(/^sha256:[0-9a-f]{64}$/)
  })

  it('prints the stored snapshot exactly with --seq --json', async () => {
    const {body} = await fullPrdRun()
    const shown = json<Snapshot>(await pipe(['snapshot', 'show', body.run_id, '--seq', '3', '--json'], {cwd: dir}))
    const stored = JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', body.run_id, 'snapshots', '000003.json'), 'utf8')) as Snapshot
    expect(shown).to.deep.equal(stored)
    const human = await pipeHere(['snapshot', 'show', body.run_id, '--step', 'validate_gates'], {cwd: dir})
    expect(human.stdout).to.contain('gate results:').and.contain('gate_s').and.contain('decisions:').and.contain('pass -> plan_tasks')
  })

  it('loops a one-sentence requirement through clarify, across separate processes', async () => {
    const first = await run(['--input', path.join(examples, 'one-sentence.txt'), '--json'])
    expect(first.code, first.stderr).to.equal(10)
    const paused = json<RunJson>(first)
    expect(paused.status).to.equal('awaiting_input')
    expect(paused.pending?.kind).to.equal('answers')
    expect(paused.pending?.questions?.map((q) => q.field)).to.deep.equal(['acceptance_criteria', 'non_functional', 'constraints'])
    expect(paused.next_command).to.equal(`pipe answer ${paused.run_id} --file answers.yaml`)

    // Paused by a process, answered in this one, approved by another process: each step in a process
    // other than the one before it.
    const answered = await pipeHere(['resume', paused.run_id, '--answers', path.join(examples, 'one-sentence.answers.yaml'), '--json'], {cwd: dir})
    expect(answered.code, answered.stderr).to.equal(10)
    expect(json<RunJson>(answered).pending?.kind).to.equal('review')

    const approved = await pipe(['resume', paused.run_id, '--decision', 'go', '--note', 'fine', '--json'], {cwd: dir})
    expect(approved.code, approved.stderr).to.equal(0)
    const list = await snapshots(paused.run_id)
    checkTrail(list)
    const gates = list.filter((s) => s.step.name === 'validate_gates').map((s) => s.decisions[0]!.decision)
    expect(gates).to.deep.equal(['fail', 'pass'])
    expect(list.find((s) => s.step.name === 'manual_review')!.decisions[0]!.note).to.equal('fine')
  })

  it('passes the clarify loop with answers and a decision given up front', async () => {
    const result = await runHere([
      '--input',
      path.join(examples, 'one-sentence.txt'),
      '--answers',
      path.join(examples, 'one-sentence.answers.yaml'),
      '--decision',
      'go',
      '--json',
    ])
    expect(result.code, result.stderr).to.equal(0)
    const list = await snapshots(json<RunJson>(result).run_id)
    expect(list.map((s) => s.step.name)).to.deep.equal([
      'ingest',
      'compile',
      'validate_gates',
      'clarify_questions',
      'apply_answers',
      'compile',
      'validate_gates',
      'plan_tasks',
      'generate_vv',
      'manual_review',
      'publish',
    ])
  })

  it('asks again when an answer defers, and ends a loop that never converges at its bound', async () => {
    const tbd = path.join(dir, 'tbd.yaml')
    await writeFile(tbd, 'answers:\n  acceptance_criteria: TBD\n  non_functional: TBD\n  constraints: TBD\n')
    const first = await runHere(['--input', path.join(examples, 'one-sentence.txt'), '--answers', tbd, '--json'])
    expect(first.code, first.stderr).to.equal(10)
    const paused = json<RunJson>(first)
    // The up-front answers deferred; round 2 asks again, with new question ids.
    expect(paused.pending?.questions?.map((q) => q.id)).to.deep.equal(['Q-004', 'Q-005', 'Q-006'])
    const again = await pipeHere(['answer', paused.run_id, '--file', tbd, '--json'], {cwd: dir})
    expect(again.code, again.stderr).to.equal(10)
    expect(json<RunJson>(again).pending?.questions?.map((q) => q.id)).to.deep.equal(['Q-007', 'Q-008', 'Q-009'])
    // The loop's end from a process.
    const last = await pipe(['answer', paused.run_id, '--file', tbd, '--json'], {cwd: dir})
    expect(last.code).to.equal(1)
    const body = json<RunJson>(last)
    expect(body.status).to.equal('failed')
    expect(body.error?.code).to.equal('E_LOOP_LIMIT')
    expect(body.error?.message).to.contain('max_iterations 3')
    const list = await snapshots(body.run_id)
    expect(list.filter((s) => s.step.name === 'clarify_questions')).to.have.length(3)
    checkTrail(list)
  })

  it('gives the same spec content for the same input', async () => {
    const {body: a} = await fullPrdRun()
    // The first run was a process; this one runs in this process.
    const b = json<RunJson>(await runHere(['--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']))
    expect(a.run_id).to.not.equal(b.run_id)
    const read = async (v: string): Promise<Omit<CanonicalSpec, 'meta'>> => {
      const {meta: _m, ...body} = await specIn(dir, v)
      return body
    }
    expect(await read(a.spec_version!)).to.deep.equal(await read(b.spec_version!))
    const gatesA = (await snapshots(a.run_id)).filter((s) => s.step.kind === 'gate').map((s) => JSON.stringify(s.outputs))
    const gatesB = (await snapshots(b.run_id)).filter((s) => s.step.kind === 'gate').map((s) => JSON.stringify(s.outputs))
    expect(gatesA).to.deep.equal(gatesB)
  })

  // One test for what were two: the Chinese example run (its spec and trail) is one of the two runs
  // under different locales.
  it('runs the Chinese example to a published spec, the same whatever the locale of the process that runs it', async () => {
    // ICU orders Han by pinyin under zh_CN and by code point under en: keywords tied on count came
    // out in another order, so a Chinese team's spec differed from their CI's.
    // Processes: ICU takes its locale from the environment once, as a process starts.
    const under = async (lang: string): Promise<{runId: string; spec: CanonicalSpec}> => {
      const result = await pipe(['run', defaultPipeline, '--input', path.join(examples, 'zh-prd.md'), '--decision', 'go', '--json'], {
        cwd: dir,
        env: {LANG: lang, LC_ALL: lang},
      })
      expect(result.code, result.stderr).to.equal(0)
      const body = json<RunJson>(result)
      return {runId: body.run_id, spec: await specIn(dir, body.spec_version!)}
    }
    const zh = await under('zh_CN.UTF-8')
    const c = await under('C.UTF-8')
    const {meta: _zh, ...zhBody} = zh.spec
    const {meta: _c, ...cBody} = c.spec
    expect(zhBody).to.deep.equal(cBody)
    const spec = c.spec
    expect(spec.goal).to.contain('会议室')
    expect(spec.features.find((f) => f.story)?.story).to.deep.equal({role: '行政人员', want: '查看每个会议室的使用率报表', so_that: '调整会议室配置'})
    expect(spec.non_functional.map((n) => n.category)).to.deep.equal(['performance', 'reliability', 'security'])
    expect(spec.acceptance_criteria[0]!.then).to.equal('系统提示冲突并拒绝预订')
    checkTrail(await snapshots(zh.runId))
    checkTrail(await snapshots(c.runId))
  })

  it('reads the requirement from stdin and from --text', async () => {
    const fromStdin = await run(
      ['--input', '-', '--decision', 'go', '--json'],
      (await readFile(path.join(examples, 'full-prd.md'), 'utf8')).replace(/\n/g, '\r\n'),
    )
    expect(fromStdin.code, fromStdin.stderr).to.equal(0)
    const list = await snapshots(json<RunJson>(fromStdin).run_id)
    const ingest = list[0]!.outputs as {ingest_result: {source_kind: string; text: string}}
    expect(ingest.ingest_result.source_kind).to.equal('stdin')
    expect(ingest.ingest_result.text).to.not.contain('\r')
    const fromText = await runHere(['--text', 'Users must be able to export invoices as CSV.', '--json'])
    expect(fromText.code).to.equal(10)
  })

  it('keeps every id unique when several runs share one store at once', async () => {
    // Processes: six at once (pipeHere runs one command at a time).
    const results = await Promise.all(Array.from({length: 6}, () => run(['--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'])))
    for (const r of results) expect(r.code, r.stderr).to.equal(0)
    const bodies = results.map((r) => json<RunJson>(r))
    expect(new Set(bodies.map((b) => b.run_id)).size).to.equal(6)
    expect(new Set(bodies.map((b) => b.feature_id)).size).to.equal(6)
    const specs = await readdir(path.join(dir, '.pipe', 'specs'))
    expect(specs.filter((f) => f.endsWith('.json'))).to.have.length(18)
    const versions = new Set<string>()
    for (const b of bodies) for (const s of await snapshots(b.run_id)) if (s.spec_version_out) versions.add(s.spec_version_out)
    expect(versions.size).to.equal(18)
    const evidence = (await readdir(path.join(dir, '.pipe', 'evidence'))).filter((f) => f.endsWith('.json'))
    const linked = new Set<string>()
    for (const b of bodies) for (const s of await snapshots(b.run_id)) for (const l of s.evidence_links) linked.add(l.evidence_id)
    expect(linked.size).to.equal(evidence.length)
  })
})

describe('pipe run --dry-run', () => {
  it('checks everything, prints the plan and writes nothing', async () => {
    const result = await runHere([
      '--input',
      path.join(examples, 'full-prd.md'),
      '--answers',
      path.join(examples, 'one-sentence.answers.yaml'),
      '--dry-run',
      '--json',
    ])
    expect(result.code, result.stderr).to.equal(0)
    const plan = json<{
      pipeline: {start: string}
      provider: {kind: string}
      answers: string[]
      steps: Array<{id: string; transitions: Record<string, string>; max_iterations?: number; changes_spec: boolean; retries: number}>
    }>(result)
    expect(plan.pipeline.start).to.equal('ingest')
    expect(plan.provider.kind).to.equal('offline')
    expect(plan.answers).to.deep.equal(['acceptance_criteria', 'non_functional', 'constraints'])
    expect(plan.steps.find((s) => s.id === 'validate_gates')!.transitions).to.deep.equal({pass: 'plan_tasks', fail: 'clarify_questions'})
    expect(plan.steps.find((s) => s.id === 'clarify_questions')!.max_iterations).to.equal(3)
    expect(plan.steps.filter((s) => s.changes_spec).map((s) => s.id)).to.deep.equal(['compile', 'apply_answers', 'plan_tasks', 'generate_vv'])
    expect(plan.steps.find((s) => s.id === 'manual_review')!.retries).to.equal(0)
    expect(await storeListing()).to.deep.equal([])
    const human = await runHere(['--input', path.join(examples, 'full-prd.md'), '--dry-run'])
    expect(human.stdout).to.contain('nothing was run')
    const bad = await runHere(['--input', 'missing.md', '--dry-run'])
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.contain('E_INPUT')
  })
})

describe('pipe run: bad input is refused and loses nothing', () => {
  it('refuses a missing input file', async () => {
    const result = await runHere(['--input', 'nope.md'])
    expect(result.code).to.equal(2)
    expect(result.stderr).to.match(/^Error \[E_INPUT\]: input file nope\.md not found$/m)
    expect(await storeListing()).to.deep.equal([])
  })

  it('refuses an empty input, and a whitespace-only one', async () => {
    await writeFile(path.join(dir, 'empty.md'), '')
    await writeFile(path.join(dir, 'blank.md'), '  \n\n\t\n')
    for (const file of ['empty.md', 'blank.md']) {
      const result = await runHere(['--input', file])
      expect(result.code).to.equal(2)
      expect(result.stderr).to.contain(`Error [E_INPUT]: input file ${file} is empty`)
    }
    expect(await storeListing()).to.deep.equal([])
  })

  it('refuses a binary input', async () => {
    await writeFile(path.join(dir, 'image.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00]))
    const result = await runHere(['--input', 'image.png'])
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('is binary')
    expect(await storeListing()).to.deep.equal([])
  })

  it('refuses an invalid answers file with its line and column', async () => {
    await writeFile(path.join(dir, 'answers.yaml'), 'answer:\n  Q-001: yes\n')
    const result = await runHere(['--input', path.join(examples, 'one-sentence.txt'), '--answers', 'answers.yaml'])
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('Error [E_CONFIG]: invalid answers file')
    expect(result.stderr).to.contain('answers.yaml:1:1  answer  unknown key "answer" in an answers file — did you mean "answers"?')
    expect(await storeListing()).to.deep.equal([])
  })

  it('refuses an invalid pipeline without touching the store', async () => {
    await writeFile(path.join(dir, 'bad.yaml'), 'version: 1\nname: bad\nsteps:\n  - {id: a, kind: noop, next: b}\n')
    const result = await pipeHere(['run', 'bad.yaml', '--text', 'x'], {cwd: dir})
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('unknown step "b"')
    expect(await storeListing()).to.deep.equal([])
  })

  it('refuses --input together with --text', async () => {
    const result = await runHere(['--input', 'a.md', '--text', 'x'])
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('E_INVALID_ARGS')
  })

  it('refuses to resume a run that has ended, and names an unknown run', async () => {
    const {body} = await fullPrdRun()
    const before = await storeListing()
    const again = await pipeHere(['resume', body.run_id], {cwd: dir})
    expect(again.code).to.equal(2)
    expect(again.stderr).to.contain(`Error [E_STATE]: run ${body.run_id} has ended (succeeded)`)
    const unknown = await pipeHere(['resume', 'R-20200101-0001'], {cwd: dir})
    expect(unknown.code).to.equal(2)
    expect(unknown.stderr).to.contain('E_NOT_FOUND')
    expect(await storeListing()).to.deep.equal(before)
  })
})

describe('spec versions are immutable and checked', () => {
  it('reports a version changed after it was written, and lists it as damaged', async () => {
    const {body} = await fullPrdRun()
    const file = path.join(dir, '.pipe', 'specs', `${body.spec_version}.json`)
    const text = await readFile(file, 'utf8')
    await writeFile(file, text.replace('"goal": "Give', '"goal": "give'))
    const shown = await pipe(['spec', 'show', body.spec_version!], {cwd: dir})
    expect(shown.code).to.equal(4)
    expect(shown.stderr).to.contain(`Error [E_INTEGRITY]: spec version ${body.spec_version} does not match its content hash`)
    const listed = await pipeHere(['spec', 'list', '--run', body.run_id], {cwd: dir})
    expect(listed.stdout).to.match(new RegExp(`${body.spec_version}\\s+F-\\d{4}-\\d{3}\\s+DAMAGED`))
  })

  it('diffs two versions field by field', async () => {
    const result = await runHere([
      '--input',
      path.join(examples, 'one-sentence.txt'),
      '--answers',
      path.join(examples, 'one-sentence.answers.yaml'),
      '--decision',
      'go',
      '--json',
    ])
    const list = await snapshots(json<RunJson>(result).run_id)
    const compiled = list.find((s) => s.step.name === 'compile')!.spec_version_out!
    const answered = list.find((s) => s.step.name === 'apply_answers')!.spec_version_out!
    const diff = json<{changes: Array<{path: string; kind: string}>}>(await pipe(['spec', 'diff', compiled, answered, '--no-meta', '--json'], {cwd: dir}))
    expect(diff.changes.map((c) => `${c.kind} ${c.path}`)).to.include.members([
      'added acceptance_criteria[AC-001]',
      'added non_functional[NFR-001]',
      'added constraints[C-001]',
    ])
  })
})
