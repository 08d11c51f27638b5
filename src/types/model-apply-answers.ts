/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * The items each answer adds to the spec, with citations of the answers.
 */
export interface ApplyAnswersReply {
  /**
   * The new goal when an answer states it; empty to keep the current one.
   */
  goal: string
  features: {
    title: string
    description?: string
    priority: 'P0' | 'P1' | 'P2'
  }[]
  constraints: string[]
  non_functional: {
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
  }[]
  acceptance_criteria: {
    text: string
    given?: string
    when?: string
    then?: string
  }[]
  citations: {
    question_id: string
    spec_path: string
    excerpt: string
  }[]
}
