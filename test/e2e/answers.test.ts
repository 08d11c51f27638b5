/**
 * The first case of each refusal (from pipe answer and pipe resume alike where both are asked) and
 * the run that takes answers up front are `pipe` processes; the runs that pause and the further cases
 * run in this process (test/helpers/pipe-here.ts: the same command from argv, its stderr and exit code).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

interface RunJson {
  run_id: string
  status: string
  error?: {code: string}
}

const sentence = path.join(examples, 'one-sentence.txt')

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-answers-')))
afterEach(async () => cleanup())

/** Every file under the store with its content, to show that a refused call changed nothing. */
async function storeState(): Promise<Record<string, string>> {
  const root = path.join(dir, '.pipe')
  const out: Record<string, string> = {}
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, {withFileTypes: true})) {
      const full = path.join(at, entry.name)
      if (entry.isDirectory()) await walk(full)
      else out[path.relative(root, full)] = await readFile(full, 'utf8')
    }
  }
  if (existsSync(root)) await walk(root)
  return out
}

async function answersFile(body: string): Promise<string> {
  const file = path.join(dir, 'a.yaml')
  await writeFile(file, `answers:\n${body}`)
  return file
}

describe('answers are checked the same by pipe answer, pipe resume --answers and pipe run --answers', function () {
  this.timeout(90000)

  it('refuses an unknown question id or field of a paused run from answer and resume alike, leaving the run as it was', async () => {
    const paused = json<RunJson>(await pipeHere(['run', defaultPipeline, '--input', sentence, '--json'], {cwd: dir}))
    expect(paused.status).to.equal('awaiting_input')
    const before = await storeState()
    const cases = [
      {body: '  Q-001: a\n  Q-002: b\n  Q-003: c\n  Q-042: d\n', message: '"Q-042" is not a question of run'},
      {body: '  acceptance_criteria: a\n  non_functional: b\n  constraints: c\n  goal: d\n', message: '"goal" is not a question of run'},
      {body: '  acceptance_critera: a\n  non_functional: b\n  constraints: c\n', message: '"acceptance_critera" is not a question of run'},
      {body: '  Q-001: only one\n', message: 'no answer to Q-002 [non_functional], Q-003 [constraints]'},
    ]
    for (const [index, c] of cases.entries()) {
      const file = await answersFile(c.body)
      for (const args of [
        ['answer', paused.run_id, '--file', file],
        ['resume', paused.run_id, '--answers', file],
      ]) {
        const result = await (index === 0 ? pipe : pipeHere)(args, {cwd: dir, env: {PIPE_INTERACTIVE: '0'}})
        expect(result.code, `${args[0]} ${c.body}: ${result.stderr}`).to.equal(2)
        expect(result.stderr, `${args[0]} ${c.body}`).to.contain(`Error [E_INPUT]: ${c.message}`)
        expect(result.stderr, args[0]).to.contain('Try this:')
        expect(await storeState(), `${args[0]} ${c.body} left the store unchanged`).to.deep.equal(before)
      }
    }
    const unknown = await pipeHere(['resume', paused.run_id, '--answers', await answersFile('  Q-001: a\n  Q-002: b\n  Q-003: c\n  Q-042: d\n')], {cwd: dir})
    expect(unknown.stderr).to.contain('Its open questions: Q-001 [acceptance_criteria], Q-002 [non_functional], Q-003 [constraints]')
  })

  it('refuses answers to a run that waits for none, from resume as from answer', async () => {
    const done = json<RunJson>(await pipeHere(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--json'], {cwd: dir}))
    expect(done.status).to.equal('awaiting_input')
    const file = await answersFile('  Q-001: a\n')
    for (const args of [
      ['answer', done.run_id, '--file', file],
      ['resume', done.run_id, '--answers', file],
    ]) {
      // answer's refusal from a process, resume's in this process.
      const result = await (args[0] === 'answer' ? pipe : pipeHere)(args, {cwd: dir})
      expect(result.code, result.stderr).to.equal(2)
      expect(result.stderr).to.contain(`run ${done.run_id} is not waiting for answers (it waits for a review)`)
    }
  })

  it('refuses a key given up front that no question of the pipeline can be about, before anything is written', async () => {
    const cases = [
      {
        body: '  acceptance_critera: x\n',
        message:
          '"acceptance_critera" is neither a question id (Q-001) nor a field a question of pipeline default can be about — did you mean "acceptance_criteria"?',
      },
      {body: '  budget: 10k\n', message: '"budget" is neither a question id'},
    ]
    for (const [index, c] of cases.entries()) {
      const file = await answersFile(c.body)
      for (const extra of [[], ['--dry-run']]) {
        const first = index === 0 && extra.length === 0
        const result = await (first ? pipe : pipeHere)(['run', defaultPipeline, '--input', sentence, '--answers', file, ...extra], {cwd: dir})
        expect(result.code, result.stderr).to.equal(2)
        expect(result.stderr).to.contain(`Error [E_INPUT]: ${c.message}`)
        expect(result.stderr).to.match(/Try this: .*by field: goal, features, acceptance_criteria/)
        expect(existsSync(path.join(dir, '.pipe', 'runs')), 'no run was created').to.equal(false)
      }
    }
  })

  it('takes question ids and every field a gate of the pipeline checks, given up front', async () => {
    const file = await answersFile(
      '  Q-001: Given a month with sales data, when I export it, then a PDF is written.\n  non_functional: Exports take under 10 seconds.\n  constraints: Must run on Node.js 20.\n',
    )
    const result = await pipe(['run', defaultPipeline, '--input', sentence, '--answers', file, '--decision', 'go', '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(0)
    expect(json<RunJson>(result).status).to.equal('succeeded')
  })
})
