/**
 * The in-memory store's archiving capability (RunStore.archiving; app/archive.ts holds the logic,
 * ../trail/archive.ts the format): its maps read as the archive's records, anchors appended to its
 * run index, a run's rows dropped once its anchor is there.
 */
import {PipeError} from '../../errors.js'
import {sealLine} from '../trail/integrity.js'
import {isAnchorLine, referencedIds, type ArchiveAnchor, type ArchiveSource} from '../trail/archive.js'
import {lineText} from '../trail/records.js'
import type {ArchiveStore} from '../types.js'
import type {RunRows} from './store.js'

/** The store's maps this reads and changes: the same objects the store keeps. */
export interface MemoryMaps {
  readonly runs: Map<string, RunRows>
  readonly children: Map<string, string[]>
  readonly runIndex: string[]
  readonly specs: Map<string, string>
  readonly evidence: Map<string, string>
  readonly features: Map<string, string>
  readonly ledgerEntries: Map<string, string>
  readonly ledgerLog: string[]
}

export function memoryArchiving(maps: MemoryMaps): ArchiveStore {
  const {runs: rowsOf, children, runIndex} = maps
  const anchors = async (): Promise<ArchiveAnchor[]> =>
    runIndex.map((line) => JSON.parse(line) as Record<string, unknown>).filter(isAnchorLine) as unknown as ArchiveAnchor[]
  return {
    source: async (runIds: readonly string[]): Promise<ArchiveSource> => {
      const runs = runIds.flatMap((id) => {
        const rows = rowsOf.get(id)
        if (!rows) return []
        return [
          {
            run_id: id,
            body: rows.body,
            events: [...rows.events],
            snapshots: [...rows.snapshots.entries()].map(([seq, r]) => ({seq, body: r.body})),
            states: [...rows.states.entries()].map(([key, body]) => {
              const [seq, step] = key.split('/') as [string, string]
              return {step, seq: Number(seq), body}
            }),
          },
        ]
      })
      const named = referencedIds(runs)
      const pick = (map: Map<string, string>, ids: string[]): Array<{id: string; body: string}> =>
        ids.flatMap((id) => (map.has(id) ? [{id, body: map.get(id)!}] : []))
      return {
        runs,
        specs: pick(maps.specs, named.records),
        evidence: pick(maps.evidence, named.records),
        features: pick(maps.features, named.features),
        runIndex: [...runIndex],
        ledger: [...maps.ledgerEntries.entries()].map(([key, body]) => ({key, body})),
        ledgerLog: [...maps.ledgerLog],
        artifacts: [],
      }
    },
    anchors,
    anchor: async (given: readonly ArchiveAnchor[]): Promise<void> => {
      const done = new Set((await anchors()).map((a) => a.archived))
      for (const a of given) {
        if (done.has(a.archived)) continue
        const prev = runIndex.at(-1)
        runIndex.push(lineText(sealLine({...a}, prev ? (JSON.parse(prev) as {hash: string}).hash : null)))
      }
    },
    remove: async (runId: string): Promise<void> => {
      if (!(await anchors()).some((a) => a.archived === runId)) throw new PipeError('E_INTERNAL', `${runId} has no archive anchor: its records are not removed`)
      rowsOf.delete(runId)
      children.delete(runId)
      for (const [parent, list] of children)
        children.set(
          parent,
          list.filter((id) => id !== runId),
        )
    },
    leftovers: async (): Promise<string[]> => [],
    get defaultFolder(): string | null {
      return null
    },
  }
}
