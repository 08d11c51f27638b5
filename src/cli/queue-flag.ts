/** The name of a queue (pipe run --detach --queue, pipe worker --queue): one word that a command line can carry as it is printed. */
import {PipeError} from '../errors.js'

const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/

/**
 * A queue's name is printed in commands to copy (`pipe worker --queue NAME`) and compared exactly:
 * an empty name, or one with spaces or shell characters, would queue runs that no worker started
 * from a printed command takes.
 */
export function checkQueue(input: string): string {
  if (!QUEUE_NAME.test(input))
    throw new PipeError('E_INVALID_ARGS', `${JSON.stringify(input)} is not a queue name`, {
      hint: 'A queue name is 1 to 63 letters, digits, dots, dashes or underscores, starting with a letter or digit (default, nightly, gpu-1).',
    })
  return input
}
