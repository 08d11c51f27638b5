/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * What a model returns for a compile step: the spec's fields, each supported by citations of the input.
 */
export interface CompileReply {
  /**
   * A short title for the requirement.
   */
  title: string
  /**
   * One or two sentences: who benefits, and how. Empty when the input does not say.
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
  open_questions: string[]
  citations: {
    /**
     * The field the excerpt supports, e.g. goal, features[0], acceptance_criteria[1].
     */
    spec_path: string
    /**
     * An exact quotation of the input, at most 500 characters.
     */
    excerpt: string
  }[]
}
