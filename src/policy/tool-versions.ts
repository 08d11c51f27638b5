/**
 * The versions of the tools a policy declares (tool_versions), measured once when a run starts: a
 * declared version copied into the record says nothing about what ran. Each tool is asked for its
 * version as a command like any other (sandboxed, without a shell, with a short timeout); a policy
 * that declares none costs nothing.
 */
import {PipeError} from '../errors.js'
import type {RunRecord} from '../types/run.js'
import {redact} from '../util/redact.js'
import {runCommand} from './exec.js'
import {policyFrom, type LoadedPolicy} from './policy.js'
import {warnOnce} from './sandbox.js'

export type ToolVersions = NonNullable<RunRecord['tool_versions']>
type Measured = NonNullable<ToolVersions[string]>

/** Long enough for any interpreter to print its version on a loaded machine; a tool that takes longer is recorded as missing. */
const VERSION_TIMEOUT_MS = 10000

/** The first thing in a tool's answer that looks like a version: `v20.20.0`, `Python 3.11.2`, `git version 2.39.5`. */
function versionIn(text: string): string | null {
  return /\bv?(\d+(?:\.\d+)+|\d+)\b/.exec(text)?.[0] ?? null
}

/** Whether `declared` is `measured` or a prefix of it by dot-separated parts ("20" and "20.20" match v20.20.0; "2" does not match 20.1). */
export function versionMatches(declared: string, measured: string): boolean {
  const parts = (v: string): string[] => v.trim().replace(/^v/i, '').split('.')
  const want = parts(declared)
  const have = parts(measured)
  return want.length <= have.length && want.every((part, i) => part === have[i])
}

/** Measures each tool the policy declares, in the run's directory. Null when it declares none. */
export async function measureToolVersions(policy: LoadedPolicy, cwd: string, signal?: AbortSignal): Promise<ToolVersions | null> {
  const declared = Object.entries(policy.policy.tool_versions ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string')
  if (declared.length === 0) return null
  const out: ToolVersions = {}
  for (const [tool, version] of declared) {
    const argv: [string, ...string[]] = [tool, '--version']
    // Asking for a version is pipe's own act, not the pipeline's: only that argv is allowed, under the run's sandbox and limits.
    const asking: LoadedPolicy = {
      ...policyFrom({...policy.policy, allowed_commands: [argv]}, policy.file),
      ...(policy.protected ? {protected: policy.protected} : {}),
    }
    let text = ''
    let ok = false
    try {
      const result = await runCommand(asking, cwd, {argv, timeoutMs: VERSION_TIMEOUT_MS, ...(signal ? {signal} : {})})
      text = `${result.stdout.head}${result.stdout.tail}`.trim() || `${result.stderr.head}${result.stderr.tail}`.trim()
      ok = result.exit_code === 0 && !result.spawn_error && !result.timed_out
    } catch (error) {
      // A tool name the policy cannot even ask about (a path outside the repository) is missing, as an absent one is.
      text = (error as Error).message
    }
    const actual = ok ? versionIn(text) : null
    const first = redact(text.split('\n')[0] ?? '').slice(0, 200)
    out[tool] = {
      declared: version,
      actual,
      status: actual === null ? 'missing' : versionMatches(version, actual) ? 'match' : 'mismatch',
      ...(actual === null && first !== '' ? {output: first} : {}),
    }
  }
  return out
}

/** What a run does with measured versions that disagree with the declared ones: warn on stderr, or refuse it (E_POLICY_DENIED) before it exists. */
export function judgeToolVersions(policy: LoadedPolicy, measured: ToolVersions): void {
  const off = Object.entries(measured).filter((e): e is [string, Measured] => e[1] !== undefined && e[1].status !== 'match')
  if (off.length === 0) return
  const said = off
    .map(([tool, m]) =>
      m.status === 'missing'
        ? `${tool}: declared ${m.declared}, not installed${m.output ? ` (${m.output})` : ''}`
        : `${tool}: declared ${m.declared}, running ${m.actual}`,
    )
    .join('; ')
  const where = policy.file ?? 'the built-in policy'
  if (policy.policy.tool_versions_mismatch === 'refuse') {
    throw new PipeError('E_POLICY_DENIED', `the tools do not match tool_versions in ${where}: ${said}; no run was started`, {
      hint: `Install the declared versions, or change tool_versions in ${where} to the ones that run (or set tool_versions_mismatch: warn).`,
      details: {tool_versions: measured},
    })
  }
  warnOnce(`the tools do not match tool_versions in ${where}: ${said} (the run records both; tool_versions_mismatch: refuse stops such a run)`)
}
