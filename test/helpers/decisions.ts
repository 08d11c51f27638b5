/**
 * What the tests of a person's decisions share (approvals, confirmation deadlines, decisions on
 * pipe view's page): a command step that waits for a confirmation, the --json of a run that
 * stopped, and a clock two hours on for the commands that must find a deadline passed.
 */
import type {RunEvent} from '../../src/types/run.js'
import {clockAt, LIBFAKETIME} from './tools.js'

/**
 * The environment of a process whose clock is two hours on: past any deadline of these tests' runs,
 * so no test waits for one. Suites that use it call needs(this, 'faketime') first.
 */
export const LATER = LIBFAKETIME ? clockAt('+2h') : {}

/** What a run's command prints with --json, as far as these tests read it. */
export interface RunJson {
  run_id: string
  status: string
  reason?: string
  pending?: {kind: string; deadline?: string; on_timeout?: string}
  error?: {code: string; message: string; hint?: string}
}

/** A pipeline of one command step a person must confirm; a refusal is routed to an end of its own, whose reason is `refused`. */
export function confirmedPipeline(name: string, refused = 'the step was refused'): string {
  return `version: 1
name: ${name}
steps:
  - id: touch
    kind: command
    run: [node, -e, "require('fs').writeFileSync('made.txt', 'ran')"]
    confirm: true
    on: {denied: refused, failure: refused}
    next: done
  - {id: refused, kind: end, status: succeeded, reason: ${refused}}
  - {id: done, kind: end, status: succeeded, reason: it ran}
`
}

/** Who voted at a run's gates (its vote_cast events), sorted: two votes cast at once land in either order. */
export function votersOf(timeline: readonly RunEvent[]): Array<string | undefined> {
  return timeline
    .filter((e) => e.event === 'vote_cast')
    .map((e) => e.by)
    .sort()
}
