/** pipe answer: answers given to a run that waits for them. */
import {PipeError} from '../../errors.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {RunOutcome} from '../../engine/engine.js'
import {type SessionOptions, openQuestions} from './shared.js'
import {resumeSession} from './resume.js'
import {applyPassedDeadline, tooLate} from './confirm-deadline.js'
import {castVote} from './vote.js'
import {checkAnswers} from '../../config/answers.js'

export interface AnswerSession extends SessionOptions {
  runId: string
  answers: Record<string, string>
  fileRunId?: string
  /** Go on with a replayed cassette that changed since the run started (recorded). */
  acceptCassette?: boolean
  /** Decide under the name of a key the run's policy trusts (--as NAME): only with that key as one's signing key. */
  as?: string
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
  // Answers after a deadline the policy acts on come too late: the policy decided.
  const applied = await applyPassedDeadline(options)
  if (applied?.due.action) throw tooLate(options.runId, applied)
  const {answers, fileRunId: _fileRunId, as: _as, ...rest} = options
  // Checked before the vote is counted: a vote for answers the run would refuse must not be recorded.
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  checkAnswers(answers, openQuestions(await store.readRun(options.runId)))
  return castVote(options, {kind: 'answers', decision: 'answered', approve: true, note: `answers ${JSON.stringify(answers)}`}, (user, signed) =>
    resumeSession({
      ...rest,
      ...(user !== undefined ? {user} : {}),
      ...(signed ? {signed} : {}),
      gateDecided: true,
      command: `pipe answer ${options.runId} --file FILE`,
      answerMap: answers,
    }),
  )
}
