/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * Verification and validation items linked to acceptance criteria, requirements and tasks by id.
 */
export interface GenerateVvReply {
  /**
   * @minItems 1
   */
  vv: [
    {
      kind: 'verification' | 'validation'
      method: 'test' | 'inspection' | 'analysis' | 'demonstration'
      description: string
      acceptance_criteria: string[]
      tasks: string[]
      requirements: string[]
    },
    ...{
      kind: 'verification' | 'validation'
      method: 'test' | 'inspection' | 'analysis' | 'demonstration'
      description: string
      acceptance_criteria: string[]
      tasks: string[]
      requirements: string[]
    }[]
  ]
}
