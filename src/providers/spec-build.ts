/** Building spec bodies from extracted or modelled items: ids, merging with an earlier version, key fields. */
import type {SpecBody} from './types.js'

/** Fields a spec cannot do without; when one is empty the spec is a draft (partial success). */
export const KEY_FIELDS = ['goal', 'features', 'acceptance_criteria'] as const

export function missingKeyFields(body: SpecBody): string[] {
  return KEY_FIELDS.filter((field) => (field === 'goal' ? !body.goal.trim() : body[field].length === 0))
}

export function pad(n: number): string {
  return String(n).padStart(3, '0')
}

export function nextId(prefix: string, ids: string[]): string {
  const max = ids.reduce((m, id) => Math.max(m, Number(id.slice(prefix.length + 1)) || 0), 0)
  return `${prefix}-${pad(max + 1)}`
}

export function normalizeForCompare(text: string): string {
  return text
    .toLowerCase()
    .replace(/[\s\p{P}]+/gu, ' ')
    .trim()
}

export function emptyBody(): SpecBody {
  return {goal: '', features: [], constraints: [], non_functional: [], acceptance_criteria: [], open_questions: [], tasks: [], vv: []}
}

/** Keeps what an earlier version had (answers, earlier output) that a fresh compile lacks; ids stay stable. */
export function mergeWithPrevious(fresh: SpecBody, previous: SpecBody): SpecBody {
  const merged: SpecBody = structuredClone(previous)
  if (fresh.goal && !merged.goal) merged.goal = fresh.goal
  const mergeList = <T extends {id: string}>(target: T[], incoming: T[], text: (x: T) => string, prefix: string): void => {
    for (const item of incoming) {
      if (target.some((x) => normalizeForCompare(text(x)) === normalizeForCompare(text(item)))) continue
      target.push({
        ...item,
        id: nextId(
          prefix,
          target.map((x) => x.id),
        ),
      })
    }
  }
  mergeList(merged.features, fresh.features, (x) => x.title, 'FR')
  mergeList(merged.constraints, fresh.constraints, (x) => x.text, 'C')
  mergeList(merged.non_functional, fresh.non_functional, (x) => x.text, 'NFR')
  mergeList(merged.acceptance_criteria, fresh.acceptance_criteria, (x) => x.text, 'AC')
  mergeList(merged.open_questions, fresh.open_questions, (x) => x.question, 'Q')
  return merged
}
