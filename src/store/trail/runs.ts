/**
 * A run's records as every store writes them: the record at its creation (with its first timeline
 * lines and its run index line), after a change (with the timeline line that binds its new state),
 * and after a step moved its head. Pure: a store only keeps what these return, and how it orders
 * concurrent creations (a lock, a counter row) is its own.
 */
import type {RunEvent, RunRecord} from '../../types/run.js'
import {runCreationFacts, runCreationHash, runRecordSealer, sealLine} from './integrity.js'
import type {RunDraft} from '../types.js'

type Plain = Record<string, unknown>

/** What createStartedRun applies to a new run: the start line and the change it records. */
export interface RunStart {
  event: RunEvent
  change: (record: RunRecord) => void
}

export type TimelineLine = RunEvent & {run_state: string; prev: string | null; hash: string}

/** The workspace a queued run needs, bound by its run index line (see PostgresStore). */
export interface BoundWorkspace {
  id: string
  root: string
  sub: string
}

/**
 * A new run under `id`: its sealed record and its first timeline lines (the creation, and with
 * `start` the start, each binding the state it leaves). Its head names those lines and no snapshot.
 */
export function newRun(id: string, draft: RunDraft, event: RunEvent, start: RunStart | undefined): {record: RunRecord; lines: TimelineLine[]} {
  const fresh = {run_id: id, ...draft} as RunRecord
  let sealer = runRecordSealer(fresh as unknown as Plain)
  const lines = [sealLine({...event, run_state: sealer.stateHash}, null)]
  let state = fresh
  if (start) {
    state = structuredClone(fresh)
    start.change(state)
    sealer = runRecordSealer(state as unknown as Plain)
    lines.push(sealLine({...start.event, run_state: sealer.stateHash}, lines[0]!.hash))
  }
  const head = {events: lines.length, event_hash: lines.at(-1)!.hash, seq: 0, snapshot_hash: null}
  return {record: {...state, head, seal: sealer.seal(head)}, lines}
}

/**
 * The run index line of a new run, before it is chained: what the run was created with, bound
 * whole (created_hash) and fact by fact, and the file of its feature (null: none yet).
 */
export function runIndexLine(record: RunRecord, featureHash: string | null, workspace?: BoundWorkspace): Plain {
  return {
    run_id: record.run_id,
    feature_id: record.feature_id,
    feature_hash: featureHash,
    created_hash: runCreationHash(record as unknown as Plain),
    created_facts: runCreationFacts(record as unknown as Plain),
    // The workspace a worker relocates the run into: bound here, so that what picks the workers
    // (a row's columns) cannot send a run to another repository or folder.
    ...(workspace ? {workspace: {id: workspace.id, root: workspace.root, sub: workspace.sub}} : {}),
  }
}

/** Where a run's timeline and snapshots end: what its record's head names. */
export type RunHead = {
  events: number
  event_hash: string | null
  seq: number
  snapshot_hash: string | null
}

/**
 * A change of a run: the changed state, checked; the timeline line that records `event` and binds
 * that state, not yet chained; and the record sealed with a head. For a store that learns where its
 * timeline and snapshots end only as it appends (the file store: a crash can leave its timeline a
 * line ahead of the record, which the next change completes).
 */
export function runChange(
  current: RunRecord,
  change: (record: RunRecord) => void,
  event: RunEvent,
): {line: RunEvent & {run_state: string}; sealed: (head: RunHead) => RunRecord} {
  const {head: _h, seal: _s, ...state} = structuredClone(current)
  const changed = {...state} as RunRecord
  change(changed)
  // Built by pipe's typed code: not checked against the schema again (it is when read back).
  const {head: _h2, seal: _s2, ...clean} = changed
  const sealer = runRecordSealer(clean)
  return {line: {...event, run_state: sealer.stateHash}, sealed: (head) => ({...clean, head, seal: sealer.seal(head)})}
}

/**
 * A change of a run whose timeline ends at `current.head`: the line that records `event` and binds
 * the changed state, and the record sealed with the head that line gives it.
 */
export function changedRun(current: RunRecord, change: (record: RunRecord) => void, event: RunEvent): {record: RunRecord; line: TimelineLine; n: number} {
  const {line: unchained, sealed} = runChange(current, change, event)
  const head = current.head
  const line = sealLine(unchained, head?.event_hash ?? null)
  const n = (head?.events ?? 0) + 1
  return {record: sealed({events: n, event_hash: line.hash, seq: head?.seq ?? 0, snapshot_hash: head?.snapshot_hash ?? null}), line, n}
}

/** The run record sealed again with its head moved to the snapshot just committed; unchanged when its head is past it. */
export function movedHead(record: RunRecord, seq: number, snapshotHash: string | null): RunRecord | null {
  if ((record.head?.seq ?? 0) >= seq) return null
  const {head, seal: _s, ...state} = record
  const next = {events: head?.events ?? 0, event_hash: head?.event_hash ?? null, seq, snapshot_hash: snapshotHash}
  return {...state, head: next, seal: runRecordSealer(state).seal(next)}
}
