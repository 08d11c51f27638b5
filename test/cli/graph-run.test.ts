/**
 * pipe graph FILE --run RUN on the built CLI: real offline runs of pipelines/default.yaml, drawn
 * with the path they took (loop counts, a review's hold and drop), and a run of another pipeline refused.
 *
 * A `pipe graph --run` process draws a run's path in Mermaid, and another refuses a run of another
 * pipeline; the runs, the review and the further drawings and refusal run in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

let dir: string
let cleanup: () => Promise<void>
before(async () => ({dir, cleanup} = await tempDir('pipe-graph-run-')))
after(async () => cleanup())

interface GraphJson {
  run: {id: string; status: string; steps: Record<string, number>}
  taken: Array<{from: string; to: string; label: string; count: number}>
  text: string
}

async function run(args: string[]): Promise<string> {
  const result = await pipeHere(['run', defaultPipeline, ...args, '--store', 'store', '--json'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
  return json<{run_id: string}>(result).run_id
}

/** `pipe graph ARGS` in this process, or (asProcess) a process. */
const graph = (args: string[], asProcess = false) =>
  (asProcess ? pipe : pipeHere)(['graph', ...args, '--store', 'store'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})

describe('pipe graph --run (CLI)', function () {
  this.timeout(120000)

  it('colours the path of a run through the clarify loop, with counts, in mermaid, dot and --json', async () => {
    const runId = await run([
      '--input',
      path.join(examples, 'one-sentence.txt'),
      '--answers',
      path.join(examples, 'one-sentence.answers.yaml'),
      '--decision',
      'go',
    ])
    const body = json<GraphJson>(await graph([defaultPipeline, '--run', runId, '--json']))
    expect(body.run).to.deep.include({id: runId, status: 'succeeded'})
    expect(body.run.steps).to.deep.include({compile: 2, validate_gates: 2, clarify_questions: 1, publish: 1})
    expect(body.run.steps).to.not.have.property('__start__')
    expect(body.taken).to.deep.equal([
      {from: '__start__', to: 'ingest', label: 'start', count: 1},
      {from: 'ingest', to: 'compile', label: 'success', count: 1},
      {from: 'compile', to: 'validate_gates', label: 'success', count: 2},
      {from: 'validate_gates', to: 'clarify_questions', label: 'fail', count: 1},
      {from: 'clarify_questions', to: 'apply_answers', label: 'success', count: 1},
      {from: 'apply_answers', to: 'compile', label: 'success', count: 1},
      {from: 'validate_gates', to: 'plan_tasks', label: 'pass', count: 1},
      {from: 'plan_tasks', to: 'generate_vv', label: 'success', count: 1},
      {from: 'generate_vv', to: 'manual_review', label: 'success', count: 1},
      {from: 'manual_review', to: 'publish', label: 'go', count: 1},
      {from: 'publish', to: '__end__', label: 'success', count: 1},
    ])

    const mermaid = await graph([defaultPipeline, '--run', runId], true)
    expect(mermaid.code, mermaid.stderr).to.equal(0)
    expect(mermaid.stdout).to.contain('  compile -->|"2×"| validate_gates\n')
    expect(mermaid.stdout).to.contain('compile["compile<br/>ran 2×"]')
    expect(mermaid.stdout).to.match(/^ {2}class [a-z_,]*\bpublish\b[a-z_,]* taken$/m)
    // Every drawn link the run took is styled, the hold and drop it did not take are not.
    const links = mermaid.stdout.split('\n').filter((l) => /-->|-\.->/.test(l))
    const styled = /^ {2}linkStyle ([\d,]+) stroke:/m.exec(mermaid.stdout)![1]!.split(',').map(Number)
    expect(styled.map((i) => links[i]!.trim())).to.include.members([
      'compile -->|"2×"| validate_gates',
      'validate_gates -->|"fail"| clarify_questions',
      'publish --> __end__',
      'manual_review -->|"go"| publish',
    ])
    expect(styled).to.have.length(body.taken.length)
    expect(styled.map((i) => links[i])).to.not.include('  manual_review -.->|"hold (waits)"| manual_review')

    const dot = await graph([defaultPipeline, '--run', runId, '--format', 'dot'])
    expect(dot.stdout).to.contain('"compile" -> "validate_gates" [label="2×", color="#2e7d32", penwidth=3];')
    expect(dot.stdout).to.contain('"validate_gates" -> "clarify_questions" [label="fail", color="#2e7d32", penwidth=3];')
    expect(dot.stdout).to.contain('"manual_review" -> "__cancelled__" [label="drop", style=dotted];')
    expect(dot.stdout).to.match(/"clarify_questions" \[shape=box, style="dashed,filled", fillcolor="#c8e6c9"/)
  })

  it("shows a review's hold (it waited) and drop (cancelled) as the edges taken", async () => {
    const runId = await run(['--input', path.join(examples, 'full-prd.md'), '--decision', 'hold'])
    const dropped = await pipeHere(['review', runId, '--decision', 'drop', '--store', 'store', '--json'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(dropped.code, dropped.stderr).to.equal(5)
    const body = json<GraphJson>(await graph([defaultPipeline, '--run', runId, '--json']))
    expect(body.run.status).to.equal('cancelled')
    expect(body.taken.slice(-2)).to.deep.equal([
      {from: 'manual_review', to: 'manual_review', label: 'hold', count: 1},
      {from: 'manual_review', to: '__cancelled__', label: 'drop', count: 1},
    ])
    expect(body.text).to.contain('manual_review -.->|"hold (waits)"| manual_review')
    expect(body.text).to.contain('manual_review -.->|"drop"| __cancelled__')
    expect(body.text).to.not.contain('publish["publish<br/>ran')
  })

  it('refuses a run of another pipeline, and of this file once it changed, saying which file the run used', async () => {
    const runId = await run(['--input', path.join(examples, 'full-prd.md'), '--decision', 'go'])
    const other = path.join(dir, 'other.yaml')
    await writeFile(other, 'version: 1\nname: other\nsteps:\n  - {id: a, kind: noop}\n')
    const refused = await graph([other, '--run', runId], true)
    expect(refused.code).to.equal(2)
    expect(refused.stdout).to.equal('')
    expect(refused.stderr)
      .to.contain(`Error [E_INVALID_ARGS]: ${runId} is a run of pipeline "default", not "other"`)
      .and.contain(`pipe graph ${defaultPipeline} --run ${runId}`)

    const tiny = path.join(dir, 'tiny.yaml')
    await writeFile(tiny, 'version: 1\nname: tiny\nsteps:\n  - {id: a, kind: noop, next: stop}\n  - {id: stop, kind: end, status: failed, reason: no}\n')
    const failed = await pipeHere(['run', tiny, '--store', 'store', '--json'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    const tinyRun = json<{run_id: string; status: string}>(failed)
    expect(tinyRun.status).to.equal('failed')
    // The end step's own failure is no edge of the graph: it is added, dotted, to a failed node.
    const drawn = json<GraphJson>(await graph([tiny, '--run', tinyRun.run_id, '--json']))
    expect(drawn.taken.at(-1)).to.deep.equal({from: 'stop', to: '__failed__', label: 'failed', count: 1})
    expect(drawn.text).to.contain('  __failed__(((failed)))\n').and.contain('  stop -.->|"failed"| __failed__\n')
    await writeFile(tiny, 'version: 1\nname: tiny\nsteps:\n  - {id: a, kind: noop, next: stop}\n  - {id: stop, kind: end, status: succeeded}\n')
    const changed = await graph([tiny, '--run', tinyRun.run_id])
    expect(changed.code).to.equal(2)
    expect(changed.stderr).to.contain('has changed since')
  })
})
