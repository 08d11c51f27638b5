import type {SpecDraft} from '../../src/store/file/store.js'
import type {RunDraft} from '../../src/store/types.js'

/** An empty compiled spec of F-2026-001 with the given goal, for store and commit tests. */
export function specDraft(goal: string, {runId = 'R-20261121-0001', at = '2026-11-21T10:00:00.000Z'}: {runId?: string; at?: string} = {}): SpecDraft {
  return {
    meta: {feature_id: 'F-2026-001', status: 'compiled', parent_version: null, run_id: runId, created_by_step: 'compile', created_at: at},
    goal,
    features: [],
    constraints: [],
    non_functional: [],
    acceptance_criteria: [],
    open_questions: [],
    tasks: [],
    vv: [],
  }
}

/** A run of pipeline `p` on the offline provider, created at `at`, for store and commit tests. */
export function runDraft(at: string, {status = 'pending', feature = 'F-2026-001'}: {status?: RunDraft['status']; feature?: string} = {}): RunDraft {
  return {
    feature_id: feature,
    status,
    pipeline: {path: '/p.yaml', name: 'p', hash: `sha256:${'a'.repeat(64)}`},
    policy_version: `sha256:${'b'.repeat(64)}`,
    provider: {kind: 'offline', model: null},
    input: {kind: 'none', ref: 'none://'},
    created_at: at,
    updated_at: at,
    owner: {pid: process.pid, host: 'h', user: 'u'},
  }
}
