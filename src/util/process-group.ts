/** Signals a whole process group (a child started with `detached: true` leads its own). */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return
  try {
    process.kill(-pid, signal)
  } catch {
    // The group is gone already.
  }
}
