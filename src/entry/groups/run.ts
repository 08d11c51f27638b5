/** What starts, moves or reads a run through the engine: the engine, the steps, the providers and the store. */
import {commandsOf} from '../main.js'

export const {group, execute, describe} = commandsOf('run', {
  answer: () => import('../../commands/answer.js'),
  budget: () => import('../../commands/budget.js'),
  cancel: () => import('../../commands/cancel.js'),
  confirm: () => import('../../commands/confirm.js'),
  publish: () => import('../../commands/publish.js'),
  replay: () => import('../../commands/replay.js'),
  resume: () => import('../../commands/resume.js'),
  review: () => import('../../commands/review.js'),
  rollback: () => import('../../commands/rollback.js'),
  run: () => import('../../commands/run.js'),
  'runs:list': () => import('../../commands/runs/list.js'),
  'runs:show': () => import('../../commands/runs/show.js'),
  'schedule:list': () => import('../../commands/schedule/list.js'),
  'schedule:run-due': () => import('../../commands/schedule/run-due.js'),
  test: () => import('../../commands/test.js'),
})
