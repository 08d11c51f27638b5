/** Before a run: which commands of a pipeline's steps the policy will deny (pipe validate --policy, pipe run --dry-run). */
import type {Diagnostic} from '../config/diagnostics.js'
import {diag, type LoadedPipeline} from '../config/pipeline.js'
import type {LoadedPolicy} from '../policy/policy.js'
import {checkCommand, checkEnv} from '../policy/rules.js'
import {registry} from './registry.js'
import type {StepHandler, StepKind} from './types.js'

/**
 * One error per argument vector the policy denies, at its place in the file. An argv holding an
 * expression (`${{ … }}`) is only known when the run resolves it, so it is not judged here.
 */
export function deniedCommands(loaded: LoadedPipeline, policy: LoadedPolicy): Diagnostic[] {
  const out: Diagnostic[] = []
  const source = policy.file ?? 'the built-in policy'
  loaded.pipeline.steps.forEach((step, i) => {
    const handler = registry[step.kind] as StepHandler<StepKind> | undefined
    for (const {argv, at} of handler?.commands?.(step) ?? []) {
      if (argv.some((arg) => arg.includes('${{'))) continue
      const verdict = checkCommand(policy, argv)
      if (verdict.allowed) continue
      out.push({...diag(loaded, ['steps', i, ...at], `${source} denies ${JSON.stringify(argv)} (${verdict.rule}): ${verdict.reason}; the step would fail with E_POLICY_DENIED`), rule: 'policy-denied'})
    }
    if (step.kind === 'command' && step.env) {
      const verdict = checkEnv(Object.keys(step.env))
      if (!verdict.allowed) out.push({...diag(loaded, ['steps', i, 'env'], `${verdict.reason}; the step would fail with E_POLICY_DENIED`), rule: 'policy-denied'})
    }
  })
  return out
}
