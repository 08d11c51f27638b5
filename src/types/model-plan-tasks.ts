/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * Tasks with a definition of done, linked to the spec's feature and acceptance-criteria ids.
 */
export interface PlanTasksReply {
  /**
   * @minItems 1
   */
  tasks: [
    {
      title: string
      goal: string
      type: 'create_file' | 'modify_file' | 'refactor' | 'add_test' | 'wiring' | 'docs'
      priority: 'P0' | 'P1' | 'P2'
      feature_ids: string[]
      acceptance_criteria: string[]
      /**
       * Titles of tasks that must be done first.
       */
      depends_on: string[]
      files_touched: string[]
      static_checks: string[]
      unit_tests: string[]
      smoke_tests: string[]
      /**
       * @minItems 1
       */
      expected_signals: [string, ...string[]]
    },
    ...{
      title: string
      goal: string
      type: 'create_file' | 'modify_file' | 'refactor' | 'add_test' | 'wiring' | 'docs'
      priority: 'P0' | 'P1' | 'P2'
      feature_ids: string[]
      acceptance_criteria: string[]
      /**
       * Titles of tasks that must be done first.
       */
      depends_on: string[]
      files_touched: string[]
      static_checks: string[]
      unit_tests: string[]
      smoke_tests: string[]
      /**
       * @minItems 1
       */
      expected_signals: [string, ...string[]]
    }[]
  ]
}
