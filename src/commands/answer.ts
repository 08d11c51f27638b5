import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import path from 'node:path'
import {PipeCommand} from '../cli/base-command.js'
import {asFlag} from '../cli/decision.js'
import {askAnswers, canPrompt} from '../cli/interactive.js'
import {progressPrinter} from '../cli/progress.js'
import {finishQueued, finishRun, type QueuedResult} from '../cli/run-flow.js'
import type {RunResult} from '../cli/run-result.js'
import {withSignals} from '../cli/signals.js'
import {answersOf, loadAnswersFile} from '../config/answers.js'
import {answerSession} from '../app/sessions/answer.js'
import {PipeError} from '../errors.js'
import {clarifyRounds, type ClarifyRound} from '../store/queries.js'
import {views} from '../steps/registry.js'
import {openStore} from '../store/open.js'
import {assertId} from '../store/file/ids.js'
import {line as t, visible} from '../util/terminal-text.js'

export default class Answer extends PipeCommand {
  static override summary = "Answer a paused run's clarifying questions and continue it."
  static override description = `The answers come from a YAML file (--file), keyed by question id (Q-001) or by the spec field a question is about (acceptance_criteria); on a terminal without --file, the questions are asked one at a time. An answer to a question the run did not ask, or a question left without an answer, is an error that names it and leaves the run as it was.

--questions only shows the current round's questions; add --history to see earlier rounds and their answers, which are folded away by default. Under an approvals rule of the policy for the gate (docs/policy.md), the person (PIPE_USER, else the repository's git user.email, else the OS user) must be one the rule names, votes once, and, under self_approval: false, may not approve a run they started (E_POLICY_DENIED, naming the rule); each vote is recorded, and the run goes on only once the rule's required approvals are in. With a signing key (PIPE_SIGNING_KEY, else the default key of pipe keys generate) the decision is signed (docs/policy.md); --as NAME decides under the name of a key the run's policy trusts, only when one's signing key is that key.`
  static override examples = [
    {
      description: 'Answer as the product owner whose key the policy trusts',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --file answers.yaml --as product-owner',
    },
    {description: 'Answer from a file', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --file answers.yaml'},
    {description: 'Answer at the terminal, one question at a time', command: '<%= config.bin %> <%= command.id %> R-20261121-0002'},
    {description: 'Show the open questions and every earlier round', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --questions --history'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    file: Flags.string({char: 'f', description: 'Answers file (YAML).', helpValue: 'FILE'}),
    questions: Flags.boolean({description: 'Only show the questions; answer nothing.'}),
    history: Flags.boolean({description: 'Also show earlier clarify rounds and their answers.'}),
    'accept-cassette': Flags.boolean({
      description: 'The run replays a cassette that changed since it started: go on with it as it is now (recorded on the timeline).',
    }),
    as: asFlag,
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RunResult | QueuedResult | {run_id: string; current: ClarifyRound | null; earlier: ClarifyRound[]}> {
    const {args, flags} = await this.parse(Answer)
    assertId('run', args.run)
    const store = this.storeDir(flags.store)
    if (flags.questions) return this.showQuestions(args.run, store, flags.history)
    const session = {cwd: process.cwd(), store, onProgress: progressPrinter()}
    let answers: Record<string, string>
    let fileRunId: string | undefined
    if (flags.file) {
      const file = await loadAnswersFile(path.resolve(flags.file))
      answers = answersOf(file)
      fileRunId = file.run_id
    } else if (canPrompt(this.jsonEnabled())) {
      const record = await (await openStore(store, 'existing')).readRun(args.run)
      if (record.status !== 'awaiting_input' || record.pending?.kind !== 'answers') {
        // Let the session explain why this run takes no answers.
        answers = {}
      } else {
        await this.showQuestions(args.run, store, flags.history, true)
        const given = await askAnswers(record.pending.questions ?? [])
        if (!given)
          throw new PipeError('E_INPUT', 'input ended before every question was answered; the run is unchanged', {
            hint: `Answer later with pipe answer ${args.run}.`,
          })
        answers = given
      }
    } else {
      throw new PipeError('E_INVALID_ARGS', 'no answers given', {
        hint: `Give them in a file: pipe answer ${args.run} --file answers.yaml (pipe answer ${args.run} --questions lists the questions).`,
      })
    }
    const outcome = await withSignals((signal) =>
      answerSession({
        ...session,
        signal,
        runId: args.run,
        answers,
        ...(fileRunId ? {fileRunId} : {}),
        ...(flags['accept-cassette'] ? {acceptCassette: true} : {}),
        ...(flags.as !== undefined ? {as: flags.as} : {}),
      }),
    )
    return finishQueued(outcome, session, this.jsonEnabled()) ?? finishRun(outcome, session, this.jsonEnabled(), flags.store)
  }

  private async showQuestions(
    runId: string,
    storeDir: string,
    history: boolean,
    quietTail = false,
  ): Promise<{run_id: string; current: ClarifyRound | null; earlier: ClarifyRound[]}> {
    const store = await openStore(storeDir, 'existing')
    const record = await store.readRun(runId)
    const rounds = await clarifyRounds(store, runId, (s) => views.clarify_questions.questions.of(s))
    const waiting = record.status === 'awaiting_input' && record.pending?.kind === 'answers'
    const current = rounds.at(-1) ?? null
    const earlier = current ? rounds.slice(0, -1) : []
    if (!this.jsonEnabled()) {
      const stream = quietTail ? process.stderr : process.stdout
      // Questions and answers are a model's and a person's text: escaped on the terminal (--json has them exact).
      const out = {write: (text: string): boolean => stream.write(visible(text))}
      if (!current) out.write(t`run ${runId} has asked no questions\n`)
      else {
        out.write(`Round ${current.round} (${waiting ? 'waiting for answers' : 'answered'}):\n`)
        for (const q of current.questions)
          out.write(
            `${t`  ${q.id}${q.field ? ` [${q.field}]` : ''}  ${q.question}`}${q.answer && !waiting ? t`\n      answer: ${q.answer.replace(/\n/g, ' / ')}` : ''}\n`,
          )
      }
      if (earlier.length > 0 && !history) out.write(`(${earlier.length} earlier round(s) folded; --history shows them)\n`)
      if (history) {
        for (const round of [...earlier].reverse()) {
          out.write(`\nRound ${round.round}:\n`)
          for (const q of round.questions)
            out.write(
              `${t`  ${q.id}${q.field ? ` [${q.field}]` : ''}  ${q.question}`}\n${t`      ${q.status}${q.answer ? `: ${q.answer.replace(/\n/g, ' / ')}` : ''}`}\n`,
            )
        }
      }
    }
    return {run_id: runId, current, earlier: history ? earlier : []}
  }
}
