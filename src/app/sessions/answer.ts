/** pipe answer: answers given to a run that waits for them. */
import {PipeError} from '../../errors.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {RunOutcome} from '../../engine/engine.js'
import {type SessionOptions, openQuestions} from './shared.js'
import {resumeSession} from './resume.js'

export interface AnswerSession extends SessionOptions {
  runId: string
  answers: Record<string, string>
  fileRunId?: string
  /** Go on with a replayed cassette that changed since the run started (recorded). */
  acceptCassette?: boolean
}

/** Checks answers against the questions the run waits for (in resumeSession); the run is left as it was on any error. */
export async function answerSession(options: AnswerSession): Promise<RunOutcome> {
  if (options.fileRunId && options.fileRunId !== options.runId) {
    const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
    openQuestions(await store.readRun(options.runId))
    throw new PipeError('E_INVALID_ARGS', `the answers are for run ${options.fileRunId}, not ${options.runId}`, {
      hint: 'Use the answers file written for this run.',
    })
  }
  const {answers, fileRunId: _fileRunId, ...rest} = options
  return resumeSession({...rest, command: `pipe answer ${options.runId} --file FILE`, answerMap: answers})
}
