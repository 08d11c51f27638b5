import {expect} from 'chai'
import type {PipeError} from '../../src/errors.js'

/** Awaits a promise that must reject with a PipeError of `code`, and returns the error. */
export async function expectPipeError(promise: Promise<unknown>, code: string): Promise<PipeError> {
  try {
    await promise
  } catch (error) {
    expect((error as PipeError).code, (error as Error).message).to.equal(code)
    return error as PipeError
  }
  throw new Error(`expected a PipeError ${code}`)
}
