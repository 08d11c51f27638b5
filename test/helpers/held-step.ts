/**
 * A run held in the middle of a step, for tests of what shows a running step: its second step
 * touches `started` (so the test knows the step began, and that its start was recorded before)
 * and then waits until the FIFO `gate` is written. Nothing here waits on time.
 */
import {execFileSync} from 'node:child_process'
import {closeSync, constants, openSync, writeSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

const POLICY = 'version: 1\nallowed_commands:\n  - [sh, -c, "{arg}"]\nsandbox: off\nmax_retries_default: 0\n'
/** First a quick step, then one that says it started (a file) and waits until the FIFO `gate` is written. */
const PIPELINE = `version: 1
name: held
steps:
  - {id: quick, kind: command, run: [sh, -c, "true"], next: wait}
  - {id: wait, kind: command, run: [sh, -c, "touch started && read x < gate"], next: done}
  - {id: done, kind: end, status: succeeded, reason: all steps ran}
`

export async function prepareHeldStep(dir: string): Promise<{pipeline: string; policy: string}> {
  const pipeline = path.join(dir, 'held.yaml')
  const policy = path.join(dir, 'policy.yaml')
  await writeFile(pipeline, PIPELINE)
  await writeFile(policy, POLICY)
  execFileSync('mkfifo', [path.join(dir, 'gate')])
  return {pipeline, policy}
}

/** Lets the waiting step go on, if it still waits: a FIFO with no reader is left as it is (ENXIO), so nothing blocks here. */
export function openGate(dir: string): boolean {
  let fd: number
  try {
    fd = openSync(path.join(dir, 'gate'), constants.O_WRONLY | constants.O_NONBLOCK)
  } catch {
    return false
  }
  writeSync(fd, 'go\n')
  closeSync(fd)
  return true
}
