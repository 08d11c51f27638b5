/**
 * Deterministic gate evaluation: a pure function of the spec and the gate configuration, so that
 * replaying a run gives the same gate result byte for byte. No model calls, no I/O, no clock.
 */
import type {Completeness, Gate, GateRule} from '../types/pipeline.js'
import {isEmptyValue, resolvePath} from './path.js'
import {compareNames} from '../util/order.js'

export interface RuleFailure {
  rule: string
  path: string
  message: string
}

export interface SingleGateResult {
  pass: boolean
  missing_fields: string[]
  failed_rules: RuleFailure[]
}

export interface GateResult {
  pass: boolean
  missing_fields: string[]
  completeness_score?: number
  completeness_threshold?: number
  [gate: string]: SingleGateResult | boolean | string[] | number | undefined
}

function ruleId(rule: GateRule, index: number): string {
  return rule.id ?? `${rule.path}#${index + 1}`
}

function checkRule(spec: unknown, rule: GateRule): string | null {
  const matches = resolvePath(spec, rule.path)
  const values = matches.map((m) => m.value)
  if (rule.required && (values.length === 0 || values.some(isEmptyValue))) {
    return rule.message ?? `${rule.path} is required`
  }
  for (const value of values) {
    if (rule.min_items !== undefined && (!Array.isArray(value) || value.length < rule.min_items)) {
      const count = Array.isArray(value) ? value.length : 0
      return rule.message ?? `${rule.path} needs at least ${rule.min_items} item(s), has ${count}`
    }
    if (rule.max_items !== undefined && Array.isArray(value) && value.length > rule.max_items) {
      return rule.message ?? `${rule.path} allows at most ${rule.max_items} item(s), has ${value.length}`
    }
  }
  const strings = values.filter((v): v is string => typeof v === 'string')
  if (rule.min_length !== undefined) {
    const short = strings.find((s) => [...s.trim()].length < rule.min_length!)
    if (short !== undefined || values.some((v) => v !== undefined && typeof v !== 'string')) {
      return rule.message ?? `${rule.path} must be at least ${rule.min_length} characters`
    }
  }
  if (rule.pattern !== undefined) {
    const re = new RegExp(rule.pattern, 'u')
    const bad = values.find((v) => v !== undefined && (typeof v !== 'string' || !re.test(v)))
    if (bad !== undefined) return rule.message ?? `${rule.path} value ${JSON.stringify(bad)} does not match ${rule.pattern}`
  }
  if (rule.enum !== undefined) {
    const allowed = rule.enum
    const bad = values.find((v) => v !== undefined && !allowed.includes(v as string | number | boolean))
    if (bad !== undefined) return rule.message ?? `${rule.path} value ${JSON.stringify(bad)} is not one of ${allowed.join(', ')}`
  }
  return null
}

export function evaluateGate(spec: unknown, gate: Gate): SingleGateResult {
  const failed: RuleFailure[] = []
  gate.rules.forEach((rule, i) => {
    const message = checkRule(spec, rule)
    if (message !== null) failed.push({rule: ruleId(rule, i), path: rule.path, message})
  })
  return {pass: failed.length === 0, missing_fields: unique(failed.map((f) => f.path)), failed_rules: failed}
}

export function completenessScore(spec: unknown, completeness: Completeness): {score: number; missing: string[]} {
  let total = 0
  let present = 0
  const missing: string[] = []
  for (const [path, weight] of Object.entries(completeness.weights).sort(([a], [b]) => compareNames(a, b))) {
    if (weight === undefined) continue
    total += weight
    const values = resolvePath(spec, path).map((m) => m.value)
    if (values.length > 0 && !values.some(isEmptyValue)) present += weight
    else missing.push(path)
  }
  const score = total === 0 ? 0 : Math.round((present / total) * 10000) / 10000
  return {score, missing}
}

/** Evaluates the named gates, in the order given, and the completeness score when given. */
export function evaluateGates(
  spec: unknown,
  gates: Readonly<Record<string, Gate | undefined>>,
  names: readonly string[],
  completeness?: Completeness,
): GateResult {
  const result: GateResult = {pass: true, missing_fields: []}
  const missing: string[] = []
  for (const name of names) {
    const gate = gates[name]
    if (!gate) throw new Error(`gate "${name}" is not defined`)
    const single = evaluateGate(spec, gate)
    result[name] = single
    if (!single.pass) result.pass = false
    missing.push(...single.missing_fields)
  }
  if (completeness) {
    const {score, missing: absent} = completenessScore(spec, completeness)
    result.completeness_score = score
    result.completeness_threshold = completeness.threshold
    if (score < completeness.threshold) {
      result.pass = false
      missing.push(...absent)
    }
  }
  result.missing_fields = unique(missing)
  return result
}

export function gateSummary(result: GateResult, names: readonly string[]): string {
  const parts = names.map((name) => {
    const single = result[name] as SingleGateResult | undefined
    if (!single) return `${name}: ?`
    return single.pass ? `${name} pass` : `${name} fail: ${single.missing_fields.join(', ')}`
  })
  if (result.completeness_score !== undefined) {
    parts.push(`completeness ${result.completeness_score} (threshold ${result.completeness_threshold})`)
  }
  return parts.join('; ')
}

function unique(list: string[]): string[] {
  return [...new Set(list)]
}
