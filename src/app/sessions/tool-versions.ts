/** The tool versions a new run records (policy/tool-versions.ts), loaded only for a policy that declares some. */
import type {LoadedPolicy} from '../../policy/policy.js'
import type {ToolVersions} from '../../policy/tool-versions.js'

/** Measures and judges the declared tools (a refused mismatch throws); null, and nothing loaded or run, when the policy declares none. */
export async function measuredTools(policy: LoadedPolicy, cwd: string, signal?: AbortSignal): Promise<ToolVersions | null> {
  if (Object.keys(policy.policy.tool_versions ?? {}).length === 0) return null
  const {judgeToolVersions, measureToolVersions} = await import('../../policy/tool-versions.js')
  const measured = await measureToolVersions(policy, cwd, signal)
  if (measured) judgeToolVersions(policy, measured)
  return measured
}
