import {setMaxListeners} from 'node:events'
import path from 'node:path'
import {declaredOutputsOfFile, outputsObjectSchema} from '../config/declared-outputs.js'
import {PipeError} from '../errors.js'
import type {JsonValue} from '../expr/index.js'
import {breathe} from '../util/breathe.js'
import {aliasProblem} from '../expr/scope.js'
import {childFailure, childFile, childReason, childStopped} from './child-runs.js'
import type {KindFinding} from '../config/kind-contract.js'
import {kindOutputsSchema, narrowed} from './output-schemas.js'
import type {ChildResult, KindOutputs, StepHandler} from './types.js'

interface ItemResult {
  index: number
  key?: string
  run_id: string | null
  status: ChildResult['status'] | 'not_started' | 'skipped'
  reason: string
  /** The key of the dependency that did not succeed: the item was not run (no child run exists for it). */
  blocked_by?: string
  /** The child's declared outputs when it succeeded, else null. */
  outputs: Record<string, JsonValue> | null
}

/**
 * The items' keys and what each waits for, checked before any child starts: a duplicate key, a
 * dependency on a key no item has, and a cycle are errors naming the keys (nothing would ever run
 * them, or which item is meant is unclear).
 */
function dependencyPlan(stepId: string, keys: readonly string[], needs: ReadonlyArray<readonly string[]>): number[][] {
  const at = new Map<string, number>()
  const duplicates = new Set<string>()
  for (const [index, key] of keys.entries()) {
    if (at.has(key)) duplicates.add(key)
    else at.set(key, index)
  }
  if (duplicates.size > 0) {
    throw new PipeError('E_CONFIG', `step ${stepId}: key gave the same value to several items: ${[...duplicates].map((k) => JSON.stringify(k)).join(', ')}`, {
      hint: 'Make key: give each item its own id (a task id), or leave key: out to key items by their index.',
    })
  }
  const unknown = needs.flatMap((list, index) =>
    list.filter((dep) => !at.has(dep)).map((dep) => `${JSON.stringify(keys[index])} depends on ${JSON.stringify(dep)}`),
  )
  if (unknown.length > 0) {
    throw new PipeError(
      'E_CONFIG',
      `step ${stepId}: depends_on names a key no item has: ${unknown.join('; ')} (keys: ${keys.map((k) => JSON.stringify(k)).join(', ')})`,
      {hint: 'Name in depends_on only keys that key: gives an item of this list.'},
    )
  }
  const deps = needs.map((list) => [...new Set(list)].map((dep) => at.get(dep)!))
  // Depth-first, with a stack of its own (a chain of thousands of items must not exhaust the call
  // stack): a node met again while still on the path closes a cycle, reported as the path from it.
  const state = new Array<0 | 1 | 2>(keys.length).fill(0)
  for (let root = 0; root < keys.length; root++) {
    if (state[root] !== 0) continue
    const path: number[] = [root]
    const next: number[] = [0]
    state[root] = 1
    while (path.length > 0) {
      const node = path.at(-1)!
      const i = next.at(-1)!
      if (i >= deps[node]!.length) {
        state[node] = 2
        path.pop()
        next.pop()
        continue
      }
      next[next.length - 1] = i + 1
      const dep = deps[node]![i]!
      if (state[dep] === 1) {
        const from = path.indexOf(dep)
        const cycle = [...path.slice(from), dep].map((n) => JSON.stringify(keys[n]))
        const shown = cycle.length > 12 ? [...cycle.slice(0, 5), `… ${cycle.length - 10} more …`, ...cycle.slice(-5)] : cycle
        throw new PipeError(
          'E_CONFIG',
          `step ${stepId}: depends_on forms a cycle of ${cycle.length - 1} item(s): ${shown.join(' -> ')}; none of these items could ever start`,
          {hint: 'Remove one of these dependencies so the items can run in some order.'},
        )
      }
      if (state[dep] === 0) {
        state[dep] = 1
        path.push(dep)
        next.push(0)
      }
    }
  }
  return deps
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
  // Each item's `with:` is evaluated with the item under its alias, so the engine leaves it to the kind.
  deferred: (step) => ({
    fields: ['items', 'with', 'key', 'depends_on'],
    foreign: ['steps', 'inputs', 'outputs'],
    alias: step.as ?? 'item',
    items: 'items',
    expect: {depends_on: 'list'},
  }),
  // Each item's outputs are typed from what the child declares: inline steps' outputs: on this step, a file's own outputs:.
  outputsSchema(step, pipeline) {
    const declared = step.pipeline !== undefined ? declaredOutputsOfFile(path.resolve(pipeline.dir, step.pipeline)) : (step.outputs ?? {})
    if (declared === undefined) return kindOutputsSchema('foreach')
    const items = kindOutputsSchema('foreach')['properties'] as {items: {items: {properties: Record<string, unknown>}}}
    const item = items.items.items
    return narrowed('foreach', {
      items: {...items.items, items: {...item, properties: {...item.properties, outputs: outputsObjectSchema(declared, true)}}},
    })
  },
  childPipelines: (step) => [
    {...(step.pipeline !== undefined ? {at: ['pipeline'], file: step.pipeline} : {at: ['steps']}), ...(step.with ? {with: step.with, withAt: ['with']} : {})},
  ],
  check(step, loaded) {
    const out: KindFinding[] = []
    if ((step.pipeline === undefined) === (step.steps === undefined)) {
      out.push({
        rule: 'foreach-child',
        at: step.pipeline === undefined ? [] : ['steps'],
        message: 'a foreach runs either pipeline: FILE or inline steps:, exactly one of them',
        key: true,
      })
    }
    if (step.inputs !== undefined && step.steps === undefined)
      out.push({rule: 'foreach-child', at: ['inputs'], message: 'inputs: declares what inline steps: read; a pipeline: file declares its own', key: true})
    if (step.outputs !== undefined && step.steps === undefined)
      out.push({
        rule: 'foreach-child',
        at: ['outputs'],
        message: 'outputs: declares what inline steps: give back; a pipeline: file declares its own',
        key: true,
      })
    // The alias is a name every expression of the item reads (inline steps' too): it may not hide one of the names they all read.
    const problem = step.as !== undefined ? aliasProblem(step.as) : undefined
    if (problem !== undefined) out.push({rule: 'foreach-alias', at: ['as'], message: `as: ${problem}`})
    // Inside inline steps the outer item is read by its name: the same name here would hide it, and an expression meant for it would silently read this item.
    const alias = step.as ?? 'item'
    if (problem === undefined && loaded.aliases !== undefined && Object.hasOwn(loaded.aliases, alias))
      out.push({
        rule: 'foreach-alias',
        at: step.as !== undefined ? ['as'] : [],
        message: `as: "${alias}" is already the item of an enclosing foreach, which it would hide here; choose another name${step.as === undefined ? ' (as: NAME; the default is item)' : ''}`,
      })
    return out
  },
  graph: {
    details: (step) => [
      `foreach ${step.as ?? 'item'} -> ${step.pipeline ?? `${step.steps?.length ?? 0} inline step(s)`}`,
      `concurrency ${step.concurrency ?? 1}${step.fail_fast ? ', fail_fast' : ''}`,
    ],
  },
  async run({step, pipeline: loaded, children, signal, render}) {
    // items and with: are left to the kind (see deferred): the list first, then each item's inputs with the item bound.
    const items = render(step.items)
    if (!Array.isArray(items))
      throw new PipeError('E_CONFIG', `step ${step.id}: items gave ${items === null ? 'null' : typeof items}, not a list`, {
        hint: 'Make items one ${{ expression }} that gives a list.',
      })
    const alias = step.as ?? 'item'
    // No file: the inline steps are the child pipeline (the engine builds it from the step).
    const file = step.pipeline !== undefined ? childFile(loaded, step.id, step.pipeline) : undefined
    // Resolved by the engine like any field; a number from an expression is checked against the schema's 1..64 there.
    const limit = step.concurrency ?? 1
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1)
      throw new PipeError('E_CONFIG', `step ${step.id}: concurrency resolved to ${JSON.stringify(limit)}, not an integer from 1 to 64`, {
        hint: 'Make concurrency an integer, or one ${{ expression }} that gives one.',
      })
    const ordered = step.key !== undefined || step.depends_on !== undefined
    const keys = items.map((item, index) => {
      if (step.key === undefined) return String(index)
      const key = render(step.key, {[alias]: item})
      if (typeof key === 'string' && key !== '') return key
      if (typeof key === 'number' && Number.isInteger(key)) return String(key)
      throw new PipeError('E_CONFIG', `step ${step.id}: key gave ${JSON.stringify(key)} for item ${index}, not a non-empty string`, {
        hint: 'Make key one ${{ expression }} over the item that gives its id (a string).',
      })
    })
    const needs = items.map((item, index) => {
      if (step.depends_on === undefined) return []
      const list = render(step.depends_on, {[alias]: item})
      if (list === null) return []
      if (Array.isArray(list) && list.every((k) => typeof k === 'string' || (typeof k === 'number' && Number.isInteger(k)))) return list.map(String)
      throw new PipeError('E_CONFIG', `step ${step.id}: depends_on gave ${JSON.stringify(list)} for item ${JSON.stringify(keys[index])}, not a list of keys`, {
        hint: "Make depends_on one ${{ expression }} over the item that gives a list of other items' keys (strings).",
      })
    })
    const deps = dependencyPlan(step.id, keys, needs)
    // Evaluated up front: a with: that fails for one item fails the step before any child starts.
    const inputs = items.map((item) =>
      Object.fromEntries(
        Object.entries(step.with ?? {}).map(([name, value]) => [name, typeof value === 'string' ? render(value, {[alias]: item}) : (value as JsonValue)]),
      ),
    )
    const results: ItemResult[] = items.map((_, index) => ({
      index,
      ...(ordered ? {key: keys[index]!} : {}),
      run_id: null,
      status: 'not_started',
      reason: 'not started',
      outputs: null,
    }))
    // fail_fast stops the children still running through their own signal; the step's own signal stops them all.
    const stop = new AbortController()
    const childSignal = AbortSignal.any([signal, stop.signal])
    // Each child in flight listens to it (its attempts, its engine): `limit` of them is no leak.
    setMaxListeners(4 * limit + 10, childSignal)
    let tripped: string | undefined
    const started = new Set<number>()
    const finished = new Set<number>()
    // Only an item that did not succeed can block others: until one finishes so, there is nothing to settle (a pass is a walk of every item).
    let unsettled = false
    // What a person skipped is never run again: its child ends cancelled, and its dependents wait on it as on a failure unless the person said they run.
    const skipped = await children.skipped()
    for (const [index, skip] of skipped) {
      if (index >= items.length) continue
      await children.cancel(skip.run_id, `skipped by ${skip.by}: ${skip.note}`)
      results[index] = {
        index,
        ...(ordered ? {key: keys[index]!} : {}),
        run_id: skip.run_id,
        status: 'skipped',
        reason: `skipped by a person: ${skip.note}`,
        outputs: null,
      }
      started.add(index)
      finished.add(index)
      if (!skip.run_dependents) unsettled = true
    }
    const satisfied = (dep: number): boolean => results[dep]!.status === 'succeeded' || (results[dep]!.status === 'skipped' && skipped.get(dep)!.run_dependents)
    // An item whose dependency did not succeed is never run: it is recorded blocked, naming that dependency, and so are its own dependents.
    const settleBlocked = (): void => {
      if (!unsettled) return
      unsettled = false
      for (let changed = true; changed;) {
        changed = false
        for (const [index, list] of deps.entries()) {
          if (started.has(index)) continue
          const failed = list.find((dep) => finished.has(dep) && !satisfied(dep))
          if (failed === undefined) continue
          const dep = results[failed]!
          const verb =
            dep.status === 'failed'
              ? 'failed'
              : dep.status === 'blocked'
                ? 'was blocked'
                : dep.status === 'cancelled'
                  ? 'was cancelled'
                  : dep.status === 'skipped'
                    ? 'was skipped'
                    : 'did not succeed'
          const what = `${verb} (${dep.reason})`
          results[index] = {
            index,
            key: keys[index]!,
            run_id: null,
            status: 'blocked',
            reason: `not run: it depends on ${JSON.stringify(keys[failed])}, which ${what}`,
            blocked_by: keys[failed]!,
            outputs: null,
          }
          started.add(index)
          finished.add(index)
          changed = true
        }
      }
    }
    const ready = (index: number): boolean => !started.has(index) && deps[index]!.every((dep) => finished.has(dep) && satisfied(dep))
    const running = new Map<number, Promise<void>>()
    // Every item before it has started: the search for the next one starts here, not at the head of a list of 100,000.
    let first = 0
    const start = (index: number): void => {
      started.add(index)
      const job = (async () => {
        // A child's creation is a handful of synced writes and children start together: a signal
        // waits for a few of them, not for all; one that came meanwhile leaves the item unstarted.
        await breathe()
        if (childSignal.aborted) {
          started.delete(index)
          running.delete(index)
          first = Math.min(first, index)
          return
        }
        // The child is named by its item's key: the step's key: when it has one, else the item's own id, key, name or task.
        const name = ordered ? keys[index] : itemKey(items[index])
        const child = await children.run({
          ...(file !== undefined ? {file} : {}),
          inputs: inputs[index]!,
          index,
          ...(name !== undefined ? {key: name} : {}),
          // Inline steps read the item under the alias itself; a file pipeline gets it through with: only.
          ...(file === undefined ? {aliases: {[alias]: items[index]!}} : {}),
          signal: childSignal,
          concurrency: limit,
        })
        results[index] = {
          index,
          ...(ordered ? {key: keys[index]!} : {}),
          run_id: child.run_id,
          status: child.status,
          reason: childReason(child),
          outputs: child.status === 'succeeded' ? (child.outputs ?? null) : null,
        }
        finished.add(index)
        running.delete(index)
        if (child.status !== 'succeeded' && step.depends_on !== undefined) unsettled = true
        if (child.status !== 'succeeded' && !childStopped(child) && step.fail_fast === true && tripped === undefined) {
          tripped = `item ${ordered ? JSON.stringify(keys[index]) : index} failed (${childReason(child)}); fail_fast stopped the rest`
          stop.abort()
        }
      })()
      running.set(index, job)
    }
    const next = (): number => {
      while (first < items.length && started.has(first)) first++
      for (let i = first; i < items.length; i++) if (ready(i)) return i
      return -1
    }
    // In list order among the items whose dependencies all succeeded, at most `limit` at once.
    for (;;) {
      settleBlocked()
      while (running.size < limit && tripped === undefined && !signal.aborted) {
        const index = next()
        if (index === -1) break
        start(index)
      }
      if (running.size === 0) break
      await Promise.race(running.values())
      // Children of instant steps settle without the loop turning: give a signal its turn before starting more.
      await breathe()
    }
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new PipeError('E_INTERNAL', 'interrupted')
    if (tripped !== undefined) {
      for (const r of results) {
        if (r.status === 'succeeded' || r.status === 'failed' || r.status === 'cancelled' || r.status === 'skipped' || r.blocked_by !== undefined) continue
        if (r.run_id !== null) await children.cancel(r.run_id, `cancelled by fail_fast: ${tripped}`)
        r.status = 'cancelled'
        r.reason = r.run_id === null ? `not started: ${tripped}` : `cancelled by fail_fast: ${tripped}`
      }
    }
    const count = (status: ItemResult['status']): number => results.filter((r) => r.status === status).length
    const succeeded = count('succeeded')
    const failed = count('failed')
    const cancelled = count('cancelled')
    const blocked = count('blocked')
    const skips = count('skipped')
    const unrun = results.filter((r) => r.blocked_by !== undefined).length
    const resolved = {items, with: inputs, ...(step.key !== undefined ? {key: keys} : {}), ...(step.depends_on !== undefined ? {depends_on: needs} : {})}
    const outputs = {
      items: results,
      succeeded,
      failed,
      cancelled,
      blocked,
      ...(skips > 0 ? {skipped: skips} : {}),
      total: items.length,
    } satisfies KindOutputs<'foreach'>
    const stopped = results.filter((r) => childStopped(r) && r.blocked_by === undefined)
    if (tripped === undefined && stopped.length > 0) {
      const reason = `${stopped.length} child run(s) wait for a person: ${stopped.map((r) => r.reason).join('; ')}`
      // Routed (on: {blocked: STEP}), the run goes on there (a summary of what is left for a person); a later visit of the step continues the same children.
      if (step.on?.['blocked'] !== undefined) return {type: 'done', outcome: 'blocked', reason, inputs: {resolved}, outputs}
      return {
        type: 'done',
        outcome: 'blocked',
        reason,
        inputs: {resolved},
        outputs,
        end: {
          status: 'blocked',
          reason,
          code: 'E_ENDED',
          hint: 'Deal with each waiting child run (pipe runs show PARENT lists them); pipe resume of this run then continues them, never re-running a finished one.',
        },
      }
    }
    // An item a dependency blocked, or a person skipped, counts as not succeeded: partial when others succeeded, fail when none did.
    const summary = `${succeeded} of ${items.length} item(s) succeeded, ${failed} failed${cancelled > 0 ? `, ${cancelled} cancelled` : ''}${skips > 0 ? `, ${skips} skipped by a person` : ''}${unrun > 0 ? `, ${unrun} blocked by a dependency` : ''}`
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
