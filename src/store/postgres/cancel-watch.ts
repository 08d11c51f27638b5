/**
 * Who in this process wants to know that a run it holds was asked to stop (TeamQueue.requestCancel):
 * a request is seen at the lease's next renewal, the run's next commit, or a notice
 * (PostgresWork.listen), whichever comes first, and its watcher is told once.
 */
export class CancelWatch {
  private readonly watchers = new Map<string, (reason: string) => void>()

  /** Calls `stop` once when a cancel request for the run is seen. Returns the unwatch. */
  watch(runId: string, stop: (reason: string) => void): () => void {
    this.watchers.set(runId, stop)
    return () => {
      if (this.watchers.get(runId) === stop) this.watchers.delete(runId)
    }
  }

  /** A cancel request seen for a run (null: none): its watcher, if any, is told and forgotten. */
  seen(runId: string, reason: string | null): void {
    if (reason === null) return
    const stop = this.watchers.get(runId)
    if (!stop) return
    this.watchers.delete(runId)
    stop(reason)
  }
}
