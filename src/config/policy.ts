/** Loads policy.yaml: YAML with positions, the schema, then the rules the schema cannot express. */
import {existsSync} from 'node:fs'
import path from 'node:path'
import {defaultPolicy, policyFrom, type LoadedPolicy} from '../policy/policy.js'
import {ARG, PATH, REST, checkCommand} from '../policy/rules.js'
import type {Policy} from '../types/policy.js'
import type {Diagnostic} from './diagnostics.js'
import {validateDocument} from './document.js'
import {locate} from './yaml-source.js'

const PLACEHOLDERS = new Set([ARG, PATH, REST])

export type PolicyResult = {ok: true; loaded: LoadedPolicy} | {ok: false; diagnostics: Diagnostic[]}

export async function loadPolicyFile(file: string): Promise<PolicyResult> {
  const result = await validateDocument<Policy>(file, 'policy', 'policy')
  if (!result.ok) return result
  const diagnostics: Diagnostic[] = []
  result.data.forbidden_paths.forEach((glob, i) => {
    if (path.isAbsolute(glob) || glob.split('/').includes('..')) {
      const pos = locate(result.source, ['forbidden_paths', i])
      diagnostics.push({file, ...pos, path: `forbidden_paths[${i}]`, message: `"${glob}" must be relative to the repository root, without ..`, rule: 'relative-glob'})
    }
  })
  result.data.allowed_commands.forEach((entry, i) => {
    const problem = PLACEHOLDERS.has(entry[0])
      ? `the program, element 0, must be a literal, not "${entry[0]}"`
      : entry.slice(0, -1).includes(REST)
        ? `"${REST}" may only be the last element (it allows any further arguments)`
        : null
    if (problem) {
      const pos = locate(result.source, ['allowed_commands', i])
      diagnostics.push({file, ...pos, path: `allowed_commands[${i}]`, message: `${JSON.stringify(entry)}: ${problem}`, rule: 'command-pattern'})
    }
  })
  ;(result.data.tools_preapproved ?? []).forEach((entry, i) => {
    const problem = PLACEHOLDERS.has(entry[0]) ? `the program, element 0, must be a literal, not "${entry[0]}"` : entry.slice(0, -1).includes(REST) ? `"${REST}" may only be the last element (it allows any further arguments)` : null
    if (problem) diagnostics.push({file, ...locate(result.source, ['tools_preapproved', i]), path: `tools_preapproved[${i}]`, message: `${JSON.stringify(entry)}: ${problem}`, rule: 'command-pattern'})
  })
  const loaded = policyFrom(result.data, path.resolve(file))
  for (const [ext, entry] of Object.entries(result.data.syntax_checks ?? {}) as Array<[string, string[]]>) {
    if (!entry.includes(PATH) || PLACEHOLDERS.has(entry[0]!)) {
      diagnostics.push({file, ...locate(result.source, ['syntax_checks', ext]), path: `syntax_checks.${ext}`, message: `${JSON.stringify(entry)}: a checker is a literal program and must name the file with "${PATH}"`, rule: 'command-pattern'})
      continue
    }
    // A checker the allow-list refuses cannot start, so no edit of such a file could stay: say so now, not at the first edit.
    const argv = entry.map((a) => (a === PATH ? `example${ext}` : a))
    const verdict = checkCommand(loaded, argv, {root: path.dirname(path.resolve(file))})
    if (!verdict.allowed) {
      diagnostics.push({
        file,
        ...locate(result.source, ['syntax_checks', ext]),
        path: `syntax_checks.${ext}`,
        message: `${JSON.stringify(entry)} is not allowed by allowed_commands (checked as ${JSON.stringify(argv)}): ${verdict.reason}; every edit of a ${ext} file would be rolled back. Add an allowed_commands entry for it`,
        rule: 'syntax-check-allowed',
      })
    }
  }
  if (diagnostics.length > 0) return {ok: false, diagnostics}
  return {ok: true, loaded}
}

/** The policy a run uses: --policy FILE, else policy.yaml in the working directory, else the built-in default. */
export async function resolvePolicy(explicit: string | undefined, cwd: string): Promise<PolicyResult> {
  if (explicit !== undefined) return loadPolicyFile(path.resolve(cwd, explicit))
  const local = path.join(cwd, 'policy.yaml')
  if (existsSync(local)) return loadPolicyFile(local)
  return {ok: true, loaded: defaultPolicy()}
}
