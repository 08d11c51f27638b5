/**
 * People in the loop on the built CLI: answers and review decisions refused with a clear error and
 * an unchanged store, asked at a terminal, given across processes, and a paused run cancelled.
 *
 * What each test checks is done by `pipe` processes: the first refusal of answer and of review, the
 * terminal's prompts, every step of the run across processes, the cancel. The other refusals and
 * the commands that only read (spec show, answer --questions, runs show) run in this process
 * (test/helpers/pipe-here.ts: the same command, output and exit code).
 */
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {CanonicalSpec} from '../../src/types/spec.js'
import {defaultPipeline, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {made, onlyRun, runIds, sentence, snapshotsOf, storeState, type RunJson} from '../helpers/durable-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-durable-')))
afterEach(async () => cleanup())

/** A default run paused for the answers to its first clarify round. */
const awaitingAnswers = made(['run', defaultPipeline, '--input', sentence], 10)

describe('people in the loop', function () {
  this.timeout(120000)

  it('refuses bad answers and bad review calls with a clear error and an unchanged store', async () => {
    await awaitingAnswers(dir)
    const paused = await onlyRun(dir)
    expect(paused.status).to.equal('awaiting_input')
    const before = await storeState(dir)
    const cases: Array<{args: string[]; file?: string; content?: string; code: number; message: string}> = [
      {args: ['answer', paused.run_id, '--file', 'a.yaml'], file: 'a.yaml', content: 'answers: [1, 2]\n', code: 2, message: 'answers  must be object'},
      {
        args: ['answer', paused.run_id, '--file', 'a.yaml'],
        file: 'a.yaml',
        content: 'answers:\n  Q-042: yes\n  Q-001: x\n  Q-002: y\n  Q-003: z\n',
        code: 2,
        message: '"Q-042" is not a question of run',
      },
      {
        args: ['answer', paused.run_id, '--file', 'a.yaml'],
        file: 'a.yaml',
        content: 'answers:\n  Q-001: only one\n',
        code: 2,
        message: 'no answer to Q-002 [non_functional], Q-003 [constraints]',
      },
      {args: ['answer', paused.run_id, '--file', 'a.yaml'], file: 'a.yaml', content: '', code: 2, message: 'file is empty'},
      {
        args: ['answer', paused.run_id, '--file', 'a.yaml'],
        file: 'a.yaml',
        content: 'run_id: R-20000101-0001\nanswers:\n  Q-001: a\n  Q-002: b\n  Q-003: c\n',
        code: 2,
        message: 'the answers are for run R-20000101-0001',
      },
      {args: ['answer', paused.run_id], code: 2, message: 'no answers given'},
      {args: ['review', paused.run_id, '--decision', 'go'], code: 2, message: `run ${paused.run_id} is not waiting for a review (it waits for answers)`},
      {args: ['review', 'R-20000101-0001', '--decision', 'go'], code: 2, message: 'run R-20000101-0001 not found'},
      {args: ['review', paused.run_id, '--decision', 'maybe'], code: 2, message: '--decision "maybe" is not a decision'},
      {args: ['review', 'not-a-run', '--decision', 'go'], code: 2, message: '"not-a-run" is not a run id'},
    ]
    for (const [index, c] of cases.entries()) {
      if (c.file) await writeFile(path.join(dir, c.file), c.content ?? '')
      // The first refusal of answer and the first of review are processes.
      const result = await (index === 0 || index === 6 ? pipe : pipeHere)(c.args, {cwd: dir, env: {PIPE_INTERACTIVE: '0'}})
      expect(result.code, `${c.args.join(' ')}: ${result.stderr}`).to.equal(c.code)
      expect(result.stderr, c.args.join(' ')).to.contain(c.message)
      expect(await storeState(dir), `${c.args.join(' ')} left the store unchanged`).to.deep.equal(before)
    }
  })

  it('asks the questions one at a time and the review decision at a terminal', async () => {
    const input = [
      'Given a month with sales, when I export it, then a PDF is written.',
      'Given no sales, when I export, then no file is written.',
      '',
      'Exports finish within 10 seconds.',
      '',
      'Must run on Node.js 20.',
      '',
      'go',
      'looks right',
      '',
    ].join('\n')
    const result = await pipe(['run', defaultPipeline, '--input', sentence], {cwd: dir, input, env: {PIPE_INTERACTIVE: '1'}})
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stderr)
      .to.contain('[1/3] Q-001 (acceptance_criteria)')
      .and.contain('[3/3] Q-003 (constraints)')
      .and.contain('Decision [go/hold/drop]:')
      .and.contain('gates: gate_s pass, gate_t pass')
    const [runId] = await runIds(dir)
    const list = await snapshotsOf(dir, runId!)
    const applied = list.find((s) => s.step.name === 'apply_answers')!
    expect(applied.evidence_links).to.have.length(3)
    const review = list.find((s) => s.step.name === 'manual_review')!.decisions[0]!
    expect(review).to.include({decision: 'go', note: 'looks right'})
    const spec = json<CanonicalSpec>(await pipeHere(['spec', 'show', list.at(-1)!.spec_version_in!, '--json'], {cwd: dir}))
    expect(spec.acceptance_criteria.map((a) => a.text)).to.deep.equal([
      'Given a month with sales, when I export it, then a PDF is written.',
      'Given no sales, when I export, then no file is written.',
    ])
  })

  it('takes one sentence through two clarify rounds, a hold and a go, across processes', async () => {
    const paused = json<RunJson>(await pipe(['run', defaultPipeline, '--input', sentence, '--json'], {cwd: dir}))
    await writeFile(
      path.join(dir, 'round1.yaml'),
      'answers:\n  acceptance_criteria: TBD\n  non_functional: Exports finish within 10 seconds.\n  constraints: none\n',
    )
    const round2 = json<RunJson>(await pipe(['answer', paused.run_id, '--file', 'round1.yaml', '--json'], {cwd: dir}))
    expect(round2.pending?.questions?.map((q) => `${q.id} ${q.field}`)).to.deep.equal(['Q-004 acceptance_criteria'])
    // Every command that moves the run on is a process of its own; what only reads runs here.
    const folded = await pipeHere(['answer', paused.run_id, '--questions'], {cwd: dir})
    expect(folded.stdout).to.contain('Round 2 (waiting for answers):').and.contain('(1 earlier round(s) folded; --history shows them)')
    const history = await pipeHere(['answer', paused.run_id, '--questions', '--history'], {cwd: dir})
    expect(history.stdout.indexOf('Round 2')).to.be.lessThan(history.stdout.indexOf('Round 1'))
    expect(history.stdout).to.contain('answered: Exports finish within 10 seconds.')
    await writeFile(path.join(dir, 'round2.yaml'), 'answers:\n  Q-004: Given sales data, when exported, then a PDF exists.\n')
    const review = json<RunJson>(await pipe(['answer', paused.run_id, '--file', 'round2.yaml', '--json'], {cwd: dir}))
    expect(review.pending?.kind).to.equal('review')
    const held = await pipe(['review', paused.run_id, '--decision', 'hold', '--note', 'legal', '--json'], {cwd: dir})
    expect(held.code).to.equal(10)
    const gone = await pipe(['review', paused.run_id, '--decision', 'go', '--json'], {cwd: dir})
    expect(gone.code, gone.stderr).to.equal(0)
    const list = await snapshotsOf(dir, paused.run_id)
    expect(list.filter((s) => s.step.name === 'clarify_questions')).to.have.length(2)
    expect(list.filter((s) => s.step.name === 'manual_review').map((s) => s.decisions[0]!.decision)).to.deep.equal(['hold', 'go'])
    expect(list.at(-1)!.step.name).to.equal('publish')
    const timeline = await pipeHere(['runs', 'show', paused.run_id], {cwd: dir})
    expect(timeline.stdout).to.contain('review_given').and.contain('answers_given').and.contain('manual_review hold by')
  })

  it('cancels a paused run', async () => {
    await awaitingAnswers(dir)
    const paused = await onlyRun(dir)
    const cancelled = await pipe(['cancel', paused.run_id, '--reason', 'superseded', '--json'], {cwd: dir})
    expect(cancelled.code, cancelled.stderr).to.equal(0)
    expect(json<RunJson>(cancelled).status).to.equal('cancelled')
    const again = await pipeHere(['cancel', paused.run_id], {cwd: dir})
    expect(again.code).to.equal(2)
    expect(again.stderr).to.contain('has already ended (cancelled)')
  })
})
