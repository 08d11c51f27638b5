/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * One question for each missing field.
 */
export interface ClarifyReply {
  questions: {
    /**
     * The missing field the question is about, exactly as listed.
     */
    field: string
    question: string
  }[]
}
