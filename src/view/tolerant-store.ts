/**
 * The store as the runs list and the stats page read it: a run record that fails its checks (not
 * JSON, a field changed outside pipe) is set aside and named on the page, instead of turning every
 * page that lists runs into an error that hides all the intact ones.
 */
import {isPipeError, PipeError} from '../errors.js'
import type {RunStore} from '../store/types.js'

export interface DamagedRun {
  run_id: string
  code: string
  message: string
  hint?: string
}

/**
 * A view of `store` whose readRun answers a damaged record as absent (which listing skips) and
 * remembers it in `damaged`; everything else goes to the store itself.
 */
export function setAsideDamaged(store: RunStore, damaged: DamagedRun[]): RunStore {
  return new Proxy(store, {
    get(target, name) {
      if (name === 'readRun') {
        return async (runId: string) => {
          try {
            return await target.readRun(runId)
          } catch (error) {
            if (!isPipeError(error) || error.code !== 'E_INTEGRITY') throw error
            if (!damaged.some((d) => d.run_id === runId))
              damaged.push({run_id: runId, code: error.code, message: error.message, ...(error.hint ? {hint: error.hint} : {})})
            throw new PipeError('E_NOT_FOUND', `run ${runId} is set aside: ${error.message}`)
          }
        }
      }
      const value: unknown = Reflect.get(target, name, target)
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
    },
  })
}
