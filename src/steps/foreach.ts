import {PipeError} from '../errors.js'
import type {JsonValue} from '../expr/index.js'
import {childFailure, childFile, childReason, childStopped, foreachOutputs} from './child-runs.js'
import type {KindFinding} from '../config/pipeline.js'
import type {ChildResult, StepHandler} from './types.js'

interface ItemResult {
  index: number
  run_id: string | null
  status: ChildResult['status'] | 'not_started'
  reason: string
}

export const foreach: StepHandler<'foreach'> = {
  kind: 'foreach',
  summary: 'run a pipeline once per item of a list, each as a child run, at most `concurrency` at a time',
  outcomes: () => ['success', 'partial', 'fail', 'blocked'],
  failures: {fail: childFailure},
  changesSpec: false,
  // Running it again finds the children it started and continues the unfinished ones only.
  safeToRetry: true,
  waitsForChildren: true,
  outputsSchema: () => foreachOutputs,
  // Each item's `with:` is evaluated with the item under its alias, so the engine leaves it to the kind.
  deferred: (step) => ({fields: ['items', 'with'], foreign: ['steps', 'inputs'], alias: step.as ?? 'item', items: 'items'}),
  childPipelines: (step) => [{...(step.pipeline !== undefined ? {at: ['pipeline'], file: step.pipeline} : {at: ['steps']}), ...(step.with ? {with: step.with, withAt: ['with']} : {})}],
  check(step) {
    const out: KindFinding[] = []
    if ((step.pipeline === undefined) === (step.steps === undefined)) {
      out.push({rule: 'foreach-child', at: step.pipeline === undefined ? [] : ['steps'], message: 'a foreach runs either pipeline: FILE or inline steps:, exactly one of them', key: true})
    }
    if (step.inputs !== undefined && step.steps === undefined) out.push({rule: 'foreach-child', at: ['inputs'], message: 'inputs: declares what inline steps: read; a pipeline: file declares its own', key: true})
    return out
  },
  graph: {details: (step) => [`foreach ${step.as ?? 'item'} -> ${step.pipeline ?? `${step.steps?.length ?? 0} inline step(s)`}`, `concurrency ${step.concurrency ?? 1}${step.fail_fast ? ', fail_fast' : ''}`]},
  async run({step, pipeline: loaded, children, signal, render}) {
    // items and with: are left to the kind (see deferred): the list first, then each item's inputs with the item bound.
    const items = render(step.items)
    if (!Array.isArray(items)) throw new PipeError('E_CONFIG', `step ${step.id}: items gave ${items === null ? 'null' : typeof items}, not a list`, {hint: 'Make items one ${{ expression }} that gives a list.'})
    const alias = step.as ?? 'item'
    // No file: the inline steps are the child pipeline (the engine builds it from the step).
    const file = step.pipeline !== undefined ? childFile(loaded, step.id, step.pipeline) : undefined
    const limit = Math.max(1, step.concurrency ?? 1)
    // Evaluated up front: a with: that fails for one item fails the step before any child starts.
    const inputs = items.map((item) => Object.fromEntries(Object.entries(step.with ?? {}).map(([name, value]) => [name, typeof value === 'string' ? render(value, {[alias]: item}) : (value as JsonValue)])))
    const results: ItemResult[] = items.map((_, index) => ({index, run_id: null, status: 'not_started', reason: 'not started'}))
    // fail_fast stops the children still running through their own signal; the step's own signal stops them all.
    const stop = new AbortController()
    const childSignal = AbortSignal.any([signal, stop.signal])
    let tripped: string | undefined
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < items.length && tripped === undefined && !signal.aborted) {
        const index = next++
        const key = itemKey(items[index])
        const child = await children.run({...(file !== undefined ? {file} : {}), inputs: inputs[index]!, index, ...(key !== undefined ? {key} : {}), signal: childSignal})
        results[index] = {index, run_id: child.run_id, status: child.status, reason: childReason(child)}
        if (child.status !== 'succeeded' && !childStopped(child) && step.fail_fast === true && tripped === undefined) {
          tripped = `item ${index} failed (${childReason(child)}); fail_fast stopped the rest`
          stop.abort()
        }
      }
    }
    await Promise.all(Array.from({length: Math.min(limit, items.length)}, worker))
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new PipeError('E_INTERNAL', 'interrupted')
    if (tripped !== undefined) {
      for (const r of results) {
        if (r.status === 'succeeded' || r.status === 'failed' || r.status === 'cancelled') continue
        if (r.run_id !== null) await children.cancel(r.run_id, `cancelled by fail_fast: ${tripped}`)
        r.status = 'cancelled'
        r.reason = r.run_id === null ? `not started: ${tripped}` : `cancelled by fail_fast: ${tripped}`
      }
    }
    const count = (status: ItemResult['status']): number => results.filter((r) => r.status === status).length
    const succeeded = count('succeeded')
    const failed = count('failed')
    const cancelled = count('cancelled')
    const resolved = {items, with: inputs}
    const outputs = {items: results, succeeded, failed, cancelled, total: items.length}
    const stopped = results.filter(childStopped)
    if (tripped === undefined && stopped.length > 0) {
      const reason = `${stopped.length} child run(s) wait for a person: ${stopped.map((r) => r.reason).join('; ')}`
      // Routed (on: {blocked: STEP}), the run goes on there (a summary of what is left for a person); a later visit of the step continues the same children.
      if (step.on?.['blocked'] !== undefined) return {type: 'done', outcome: 'blocked', reason, inputs: {resolved}, outputs}
      return {type: 'done', outcome: 'blocked', reason, inputs: {resolved}, outputs, end: {status: 'blocked', reason, code: 'E_ENDED', hint: 'Deal with each waiting child run (pipe runs show PARENT lists them); pipe resume of this run then continues them, never re-running a finished one.'}}
    }
    const summary = `${succeeded} of ${items.length} item(s) succeeded, ${failed} failed${cancelled > 0 ? `, ${cancelled} cancelled` : ''}`
    if (tripped !== undefined) return {type: 'done', outcome: 'fail', reason: `${tripped}; ${summary}`, inputs: {resolved}, outputs}
    if (succeeded === items.length) return {type: 'done', outcome: 'success', reason: summary, inputs: {resolved}, outputs}
    if (succeeded > 0) return {type: 'done', outcome: 'partial', reason: summary, inputs: {resolved}, outputs}
    return {type: 'done', outcome: 'fail', reason: summary, inputs: {resolved}, outputs}
  },
}

const KEY_FIELDS = ['id', 'key', 'name', 'task'] as const

/**
 * What names an item for people: the item itself when it is a string, else the first of its id,
 * key, name or task fields that is a string or a number; cut to 80 characters.
 */
export function itemKey(item: JsonValue | undefined): string | undefined {
  let key: string | undefined
  if (typeof item === 'string') key = item
  else if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
    for (const field of KEY_FIELDS) {
      const value = item[field]
      if (typeof value === 'string' || typeof value === 'number') {
        key = String(value)
        break
      }
    }
  }
  if (key === undefined || key.trim() === '') return undefined
  const chars = [...key]
  return chars.length > 80 ? `${chars.slice(0, 79).join('')}…` : key
}
