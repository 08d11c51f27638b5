import {PipeError} from '../errors.js'
import {narrowed} from './output-schemas.js'
import type {KindFinding} from '../config/kind-contract.js'
import type {KindOutputs, StepHandler, StepOf} from './types.js'

/** The steps a choice can go to, in order, without repeats: its outcomes are their ids. */
function targets(step: StepOf<'choice'>): string[] {
  return [...new Set([...step.choices.map((c) => c.next), step.default])]
}

export const choice: StepHandler<'choice'> = {
  kind: 'choice',
  summary: 'route the run: the first choice whose when holds names the next step, else default',
  outcomes: targets,
  takesNext: () => false,
  changesSpec: false,
  // It only reads values; evaluating again gives the same answer.
  safeToRetry: true,
  // Its outcome is the step it went to: one of its targets.
  outputsSchema: (step) => narrowed('choice', {chosen: {type: 'string', enum: targets(step)}}),
  references: (step) => [
    ...step.choices.map((c, j) => ({at: ['choices', j, 'next'], target: c.next, what: `choice ${j + 1}`, route: true})),
    {at: ['default'], target: step.default, what: 'default', route: true},
  ],
  // The whens are evaluated by run, in order (a later one never once an earlier one holds).
  deferred: () => ({fields: ['choices']}),
  check(step) {
    // A choice routes by its choices: next:/on: on it would never be taken.
    const out: KindFinding[] = []
    if (step.next !== undefined)
      out.push({
        rule: 'own-routes',
        at: ['next'],
        message: 'a choice step goes where its choices say; next: is never taken (use default: for the fallback)',
        key: true,
      })
    for (const outcome of Object.keys(step.on ?? {})) {
      if (outcome !== 'error' && outcome !== 'skipped')
        out.push({
          rule: 'own-routes',
          at: ['on', outcome],
          message: 'a choice step goes where its choices say; only on.error and on.skipped apply to it',
          key: true,
        })
    }
    return out
  },
  // The whens are evaluated here, in order, so a later one is never evaluated once an earlier one holds.
  async run({step, render}) {
    // What each evaluated condition gave, recorded like the engine's resolved fields.
    const resolved: Record<string, boolean> = {}
    for (const [i, option] of step.choices.entries()) {
      const value = render(option.when)
      if (typeof value !== 'boolean') {
        throw new PipeError('E_CONFIG', `choices[${i}].when of step "${step.id}" gave ${JSON.stringify(value)}, not true or false`, {
          hint: "Write a condition, such as ${{ inputs.audience == 'customers' }}; pipe validate checks its type when it can.",
        })
      }
      resolved[`choices[${i}].when`] = value
      if (value) {
        return {
          type: 'done',
          outcome: option.next,
          next: option.next,
          reason: `choice ${i + 1} holds: ${option.when.trim()}`,
          inputs: {resolved},
          outputs: {chosen: option.next, matched: i + 1, condition: option.when} satisfies KindOutputs<'choice'>,
        }
      }
    }
    return {
      type: 'done',
      outcome: step.default,
      next: step.default,
      reason: `no choice holds; default ${step.default}`,
      inputs: {resolved},
      outputs: {chosen: step.default, matched: null, condition: ''} satisfies KindOutputs<'choice'>,
    }
  },
}
