/**
 * Every outcome of every step of the shipped coding pipeline leads somewhere deliberate: walked
 * over the loaded pipelines/coding*.yaml, each outcome its kind declares, and `error`.
 */
import {expect} from 'chai'
import {readdirSync} from 'node:fs'
import path from 'node:path'
import type {LoadedPipeline} from '../../src/config/loaded.js'
import {loadPipeline} from '../../src/config/pipeline.js'
import {pipelineWarnings} from '../../src/config/rules/index.js'
import {kindCatalog} from '../../src/steps/registry.js'
import type {Step} from '../../src/types/pipeline.js'
import {repoRoot} from '../helpers/cli.js'

const dir = path.join(repoRoot, 'pipelines')

async function load(file: string): Promise<LoadedPipeline> {
  const result = await loadPipeline(path.join(dir, file), kindCatalog)
  if (!result.ok) throw new Error(`${file}: ${JSON.stringify(result.diagnostics)}`)
  return result.loaded
}

/** The steps a file itself writes (not those it inherits through extends). */
async function ownSteps(file: string): Promise<Step[]> {
  const loaded = await load(file)
  if (loaded.pipeline.extends === undefined) return loaded.pipeline.steps
  const base = await load(path.relative(dir, path.resolve(dir, loaded.pipeline.extends)))
  const inherited = new Map(base.pipeline.steps.map((s) => [s.id, JSON.stringify(s)]))
  return loaded.pipeline.steps.filter((s) => inherited.get(s.id) !== JSON.stringify(s))
}

/** The outcomes of a step that lead nowhere: neither an on: route, nor next: for an outcome that is not a failure. */
function unrouted(step: Step, withError: boolean): string[] {
  const info = kindCatalog[step.kind]!
  // An end step's outcome is the run's end; a choice's outcomes are the steps it goes to.
  if (step.kind === 'end' || step.kind === 'choice') return withError && step.kind === 'choice' && step.on?.error === undefined ? ['error'] : []
  const outcomes = [...info.outcomes(step), ...(withError ? ['error'] : [])]
  return outcomes.filter((outcome) => {
    if (info.stops?.[outcome] !== undefined) return false
    if (step.on?.[outcome] !== undefined) return false
    const failure = outcome === 'error' || Object.hasOwn(info.failures ?? {}, outcome)
    return failure || step.next === undefined
  })
}

describe('the shipped coding pipelines route every outcome', () => {
  const files = readdirSync(dir).filter((f) => /^coding.*\.yaml$/.test(f) && !f.includes('pipe-test'))

  it('finds both files', () => {
    expect(files.sort()).to.deep.equal(['coding-task.yaml', 'coding.yaml'])
  })

  it('coding-task.yaml: every outcome its kinds declare, and error, of every step has a route (the working tree holds the agent edits until commit or rollback)', async () => {
    const missing = (await ownSteps('coding-task.yaml')).flatMap((step) => unrouted(step, true).map((o) => `${step.id}: ${o}`))
    expect(missing).to.deep.equal([])
  })

  it('coding.yaml: every outcome its own steps declare has a route (a model error before any task fails the run, for pipe resume to redrive)', async () => {
    const own = await ownSteps('coding.yaml')
    expect(own.map((s) => s.id)).to.include.members(['arch', 'tasks', 'each', 'summary'])
    const missing = own.flatMap((step) => unrouted(step, false).map((o) => `${step.id}: ${o}`))
    expect(missing).to.deep.equal([])
  })

  it('pipe validate has no warning for either file', async () => {
    for (const file of files) expect(pipelineWarnings(await load(file), kindCatalog).map((w) => `${file}: ${w.message}`)).to.deep.equal([])
  })
})
