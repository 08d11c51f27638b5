/**
 * What the cassette test files (test/e2e/cassette.test.ts, cassette-files, cassette-replay and
 * reply-cache) share: the model step fixture, the commands over each file's own folder and model
 * server, and the readers of what a run recorded.
 */
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import {pipe, type CliResult} from './cli.js'
import {pipeHere} from './pipe-here.js'
import type {ModelServer} from './model-server.js'
import {snapshotsIn} from './stores.js'

export interface RunJson {
  run_id: string
  status: string
  reason?: string
  error?: {code: string; message: string; hint?: string}
}

/** A test file's own state: the test's folder (its beforeEach makes it) and the model server the test started, if it did. */
export interface CassetteState {
  dir: string
  server: ModelServer | undefined
}

// A model step fixture: one prompt file, one output schema.

export const SCHEMA = {
  type: 'object',
  required: ['items'],
  properties: {items: {type: 'array', items: {type: 'object', required: ['title'], properties: {title: {type: 'string'}}}}},
}
export const GOOD = {items: [{title: 'CSV export'}]}

/** The commands of a test file over its own state (`state()` reads the file's `dir` and `server` as they are now). */
export function cassetteCommands(state: () => CassetteState) {
  /** The environment of this file's commands: the model server's endpoint while one runs, a PIPE_HOME of the test's own, `env` over it. */
  function commandEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
    const {dir, server} = state()
    return {...(server ? {OPENAI_BASE_URL: server.url} : {}), PIPE_HOME: path.join(dir, 'home'), ...env}
  }

  /** `pipe ARGS` as a process, stopped after two minutes (a model server that never answered would hold it). */
  function cli(args: string[], cwd: string, env: Record<string, string | undefined> = {}): Promise<CliResult> {
    return pipe(args, {cwd, env: commandEnv(env), timeoutMs: 120000})
  }

  /**
   * `pipe ARGS` in this process (test/helpers/pipe-here.ts): the same command, folder and
   * environment as `cli`'s. No timeout can stop it: for a command whose model server answers (or is
   * gone, or not asked).
   */
  function cliHere(args: string[], cwd: string, env: Record<string, string | undefined> = {}): Promise<CliResult> {
    return pipeHere(args, {cwd, env: commandEnv(env)})
  }

  async function fixture(steps?: string, extra = ''): Promise<string> {
    const p = path.join(state().dir, 'p')
    await mkdir(path.join(p, 'prompts'), {recursive: true})
    await mkdir(path.join(p, 'schemas'), {recursive: true})
    await writeFile(path.join(p, 'prompts', 'notes.md'), 'Notes for {{audience}} from:\n{{commits}}\nKeep it short.\n')
    await writeFile(path.join(p, 'schemas', 'notes.schema.json'), JSON.stringify(SCHEMA))
    const file = path.join(p, 'p.yaml')
    await writeFile(
      file,
      `version: 1\nname: notes\n${extra}steps:\n${
        steps ??
        `  - id: draft
    kind: model
    prompt: prompts/notes.md
    vars:
      audience: customers
      commits: ["3f2a9c1 Add CSV export", "9b7e4d2 Fix rounding"]
    output_schema: schemas/notes.schema.json
`
      }`,
    )
    return file
  }

  function runIn(file: string, extra: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
    return cli(['run', file, '--json', ...extra], state().dir, env)
  }

  /** `runIn` in this process (`cliHere`). */
  function runHere(file: string, extra: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
    return cliHere(['run', file, '--json', ...extra], state().dir, env)
  }

  return {cli, cliHere, fixture, runIn, runHere}
}

/** What `pipe snapshot show RUN --json` prints, read in-process (the tests here are about the runs, not that command). */
export const snapshotsOf = snapshotsIn

export async function runRecords(cwd: string): Promise<RunRecord[]> {
  const runs = path.join(cwd, '.pipe', 'runs')
  const ids = (await readdir(runs)).filter((n) => n.startsWith('R-')).sort()
  return Promise.all(ids.map(async (id) => JSON.parse(await readFile(path.join(runs, id, 'run.json'), 'utf8')) as RunRecord))
}
