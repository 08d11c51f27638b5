/** Who this process is as the holder of a run's lease: recorded on the run's row, shown by pipe runs show. */
import {randomBytes} from 'node:crypto'
import os from 'node:os'
import {nameThisProcess, processName} from '../../util/process-name.js'

/** The name this process gives itself as a holder (pipe worker --name). */
export function nameHolder(name: string | undefined): void {
  nameThisProcess(name)
}

export interface Holder {
  pid: number
  host: string
  /** Tells this holding apart from another of the same process. */
  token: string
  name?: string
}

export const holderOf = (): Holder => {
  const name = processName()
  return {pid: process.pid, host: os.hostname(), token: randomBytes(8).toString('hex'), ...(name ? {name} : {})}
}
