/**
 * The one door every record passes on its way into a store (the file store and PostgreSQL alike):
 * runs, timeline lines, snapshots, spec versions, evidence, features and step states are redacted
 * here, before the store seals them. A record is sealed and append-only: a secret that reached one
 * could never be scrubbed without breaking its seal, so nothing a store writes is trusted to have
 * been masked field by field upstream (a pause's reason, a decision, a hint, an error message are
 * composed from resolved values). A team store's queue (`team`) creates runs too, and keeps a cancel
 * request's reason and a queued run's note: its writes pass the same door. The publish ledger
 * redacts its entries itself (ledger.ts).
 */
import type {RunRecord} from '../types/run.js'
import {redactDeep, redactInPlace} from '../util/redact.js'
import type {TeamQueue} from './team.js'
import type {RunStore} from './types.js'

type Change = (record: RunRecord) => void

function redactedChange(change: Change): Change {
  return (record) => {
    change(record)
    redactInPlace(record as unknown as Record<string, unknown>)
  }
}

/** `store`, with each of its writes redacted; everything else (reads, store-specific methods, instanceof) is the store's own. */
export function redacting<S extends RunStore>(store: S): S {
  const writes: {-readonly [K in keyof RunStore]?: RunStore[K]} = {
    createRun: (draft, now, event) => store.createRun(redactDeep(draft), now, redactDeep(event)),
    createStartedRun: (draft, now, created, start) =>
      store.createStartedRun(redactDeep(draft), now, redactDeep(created), {event: redactDeep(start.event), change: redactedChange(start.change)}),
    updateRun: (runId, change, event, options) => store.updateRun(runId, redactedChange(change), redactDeep(event), options),
    appendEvent: (runId, event) => store.appendEvent(runId, redactDeep(event)),
    commitStep: (commit, hook) => store.commitStep(redactDeep(commit), hook),
    createFeature: (now, title) => store.createFeature(now, redactDeep(title)),
    writeStepState: (runId, step, seq, state) => store.writeStepState(runId, step, seq, redactDeep(state)),
  }
  if (store.requestCancel) writes.requestCancel = (runId, request) => store.requestCancel!(runId, redactDeep(request))
  const team = store.team
  if (team) writes.team = redactingTeam(team)
  return new Proxy(store, {
    get(target, key, receiver): unknown {
      if (typeof key === 'string' && Object.hasOwn(writes, key)) return writes[key as keyof RunStore]
      return Reflect.get(target, key, receiver)
    },
  })
}

function redactingTeam(team: TeamQueue): TeamQueue {
  const writes: Partial<TeamQueue> = {
    createQueued: (births, queue, workspace, firing) => team.createQueued(redactDeep(births), queue, workspace, firing),
    queueChild: (options) => team.queueChild(options.create ? {...options, create: redactDeep(options.create)} : options),
    requestCancel: (runId, reason) => team.requestCancel(runId, redactDeep(reason)),
    setNote: (runId, note) => team.setNote(runId, note === null ? null : redactDeep(note)),
  }
  return new Proxy(team, {
    get(target, key, receiver): unknown {
      if (typeof key === 'string' && Object.hasOwn(writes, key)) return writes[key as keyof TeamQueue]
      return Reflect.get(target, key, receiver)
    },
  })
}
