/**
 * The working state of a step that pauses or may be interrupted mid-way (an agent's conversation),
 * one file per step run (step id and seq), so that a resume continues where it stood. It decides
 * what a resumed step does (which call a confirmation runs), so it is sealed like every record
 * (keyed with PIPE_AUDIT_KEY), and a file whose seal does not hold is never acted on.
 */
import path from 'node:path'
import {PipeError} from '../errors.js'
import {makeDirs, writeFileAtomic} from '../util/fs.js'
import {readdir} from '../util/fs-async.js'
import {readOwnJson, type FileLayout} from './file/files.js'
import {checkRecord, sealMessage, sealRecord} from './trail/integrity.js'

/**
 * A step state as sealed: with the run, step and attempt it belongs to, so that a state sealed for
 * one (a genuine seal, keyed or not) is not acted on where it was copied to.
 */
export function sealedStepState(runId: string, step: string, seq: number, state: unknown): Record<string, unknown> {
  return sealRecord({run_id: runId, step, seq, state})
}

/** What is wrong with a step state record as parsed (`{run_id, step, seq, state, seal}`) read as `runId`'s `step` `seq`, or null. */
export function stepStateProblem(parsed: unknown, runId: string, step: string, seq: number): string | null {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || !('state' in parsed)) return 'is not a pipe step state record'
  if (!('seal' in parsed)) return 'is not sealed'
  const sealed = checkRecord(parsed)
  if (sealed !== 'ok') return `fails its seal: ${sealMessage(sealed)}`
  // A state written before it named its place has no run_id: it is judged by its seal alone.
  const at = parsed as {run_id?: unknown; step?: unknown; seq?: unknown}
  if (at.run_id !== undefined && (at.run_id !== runId || at.step !== step || at.seq !== seq))
    return `belongs to step ${JSON.stringify(at.step)} (seq ${JSON.stringify(at.seq)}) of ${JSON.stringify(at.run_id)} (it was copied here)`
  return null
}

export async function readStepState(layout: FileLayout, runId: string, step: string, seq: number): Promise<unknown> {
  const file = layout.stepStateFile(runId, step, seq)
  const parsed = await readOwnJson(file, `the state of step ${step} (seq ${seq}) of ${runId}`)
  if (parsed === undefined) return undefined
  const problem = stepStateProblem(parsed, runId, step, seq)
  if (problem)
    throw new PipeError('E_INTEGRITY', `the state of step ${step} (seq ${seq}) of ${runId} ${problem}`, {
      hint: `It was changed outside pipe, and a resumed step acts on it, so it is not used: ${file}. pipe audit verify ${runId} names what else changed.`,
    })
  return (parsed as {state: unknown}).state
}

export async function writeStepState(layout: FileLayout, runId: string, step: string, seq: number, state: unknown): Promise<void> {
  const file = layout.stepStateFile(runId, step, seq)
  makeDirs(path.dirname(file))
  await writeFileAtomic(file, `${JSON.stringify(sealedStepState(runId, step, seq, state))}\n`)
}

/** The seq of the latest state file of `step` (the attempt a pause of that step waits in), or null. */
export async function latestStepStateSeq(layout: FileLayout, runId: string, step: string): Promise<number | null> {
  const names = await readdir(path.join(layout.runDir(runId), 'state')).catch(() => [] as string[])
  const seqs = names.map((n) => (n.endsWith(`-${step}.json`) ? Number(n.slice(0, 6)) : NaN)).filter((n) => Number.isInteger(n))
  return seqs.length > 0 ? Math.max(...seqs) : null
}
