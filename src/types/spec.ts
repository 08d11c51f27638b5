/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * This interface was referenced by `CanonicalSpec`'s JSON-Schema
 * via the `definition` "stringList".
 */
export type StringList = string[]

/**
 * One immutable version of a feature's canonical spec. A step that changes the spec writes a new version; old versions never change.
 */
export interface CanonicalSpec {
  meta: {
    spec_version: string
    feature_id: string
    /**
     * draft: key fields are missing (partial success); compiled, clarified, planned, verified: the last step that changed it.
     */
    status: 'draft' | 'compiled' | 'clarified' | 'planned' | 'verified'
    parent_version: string | null
    /**
     * sha256 of the canonical JSON of this spec with content_hash removed.
     */
    content_hash: string
    run_id: string
    created_by_step: string
    created_at: string
    title?: string
    /**
     * Key fields the step could not fill (partial success).
     */
    missing_fields?: string[]
    /**
     * sha256 of each top-level field (meta without its hashes), so that pipe audit verify can name the field that changed.
     */
    field_hashes?: {
      [k: string]: string | undefined
    }
  }
  goal: string
  features: {
    id: string
    title: string
    description?: string
    priority: 'P0' | 'P1' | 'P2'
    story?: {
      role: string
      want: string
      so_that?: string
    }
    /**
     * Where the item came from: input, answer or model.
     */
    source?: string
  }[]
  constraints: TextItem[]
  non_functional: {
    id: string
    category:
      | 'performance'
      | 'security'
      | 'reliability'
      | 'usability'
      | 'maintainability'
      | 'compatibility'
      | 'scalability'
      | 'compliance'
      | 'other'
    text: string
    source?: string
  }[]
  acceptance_criteria: {
    id: string
    text: string
    given?: string
    when?: string
    then?: string
    feature_ids?: string[]
    source?: string
  }[]
  open_questions: {
    id: string
    /**
     * The spec field the question is about.
     */
    field?: string
    question: string
    status: 'open' | 'answered'
    answer?: string
  }[]
  tasks: Task[]
  vv: {
    id: string
    kind: 'verification' | 'validation'
    method: 'test' | 'inspection' | 'analysis' | 'demonstration'
    description: string
    acceptance_criteria: string[]
    tasks: string[]
    /**
     * Features or non-functional requirements this item covers.
     */
    requirements?: string[]
  }[]
  /**
   * Sections of your own, written by model steps' spec_path: any JSON under a lower-case name. Absent until a step writes one.
   */
  sections?: {
    [k: string]: unknown | undefined
  }
}
/**
 * This interface was referenced by `CanonicalSpec`'s JSON-Schema
 * via the `definition` "textItem".
 */
export interface TextItem {
  id: string
  text: string
  source?: string
}
/**
 * A task with its definition of done (seed 004, section 4).
 *
 * This interface was referenced by `CanonicalSpec`'s JSON-Schema
 * via the `definition` "task".
 */
export interface Task {
  id: string
  title: string
  goal: string
  type: 'create_file' | 'modify_file' | 'refactor' | 'add_test' | 'wiring' | 'docs'
  priority?: 'P0' | 'P1' | 'P2'
  feature_ids?: StringList
  acceptance_criteria?: StringList
  depends_on?: StringList
  inputs: {
    files_required: StringList
    context_queries: StringList
  }
  expected_changes: {
    files_touched: StringList
    interfaces_affected: StringList
  }
  constraints: {
    forbidden_paths: StringList
    forbidden_actions: StringList
  }
  acceptance_tests: {
    static_checks: StringList
    unit_tests: StringList
    smoke_tests: StringList
    expected_signals: StringList
  }
  rollback_plan: {
    strategy: 'git_reset' | 'snapshot_restore'
  }
  max_retries: number
}
