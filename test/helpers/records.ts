import type {SpecDraft} from '../../src/store/store.js'

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
