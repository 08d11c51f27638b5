/** The step graph of a pipeline: edges from next, on and on_exhausted, and the checks over it. */
import type {Pipeline, Step} from '../types/pipeline.js'
import type {KindCatalog} from './kind-contract.js'
import {linksOf} from './step-links.js'

export interface Edge {
  from: string
  to: string
  /** The outcome that takes this edge: an outcome name, "next" for the default, or "exhausted". */
  label: string
}

export function startStepId(pipeline: Pipeline): string {
  return pipeline.start ?? pipeline.steps[0].id
}

/** The routes out of a step (step-links.ts): on, next, on_exhausted, and those its kind declares (a choice's branches, labelled by the step they go to). */
export function edgesOf(step: Step, catalog: KindCatalog): Edge[] {
  return linksOf(step, catalog).flatMap((link) => (link.route === undefined ? [] : [{from: step.id, to: link.target, label: link.route}]))
}

export function allEdges(pipeline: Pipeline, catalog: KindCatalog): Edge[] {
  return pipeline.steps.flatMap((step) => edgesOf(step, catalog))
}

export function reachableFrom(pipeline: Pipeline, catalog: KindCatalog, start: string): Set<string> {
  const byId = new Map(pipeline.steps.map((s) => [s.id, s]))
  const seen = new Set<string>()
  const queue = [start]
  while (queue.length > 0) {
    const id = queue.pop()!
    if (seen.has(id)) continue
    const step = byId.get(id)
    if (!step) continue
    seen.add(id)
    for (const edge of edgesOf(step, catalog)) if (!seen.has(edge.to)) queue.push(edge.to)
  }
  return seen
}

/** The steps that can run before `id` on some path from the start (a step in a cycle is its own). */
export function ancestorsOf(pipeline: Pipeline, catalog: KindCatalog, id: string): Set<string> {
  const preds = new Map<string, string[]>()
  for (const edge of allEdges(pipeline, catalog)) preds.set(edge.to, [...(preds.get(edge.to) ?? []), edge.from])
  const reachable = reachableFrom(pipeline, catalog, startStepId(pipeline))
  const seen = new Set<string>()
  const queue = [...(preds.get(id) ?? [])]
  while (queue.length > 0) {
    const from = queue.pop()!
    if (seen.has(from) || !reachable.has(from)) continue
    seen.add(from)
    queue.push(...(preds.get(from) ?? []))
  }
  return seen
}

/**
 * Which steps can be reached with no spec version yet (`without`) and which with one (`with`), from
 * the start: a step that writes a spec passes `with` on along its outcomes, but not along `error`
 * or `exhausted` (it wrote nothing then).
 */
export function specReach(pipeline: Pipeline, catalog: KindCatalog, writesSpec: (step: Step) => boolean): {without: Set<string>; with: Set<string>} {
  const byId = new Map(pipeline.steps.map((s) => [s.id, s]))
  const seen = {without: new Set<string>(), with: new Set<string>()}
  const queue: Array<[string, boolean]> = [[startStepId(pipeline), false]]
  while (queue.length > 0) {
    const [id, has] = queue.pop()!
    const set = has ? seen.with : seen.without
    const step = byId.get(id)
    if (!step || set.has(id)) continue
    set.add(id)
    for (const edge of edgesOf(step, catalog)) {
      const wrote = writesSpec(step) && edge.label !== 'error' && edge.label !== 'exhausted'
      queue.push([edge.to, has || wrote])
    }
  }
  return seen
}

/**
 * Strongly connected components that form cycles (more than one step, or a step that points to
 * itself), each listed in pipeline order. Tarjan's algorithm, iterative so a 10,000-step chain
 * cannot overflow the stack.
 */
export function cycles(pipeline: Pipeline, catalog: KindCatalog): string[][] {
  const ids = pipeline.steps.map((s) => s.id)
  const order = new Map(ids.map((id, i) => [id, i]))
  const succ = new Map<string, string[]>()
  for (const step of pipeline.steps)
    succ.set(
      step.id,
      edgesOf(step, catalog)
        .map((e) => e.to)
        .filter((to) => order.has(to)),
    )
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const result: string[][] = []
  let counter = 0
  for (const root of ids) {
    if (index.has(root)) continue
    const work: Array<{id: string; next: number}> = [{id: root, next: 0}]
    index.set(root, counter)
    low.set(root, counter++)
    stack.push(root)
    onStack.add(root)
    while (work.length > 0) {
      const frame = work[work.length - 1]!
      const targets = succ.get(frame.id) ?? []
      if (frame.next < targets.length) {
        const to = targets[frame.next++]!
        if (!index.has(to)) {
          index.set(to, counter)
          low.set(to, counter++)
          stack.push(to)
          onStack.add(to)
          work.push({id: to, next: 0})
        } else if (onStack.has(to)) {
          low.set(frame.id, Math.min(low.get(frame.id)!, index.get(to)!))
        }
        continue
      }
      work.pop()
      const parent = work[work.length - 1]
      if (parent) low.set(parent.id, Math.min(low.get(parent.id)!, low.get(frame.id)!))
      if (low.get(frame.id) === index.get(frame.id)) {
        const component: string[] = []
        let member: string
        do {
          member = stack.pop()!
          onStack.delete(member)
          component.push(member)
        } while (member !== frame.id)
        const selfLoop = component.length === 1 && (succ.get(frame.id) ?? []).includes(frame.id)
        if (component.length > 1 || selfLoop) result.push(component.sort((a, b) => order.get(a)! - order.get(b)!))
      }
    }
  }
  return result.sort((a, b) => order.get(a[0]!)! - order.get(b[0]!)!)
}
