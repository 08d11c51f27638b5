/** Builds an engine over a real store in a temporary directory, with pipelines from YAML text. */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {KindCatalog} from '../../src/config/kind-contract.js'
import type {LoadedPipeline} from '../../src/config/loaded.js'
import {loadPipeline} from '../../src/config/pipeline.js'
import {Engine, type EngineDeps, type RunOutcome} from '../../src/engine/engine.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {OfflineProvider} from '../../src/providers/offline/provider.js'
import {kindCatalog, registry} from '../../src/steps/registry.js'
import type {StepRegistry} from '../../src/steps/types.js'
import {Store} from '../../src/store/file/store.js'

export async function pipelineFrom(dir: string, name: string, yaml: string, catalog: KindCatalog = kindCatalog): Promise<LoadedPipeline> {
  const file = path.join(dir, `${name}.yaml`)
  await writeFile(file, yaml)
  const result = await loadPipeline(file, catalog)
  if (!result.ok) throw new Error(result.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`).join('\n'))
  return result.loaded
}

export interface Harness {
  store: Store
  engine: Engine
  sleeps: number[]
  start(pipeline: LoadedPipeline, text?: string): Promise<RunOutcome>
}

export async function harness(dir: string, overrides: Partial<StepRegistry> = {}, deps: Partial<EngineDeps> = {}): Promise<Harness> {
  const store = await Store.open(path.join(dir, '.pipe'))
  const sleeps: number[] = []
  const engine = new Engine({
    store,
    provider: async () => new OfflineProvider(),
    registry: {...registry, ...overrides},
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 0,
    user: 'tester',
    ...deps,
  })
  return {
    store,
    engine,
    sleeps,
    start: (pipeline, text = 'The tool must export reports as PDF.') =>
      engine.start({
        pipeline,
        policy: defaultPolicy(),
        cwd: dir,
        input: {kind: 'text', ref: 'text://test', text},
        provider: {kind: 'offline', model: 'offline-rules-1', endpoint_host: null},
      }),
  }
}
