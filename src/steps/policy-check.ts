/** Before a run: which commands of a pipeline's steps the policy will deny (pipe validate --policy, pipe run --dry-run). */
import type {Diagnostic} from '../config/diagnostics.js'
import type {LoadedPipeline} from '../config/loaded.js'
import {diag} from '../config/positions.js'
import type {LoadedPolicy} from '../policy/policy.js'
import {checkCommandShape, checkEnv} from '../policy/rules.js'
import type {JsonValue} from '../expr/index.js'
import type {StepHandler, StepKind, StepRegistry} from './types.js'

/** The values of a step's fields that are already known before the run, by field path (run[2], stages.static[0][1]). */
export type KnownValues = (stepIndex: number) => Record<string, JsonValue> | undefined

/**
 * One error per argument vector the policy denies, at its place in the file. An element holding an
 * expression (`${{ … }}`) is judged by its value where `known` has it (the dry run resolved it from
 * the inputs); otherwise it may be any one argument, and the argv is denied when no value of it
 * could make an allowed_commands entry match. Reached through registry.ts (deniedCommands), which
 * passes itself in, so that layers above steps ask the registry and no import runs in a circle.
 */
export function deniedCommandsOf(registry: StepRegistry, loaded: LoadedPipeline, policy: LoadedPolicy, known?: KnownValues): Diagnostic[] {
  const out: Diagnostic[] = []
  const source = policy.file ?? 'the built-in policy'
  loaded.pipeline.steps.forEach((step, i) => {
    const handler = registry[step.kind] as StepHandler<StepKind> | undefined
    const values = known?.(i)
    for (const {argv: written, at} of handler?.commands?.(step) ?? []) {
      const argv = written.map((arg, j) => (arg.includes('${{') ? argumentOf(values?.[fieldPath([...at, j])]) : arg))
      const verdict = checkCommandShape(policy, argv)
      if (verdict.allowed) continue
      out.push({
        ...diag(
          loaded,
          ['steps', i, ...at],
          `${source} denies ${JSON.stringify(argv.map((arg, j) => arg ?? written[j]))} (${verdict.rule}): ${verdict.reason}; the step would fail with E_POLICY_DENIED`,
        ),
        rule: 'policy-denied',
      })
    }
    if (step.kind === 'command' && step.env) {
      const verdict = checkEnv(Object.keys(step.env))
      if (!verdict.allowed)
        out.push({...diag(loaded, ['steps', i, 'env'], `${verdict.reason}; the step would fail with E_POLICY_DENIED`), rule: 'policy-denied'})
    }
  })
  // A tool the pipeline declares runs its argv whenever the model calls it: judged like a command step's, its expressions any one argument.
  for (const [name, tool] of Object.entries(loaded.pipeline.tools ?? {})) {
    if (!tool) continue
    const argv = tool.argv.map((arg) => (arg.includes('${{') ? null : arg))
    const verdict = checkCommandShape(policy, argv)
    if (verdict.allowed) continue
    out.push({
      ...diag(
        loaded,
        ['tools', name, 'argv'],
        `${source} denies ${JSON.stringify(argv.map((arg, j) => arg ?? tool.argv[j]))} (${verdict.rule}): ${verdict.reason}; every call of tool "${name}" would be denied`,
      ),
      rule: 'policy-denied',
    })
  }
  return out
}

/** A resolved value as the run passes it: a string, or a number or boolean as its text; anything else is not known here. */
function argumentOf(value: JsonValue | undefined): string | null {
  return typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : null
}

/** The field path as the dry run's resolved values name it: run[2], stages.static[0][1]. */
function fieldPath(segments: ReadonlyArray<string | number>): string {
  return segments.reduce<string>((acc, s) => (typeof s === 'number' ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), '')
}

const GATE_KINDS = new Set(['review', 'confirm', 'answers', 'budget'])

/**
 * An approvals rule keyed by neither a gate kind nor a step of this pipeline governs none of its
 * gates: a misspelt step id leaves the gate it meant open to anyone. A warning, as one policy may
 * serve pipelines whose steps this one does not have.
 */
export function unmatchedApprovals(loaded: LoadedPipeline, policy: LoadedPolicy): Diagnostic[] {
  const ids = new Set(loaded.pipeline.steps.map((s) => s.id))
  const source = policy.file ?? 'the built-in policy'
  return Object.keys(policy.policy.approvals ?? {})
    .filter((name) => !GATE_KINDS.has(name) && !ids.has(name))
    .map((name) => ({
      ...diag(
        loaded,
        ['steps'],
        `${source}'s approvals.${name} names no step of pipeline ${loaded.pipeline.name} (its steps are ${[...ids].join(', ')}) nor a gate kind (review, confirm, answers, budget), so it governs none of its gates`,
      ),
      severity: 'warning' as const,
      rule: 'approvals-unmatched',
    }))
}
