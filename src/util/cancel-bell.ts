/**
 * The doorbell `pipe cancel` rings at a process that drives a run: "a run you drive may have been
 * asked to stop". The signal names no run, and one process may drive a parent and its children,
 * so each walk reads its own run's request from the store (RunStore.cancelRequest) and only the
 * run asked for stops; SIGTERM would stop them all, as interrupted.
 */
export const CANCEL_SIGNAL: NodeJS.Signals = 'SIGUSR2'

const listeners = new Set<() => void>()

/** Calls `listener` each time the bell rings; returns the unsubscribe. */
export function onCancelBell(listener: () => void): () => void {
  listeners.add(listener)
  return () => void listeners.delete(listener)
}

export function ringCancelBell(): void {
  for (const listener of [...listeners]) listener()
}
