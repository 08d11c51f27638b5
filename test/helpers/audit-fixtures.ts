/**
 * What the audit verify test files (test/e2e/audit.test.ts and audit-keyed) share: the default run
 * they audit, `pipe audit verify --json` as a process, and the reading and rewriting of records and
 * timeline lines a tamperer does, re-sealed with pipe's own functions.
 */
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {sealLine} from '../../src/store/trail/integrity.js'
import {defaultPipeline, examples, json, pipe} from './cli.js'

const sentence = path.join(examples, 'one-sentence.txt')
const answers = path.join(examples, 'one-sentence.answers.yaml')
export const fullRun = ['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'go', '--json']

export interface Report {
  ok: boolean
  problems: Array<{file: string; field: string; record: string; message: string}>
  head: string | null
}

export type Line = Record<string, unknown> & {prev: string | null; hash: string}

export async function readJson<T>(file: string): Promise<T> {
  return JSON.parse(await readFile(file, 'utf8')) as T
}

export async function writeJson(file: string, value: unknown): Promise<void> {
  await writeFile(file, `${JSON.stringify(value, null, 2)}\n`)
}

export async function readLines(file: string): Promise<Line[]> {
  return (await readFile(file, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Line)
}

export async function writeLines(file: string, lines: unknown[]): Promise<void> {
  await writeFile(file, lines.map((l) => `${JSON.stringify(l)}\n`).join(''))
}

/** Re-seals every line from `from` on, so the chain holds again (a tamperer who knows the format). */
export function rechain(lines: Line[], from = 0): Line[] {
  const out = lines.slice(0, from)
  for (const line of lines.slice(from)) out.push(sealLine(line, out.at(-1)?.hash ?? null))
  return out
}

export async function verify(
  cwd: string,
  env: Record<string, string | undefined> = {},
  run?: string,
): Promise<{code: number | null; report: Report; stdout: string; stderr: string}> {
  const result = await pipe(['audit', 'verify', ...(run ? [run] : []), '--json'], {cwd, env: {PIPE_AUDIT_KEY: undefined, ...env}})
  return {code: result.code, report: json<Report>(result), stdout: result.stdout, stderr: result.stderr}
}
