/**
 * What the budget test files (test/e2e/budgets.test.ts and budgets-foreach) share: the model steps
 * of a budgeted pipeline, the reply a real chat-completions server on 127.0.0.1 gives them (with the
 * usage that is counted), and the commands over each file's own folder and server.
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pipe, type CliResult} from './cli.js'
import type {ModelServer} from './model-server.js'

export interface RunJson {
  run_id: string
  status: string
  reason?: string
  next_command?: string
  pending?: {kind: string; step: string; reason: string; budget?: {scope: string; limit_tokens?: number; spent_tokens: number; estimate_tokens?: number}}
  error?: {code: string; message: string; hint?: string}
}

export const SCHEMA = {type: 'object', required: ['title'], properties: {title: {type: 'string'}}}
/** Every reply spends 15,000 tokens: far above any request's estimated size, so the budget tests' arithmetic does not depend on it. */
const USAGE = {prompt_tokens: 10000, completion_tokens: 5000}
export const REPLY = {content: JSON.stringify({title: 'x'}), usage: USAGE}

export const model = (id: string, next?: string, extra = ''): string =>
  `  - {id: ${id}, kind: model, prompt: prompt.md, output_schema: out.schema.json${next ? `, next: ${next}` : ''}${extra}}\n`

/** A test file's own state: the test's folder and the model server its beforeEach started. */
export interface BudgetState {
  dir: string
  server: ModelServer
}

/** The helpers of a test file over its own state (`state()` reads the file's `dir` and `server` as they are now). */
export function budgetCommands(state: () => BudgetState) {
  async function pipeline(head: string, steps: string, name = 'p.yaml'): Promise<string> {
    const file = path.join(state().dir, 'p', name)
    await writeFile(file, `version: 1\nname: budgeted\n${head}steps:\n${steps}`)
    return file
  }

  /** The environment of the test's `pipe` processes, for a command run in this process (pipeHere, test/helpers/pipe-here.ts) too. */
  const env = (user?: string): Record<string, string> => ({
    OPENAI_BASE_URL: state().server.url,
    PIPE_HOME: path.join(state().dir, 'home'),
    ...(user !== undefined ? {PIPE_USER: user} : {}),
  })

  function cli(args: string[]): Promise<CliResult> {
    return pipe([...args, '--json'], {cwd: state().dir, env: env()})
  }

  return {pipeline, env, cli}
}
