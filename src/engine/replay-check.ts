/** pipe replay --check: re-evaluates every gate of a run and compares it with what was recorded, byte for byte. */
import type {LoadedPipeline} from '../config/pipeline.js'
import {evaluateGates} from '../gates/evaluate.js'
import type {Store} from '../store/store.js'
import {canonicalJson} from '../util/hash.js'

export interface GateCheck {
  seq: number
  step: string
  spec_version: string | null
  same: boolean
  recorded: unknown
  replayed?: unknown
  error?: string
}

export async function checkGates(store: Store, runId: string, pipeline: LoadedPipeline): Promise<GateCheck[]> {
  const out: GateCheck[] = []
  for (const snapshot of await store.readSnapshots(runId)) {
    if (snapshot.step.kind !== 'gate') continue
    const recorded = (snapshot.outputs as {gate_result?: unknown}).gate_result
    const step = pipeline.pipeline.steps.find((s) => s.id === snapshot.step.name)
    const base = {seq: snapshot.step.seq, step: snapshot.step.name, spec_version: snapshot.spec_version_in, recorded}
    if (!step || step.kind !== 'gate') {
      out.push({...base, same: false, error: `the pipeline has no gate step "${snapshot.step.name}"`})
      continue
    }
    if (!snapshot.spec_version_in) {
      out.push({...base, same: recorded === undefined, error: 'the step read no spec'})
      continue
    }
    try {
      const spec = await store.readSpec(snapshot.spec_version_in)
      const useCompleteness = step.completeness ?? pipeline.pipeline.completeness !== undefined
      const replayed = evaluateGates(spec, pipeline.pipeline.gates ?? {}, step.gates, useCompleteness ? pipeline.pipeline.completeness : undefined)
      out.push({...base, same: canonicalJson(replayed) === canonicalJson(recorded), replayed})
    } catch (error) {
      out.push({...base, same: false, error: (error as Error).message})
    }
  }
  return out
}
