/** `pipe worker`: the team store's queue and the engine, a long-lived process. */
import {commandsOf} from '../main.js'

export const {group, execute, describe} = commandsOf('worker', {
  worker: () => import('../../commands/worker.js'),
})
