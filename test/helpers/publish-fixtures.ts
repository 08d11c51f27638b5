/**
 * What the publish test files (test/e2e/publish.test.ts and publish-safety) share: the default
 * pipeline publishing to webhooks on a real HTTP server on 127.0.0.1 (test/helpers/webhook-server.ts),
 * the environment that names them, and the commands and readers over each file's own folder.
 */
import path from 'node:path'
import {readFile, writeFile} from 'node:fs/promises'
import type {LedgerEntry} from '../../src/types/ledger.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {examples, pipe, type CliResult} from './cli.js'
import {ledgerIn, snapshotsIn} from './stores.js'
import type {WebhookServer} from './webhook-server.js'

export interface RunJson {
  run_id: string
  feature_id: string
  status: string
  spec_version: string | null
  error?: {code: string; message: string; hint?: string}
}

export const prd = path.join(examples, 'full-prd.md')
export const SECRET = 'feishu-signing-secret-123'

export const allTargets =
  '      - {name: local, type: file, dir: published}\n      - {name: feishu, type: webhook, format: feishu, url_env: FEISHU_HOOK, secret_env: FEISHU_SECRET}\n      - {name: slack, type: webhook, format: slack, url_env: SLACK_HOOK}\n      - {name: generic, type: webhook, format: json, url_env: JSON_HOOK, timeout_ms: 120000}\n'

/** A test file's own state: the test's folder and the webhook server its beforeEach started. */
export interface PublishState {
  dir: string
  server: WebhookServer
}

/** The helpers of a test file over its own state (`state()` reads the file's `dir` and `server` as they are now). */
export function publishCommands(state: () => PublishState) {
  /** The default pipeline publishing to webhooks on the local server. */
  async function pipeline(targets: string): Promise<string> {
    const text = (await readFile(path.join(state().dir, 'pipelines', 'default.yaml'), 'utf8')).replace(
      '      - {name: local, type: file, dir: published}\n',
      targets,
    )
    const file = path.join(state().dir, 'pipelines', 'hooks.yaml')
    await writeFile(file, text)
    return file
  }

  function env(): Record<string, string> {
    return {
      FEISHU_HOOK: `${state().server.url}/feishu`,
      FEISHU_SECRET: SECRET,
      SLACK_HOOK: `${state().server.url}/slack`,
      JSON_HOOK: `${state().server.url}/json`,
      PIPE_HOME: path.join(state().dir, 'home'),
    }
  }

  function cli(args: string[], extra: Record<string, string | undefined> = {}): Promise<CliResult> {
    return pipe(args, {cwd: state().dir, env: {...env(), ...extra}})
  }

  /** What `pipe ledger list --json` lists, read in-process (the tests here are about publishing, not that command). */
  function ledger(): Promise<LedgerEntry[]> {
    return ledgerIn(state().dir)
  }

  /** `pipe snapshot show RUN --step STEP --json`, read in-process. */
  async function snapshotsOfStep(runId: string, step: string): Promise<Snapshot[]> {
    return (await snapshotsIn(state().dir, runId)).filter((s) => s.step.name === step)
  }

  return {pipeline, env, cli, ledger, snapshotsOfStep}
}
