/**
 * pipe replay --check: recomputes what each snapshot's kind says is a pure function of the spec (a
 * gate's results) and compares it with what was recorded, byte for byte.
 */
import type {LoadedPipeline} from '../config/pipeline.js'
import {handlerNamed} from '../steps/registry.js'
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
    const role = handlerNamed(snapshot.step.kind)?.replay
    if (!role) continue
    const recorded = role.recorded(snapshot)
    const step = pipeline.pipeline.steps.find((s) => s.id === snapshot.step.name)
    const base = {seq: snapshot.step.seq, step: snapshot.step.name, spec_version: snapshot.spec_version_in, recorded}
    if (!step || step.kind !== snapshot.step.kind) {
      out.push({...base, same: false, error: `the pipeline has no ${snapshot.step.kind} step "${snapshot.step.name}"`})
      continue
    }
    if (!snapshot.spec_version_in) {
      out.push({...base, same: recorded === undefined, error: 'the step read no spec'})
      continue
    }
    try {
      const spec = await store.readSpec(snapshot.spec_version_in)
      const replayed = role.recompute(step, spec, pipeline.pipeline)
      out.push({...base, same: canonicalJson(replayed) === canonicalJson(recorded), replayed})
    } catch (error) {
      out.push({...base, same: false, error: (error as Error).message})
    }
  }
  return out
}
