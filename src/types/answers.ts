/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * Answers to a run's clarifying questions. Each key is a question id or the spec field the question is about (acceptance_criteria); each value is the answer text.
 */
export interface Answers {
  /**
   * The run these answers are for; checked when given.
   */
  run_id?: string
  answers: {
    [k: string]: string | undefined
  }
}
