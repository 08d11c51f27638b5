/**
 * Run records (runs/R/run.json, a lowdb document written atomically), their creation and their
 * ownership. A run is created whole: built in a staging folder, indexed, then renamed into place.
 * Every change of a record is on its timeline (timeline.ts): the line first (binding the record's
 * new state), then the record, sealed with the new head (timeline length and last hash, last
 * snapshot seq and hash).
 */
import {randomBytes} from 'node:crypto'
import {mkdirSync, renameSync, statSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {Low} from 'lowdb'
import {PipeError} from '../../errors.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import {faultPoint} from '../../util/faults.js'
import {readdir, rename, rm, stat} from '../../util/fs-async.js'
import {runNotFound} from './archive.js'
import {acquireLock, lockHolder, newLock, processAlive} from '../../util/lock.js'
import {FeatureHashes} from './features.js'
import {wellFormed, within, writeSynced, type FileLayout} from './files.js'
import {childrenAmong} from '../trail/listing.js'
import {allocateId, allocationDay, compareIds, ID_PATTERNS} from './ids.js'
import {lineText, recordText} from '../trail/records.js'
import {newRun, runChange, runIndexLine, type RunStart} from '../trail/runs.js'
import {AtomicJsonFile} from './json-file-adapter.js'
import {snapshotHead} from './snapshots.js'
import {appendLine} from './timeline.js'
import {appendChained, readChain, readText, stagedRun} from './trail.js'
import type {Release, RunDraft, RunHolder} from '../types.js'
import {makeDirs} from '../../util/fs.js'

type Start = RunStart

export class Runs {
  private auditDirMade = false
  private readonly featureHashes: FeatureHashes
  /** Settles when the last run-index lock this store asked for is released (see lockRunIndex). */
  private indexQueue: Promise<void> = Promise.resolve()
  private creationsFinished: Promise<void> | undefined

  constructor(private readonly layout: FileLayout) {
    this.featureHashes = new FeatureHashes(layout)
  }

  /**
   * Creates a run whole, with its first timeline line (and with `start`, its start line and its
   * owner lock, so no other process ever sees it unowned): the folder is built under a staging
   * name, the run is added to the run index, then the folder is renamed into place. A crash before
   * the index line leaves only a staging folder (removed by pipe audit verify); a crash after it
   * leaves a complete staging folder that audit verify renames into place. Creations are serialised
   * by the index's lock, which also keeps the index chain linear.
   */
  async create(draft: RunDraft, now: Date, event: RunEvent, start: Start | undefined): Promise<{record: RunRecord; release?: Release}> {
    const layout = this.layout
    if (!this.auditDirMade) {
      makeDirs(layout.auditDir)
      this.auditDirMade = true
    }
    const release = await this.lockRunIndex()
    try {
      await this.finishCreations(true)
      let made: {record: RunRecord; release?: Release} | undefined
      const featureHash = await this.featureHashes.of(draft.feature_id)
      await allocateId(layout.idsDir, 'R', await allocationDay(layout.idsDir, 'R', now), async (id) => {
        const final = within(layout.runsDir, id)
        // Without throwing for the usual answer (no such run yet): a thrown ENOENT costs more than the stat.
        if (statSync(final, {throwIfNoEntry: false}) !== undefined) return false
        const staging = within(layout.runsDir, `.new-${id}.${process.pid}.${randomBytes(4).toString('hex')}`)
        // Synchronous, like the writes below (util/fs.ts says why): a run's creation is a dozen small calls.
        makeDirs(staging)
        mkdirSync(within(staging, 'snapshots'))
        const {record, lines} = newRun(id, draft, event, start)
        const last = lines.at(-1)!
        writeSynced(within(staging, 'events.jsonl'), lines.map((l) => `${lineText(l)}\n`).join(''))
        writeSynced(within(staging, 'run.json'), recordText(record))
        // The lock needs no sync: after a crash, a lock of a dead process is taken over anyway.
        const lock = start ? newLock() : undefined
        if (lock) writeFileSync(within(staging, 'owner.lock'), lock.text, {flag: 'wx'})
        faultPoint('run-staged')
        // Before the index line: a child a crash leaves indexed but staged is finished into place
        // (finishCreations) and must be found; a marker of one never indexed names no child of it.
        if (draft.parent) await this.noteChild(draft.parent.run_id, id)
        await appendChained(layout.runIndexFile, runIndexLine(record, featureHash))
        faultPoint('run-indexed')
        renameSync(staging, final)
        if (lock) {
          // Held from birth: what this store wrote is what is on disk (see FileLayout.owned).
          layout.owned.set(id, {record: structuredClone(record), timeline: {count: lines.length, hash: last.hash}, head: {seq: 0, snapshot_hash: null}})
          const releaseLock = lock.releaserOf(within(final, 'owner.lock'))
          made = {
            record,
            release: async () => {
              layout.owned.delete(id)
              await releaseLock()
            },
          }
        } else made = {record}
        return true
      })
      return made!
    } finally {
      await release()
    }
  }

  /**
   * The run index's lock file, taken by one creation of this process at a time: the creations of
   * one process (a foreach's children) queue here instead of polling the lock file against each
   * other, which costs a failed exclusive create, a read of the holder and a 50 ms wait each time.
   */
  private async lockRunIndex(): Promise<Release> {
    const previous = this.indexQueue
    let done!: () => void
    this.indexQueue = new Promise<void>((resolve) => (done = resolve))
    await previous
    try {
      const release = await acquireLock(path.join(this.layout.auditDir, 'runs.lock'), {
        waitMs: 60000,
        busy: (holder) => `another pipe process (pid ${holder.pid}) is creating a run and holds the run index`,
        hint: 'Try again in a moment.',
      })
      return async () => {
        try {
          await release()
        } finally {
          done()
        }
      }
    } catch (error) {
      done()
      throw error
    }
  }

  /**
   * Finishes the run creations a killed process left staged (see create), once per store: one it
   * indexed is complete and is renamed into place, so a resumed parent finds the child it created
   * and no later creation takes its id; one it never indexed never became a run and is removed.
   * `pipe audit verify` does the same and reports it; this makes a resume independent of whether it
   * ran first. A staging folder whose creator is alive is left alone.
   */
  async finishCreations(locked = false): Promise<void> {
    const layout = this.layout
    this.creationsFinished ??= (async () => {
      const names = await readdir(layout.runsDir).catch(() => [] as string[])
      const dead = names.map((name) => ({name, staged: stagedRun(name)})).filter((n) => n.staged !== null && !processAlive(n.staged.pid))
      if (dead.length === 0) return
      const release = locked ? null : await this.lockRunIndex()
      try {
        const indexed = new Set(readChain((await readText(layout.runIndexFile)) ?? '', undefined).lines.map((l) => l['run_id']))
        for (const {name, staged} of dead) {
          const from = path.join(layout.runsDir, name)
          const to = path.join(layout.runsDir, staged!.runId)
          const taken = await stat(to).then(
            () => true,
            () => false,
          )
          // Another process may have finished it first: then there is nothing to do.
          if (indexed.has(staged!.runId) && !taken) await rename(from, to).catch(() => undefined)
          else if (!indexed.has(staged!.runId)) await rm(from, {recursive: true, force: true})
        }
      } finally {
        await release?.()
      }
    })()
    return this.creationsFinished
  }

  private db(runId: string): Low<RunRecord> {
    return new Low<RunRecord>(new AtomicJsonFile<RunRecord>(within(this.layout.runDir(runId), 'run.json')), null as unknown as RunRecord)
  }

  async read(runId: string): Promise<RunRecord> {
    const dir = this.layout.runDir(runId)
    const db = this.db(runId)
    const file = within(dir, 'run.json')
    try {
      await db.read()
    } catch (error) {
      if (error instanceof SyntaxError)
        throw new PipeError('E_INTEGRITY', `run record of ${runId} is not valid JSON (${file})`, {
          hint: 'The file was changed outside pipe; run pipe audit verify to see all damage.',
        })
      throw error
    }
    if (db.data === null && !statSync(file, {throwIfNoEntry: false})) {
      const exists = await readdir(dir).then(
        () => true,
        () => false,
      )
      if (!exists) throw runNotFound(this.layout, runId)
      throw new PipeError('E_NOT_FOUND', `run ${runId} was never completely created (no run.json)`, {
        hint: 'pipe runs list shows the runs of this store.',
      })
    }
    return wellFormed<RunRecord>('run', db.data, `the run record of ${runId}`, file)
  }

  /** Refuses a run id that names no run folder (E_NOT_FOUND), without reading its records. */
  async assertExists(runId: string): Promise<void> {
    if (!statSync(this.layout.runDir(runId), {throwIfNoEntry: false})?.isDirectory()) throw runNotFound(this.layout, runId)
  }

  /**
   * Read-modify-write of a run record; only the process that owns the run calls it. The event is
   * appended first (binding the record's new state), then the record is written with the new head
   * and sealed. A crash between the two leaves a timeline one line ahead of the record, which audit
   * verify accepts as a change in flight.
   */
  async update(runId: string, change: (record: RunRecord) => void, event: RunEvent): Promise<RunRecord> {
    if (this.layout.owned.has(runId)) return this.write(runId, change, event)
    // A run this store does not hold is written under its lock, for this write alone: its holder
    // appends to the timeline from the tail it wrote itself, so a line added beside it would fork
    // the chain. A live holder makes this write fail (E_CONFLICT) rather than damage the run.
    const release = await this.acquire(runId)
    try {
      return await this.write(runId, change, event)
    } finally {
      await release()
    }
  }

  private async write(runId: string, change: (record: RunRecord) => void, event: RunEvent): Promise<RunRecord> {
    const layout = this.layout
    const owned = layout.owned.get(runId)
    const db = this.db(runId)
    try {
      if (owned?.record) db.data = structuredClone(owned.record)
      else {
        await db.read()
        if (db.data !== null) db.data = wellFormed<RunRecord>('run', db.data, `the run record of ${runId}`, within(layout.runDir(runId), 'run.json'))
      }
      if (!db.data) throw new PipeError('E_NOT_FOUND', `run ${runId} not found`)
      const changed = runChange(db.data, change, event)
      // Chained to the timeline's last line and counted from it, not from the record's head: after a
      // crash between the two writes the timeline is a line ahead, and this change completes it.
      const line = await appendLine(layout, runId, changed.line)
      const tip = owned?.head ?? (await snapshotHead(layout, runId))
      db.data = changed.sealed({events: line.count, event_hash: line.hash, ...tip})
      await db.write()
      if (owned) Object.assign(owned, {record: structuredClone(db.data), timeline: line, head: tip})
      return db.data
    } catch (error) {
      // What failed may have been written in part: learn it all from disk again.
      if (owned) layout.owned.set(runId, {})
      throw error
    }
  }

  /**
   * The children of a run as its folder's `children/` names them: one empty file per child, made
   * when the child is created (under the run index's lock, before its folder is in place), so that
   * finding a run's children reads them and not every run of the store. A store made before this
   * index existed gets it built once, from every run record, the first time it is asked.
   */
  async children(runId: string): Promise<RunRecord[]> {
    await this.childIndexReady()
    const names = await readdir(within(this.layout.runDir(runId), 'children')).catch(() => [] as string[])
    const records = await Promise.all(names.filter((n) => ID_PATTERNS.run.test(n)).map((id) => this.read(id).catch(() => null)))
    return childrenAmong(records, runId)
  }

  private childIndexBuilt = false

  private get childIndexFlag(): string {
    return within(this.layout.auditDir, 'children-indexed')
  }

  /** Builds the children index of a store made before it existed (see children); once per store. */
  private async childIndexReady(): Promise<void> {
    if (this.childIndexBuilt || statSync(this.childIndexFlag, {throwIfNoEntry: false})) {
      this.childIndexBuilt = true
      return
    }
    const release = await this.lockRunIndex()
    try {
      if (statSync(this.childIndexFlag, {throwIfNoEntry: false})) return
      for (const id of await this.list()) {
        const parent = (await this.read(id).catch(() => null))?.parent?.run_id
        if (parent && ID_PATTERNS.run.test(parent)) await this.noteChild(parent, id)
      }
      makeDirs(this.layout.auditDir)
      writeSynced(this.childIndexFlag, '')
    } finally {
      await release()
    }
    this.childIndexBuilt = true
  }

  /** Names `child` in its parent's children index (synced: a foreach that re-enters finds its children by it). */
  private async noteChild(parent: string, child: string): Promise<void> {
    // Never a folder for a parent that is not there (a record naming one changed by hand).
    if (!statSync(this.layout.runDir(parent), {throwIfNoEntry: false})?.isDirectory()) return
    const dir = within(this.layout.runDir(parent), 'children')
    makeDirs(dir)
    const marker = within(dir, child)
    if (!statSync(marker, {throwIfNoEntry: false})) writeSynced(marker, '')
  }

  async list(): Promise<string[]> {
    const names = await readdir(this.layout.runsDir).catch(() => [] as string[])
    return names.filter((name) => ID_PATTERNS.run.test(name)).sort((a, b) => compareIds(b, a))
  }

  /** Ownership: one process drives a run at a time. */
  async acquire(runId: string): Promise<Release> {
    const layout = this.layout
    const release = await acquireLock(within(layout.runDir(runId), 'owner.lock'), {
      busy: (holder) => `run ${runId} is being driven by another pipe process (pid ${holder.pid})`,
      hint: 'Wait for it to finish, or stop it; pipe runs show shows its state.',
    }).catch((error: unknown) => {
      // No folder to lock in: the run is not here, or has just left it (another pipe store archive moved it).
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw runNotFound(layout, runId)
      throw error
    })
    // Whatever another process did before this lock was taken is learnt from disk.
    layout.owned.set(runId, {})
    return async () => {
      layout.owned.delete(runId)
      await release()
    }
  }

  async owner(runId: string): Promise<RunHolder | null> {
    return lockHolder(within(this.layout.runDir(runId), 'owner.lock'))
  }
}
