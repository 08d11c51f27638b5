/**
 * Loads policy.yaml: YAML with positions, the schema, then the rules the schema cannot express; then
 * the effective policy (the built-in one with the file over it), checked whole.
 */
import {createHash} from 'node:crypto'
import path from 'node:path'
import {DEFAULT_POLICY, defaultPolicy, effectivePolicy, policyFrom, type LoadedPolicy, type PolicyFile} from '../policy/policy.js'
import {approvalProblems} from '../policy/approvals.js'
import {ARG, PATH, REST, checkCommand} from '../policy/rules.js'
import {check, loadSchema} from '../schema/registry.js'
import {findUpward} from '../util/discover.js'
import {didYouMean} from '../util/suggest.js'
import type {Diagnostic} from './diagnostics.js'
import {validateDocument} from './document.js'
import {locate} from './yaml-source.js'

const PLACEHOLDERS = new Set([ARG, PATH, REST])

export type PolicyResult = {ok: true; loaded: LoadedPolicy} | {ok: false; diagnostics: Diagnostic[]}

export async function loadPolicyFile(file: string): Promise<PolicyResult> {
  const result = await validateDocument<PolicyFile>(file, 'policy', 'policy')
  if (!result.ok) return result
  const diagnostics: Diagnostic[] = []
  ;(result.data.forbidden_paths ?? []).forEach((glob, i) => {
    if (path.isAbsolute(glob) || glob.split('/').includes('..')) {
      const pos = locate(result.source, ['forbidden_paths', i])
      diagnostics.push({
        file,
        ...pos,
        path: `forbidden_paths[${i}]`,
        message: `"${glob}" must be relative to the repository root, without ..`,
        rule: 'relative-glob',
      })
    }
  })
  ;(result.data.allowed_commands ?? []).forEach((entry, i) => {
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
    const problem = PLACEHOLDERS.has(entry[0])
      ? `the program, element 0, must be a literal, not "${entry[0]}"`
      : entry.slice(0, -1).includes(REST)
        ? `"${REST}" may only be the last element (it allows any further arguments)`
        : null
    if (problem)
      diagnostics.push({
        file,
        ...locate(result.source, ['tools_preapproved', i]),
        path: `tools_preapproved[${i}]`,
        message: `${JSON.stringify(entry)}: ${problem}`,
        rule: 'command-pattern',
      })
  })
  // A key listed under an id that is not its own would let a verifier name the wrong signer.
  ;(result.data.attestation?.trusted_keys ?? []).forEach((entry, i) => {
    const own = `sha256:${createHash('sha256').update(Buffer.from(entry.public_key, 'base64')).digest('hex')}`
    if (entry.id !== own)
      diagnostics.push({
        file,
        ...locate(result.source, ['attestation', 'trusted_keys', i, 'id']),
        path: `attestation.trusted_keys[${i}].id`,
        message: `${entry.id} is not the id of this public_key (${own}); copy the entry pipe keys generate or pipe keys list --json prints`,
        rule: 'key-id',
      })
  })
  // A kind no step has would confirm nothing, silently: the person who wrote it believes those steps wait.
  const kinds = (result.data.confirm as {kinds?: string[]} | undefined)?.kinds ?? []
  if (Array.isArray(result.data.confirm) === false && kinds.length > 0) {
    const known = stepKinds()
    kinds.forEach((kind, i) => {
      if (!known.includes(kind))
        diagnostics.push({
          file,
          ...locate(result.source, ['confirm', 'kinds', i]),
          path: `confirm.kinds[${i}]`,
          message: `"${kind}" is not a step kind, so it would confirm nothing${didYouMean(kind, known)} (the kinds are ${known.join(', ')})`,
          rule: 'confirm-kind',
        })
    })
  }
  // Every approvals problem at once, each quoting its value: a rule no one can meet is refused now, not at the gate.
  for (const problem of approvalProblems(result.data)) {
    const at = problem.path
      .map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`))
      .join('')
      .slice(1)
    diagnostics.push({file, ...locate(result.source, problem.path), path: at, message: problem.message, rule: 'approvals'})
  }
  // Syntax checkers are judged against the policy that applies: the built-in one with this file over it.
  const effective = effectivePolicy(result.data)
  const loaded = policyFrom(effective, path.resolve(file))
  for (const [ext, entry] of Object.entries(effective.syntax_checks ?? {}) as Array<[string, string[]]>) {
    if (!entry.includes(PATH) || PLACEHOLDERS.has(entry[0]!)) {
      diagnostics.push({
        file,
        ...locate(result.source, ['syntax_checks', ext]),
        path: `syntax_checks.${ext}`,
        message: `${JSON.stringify(entry)}: a checker is a literal program and must name the file with "${PATH}"`,
        rule: 'command-pattern',
      })
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
  const problems = effectiveProblems(effective)
  if (problems.length > 0)
    return {
      ok: false,
      diagnostics: problems.map((message) => ({
        file,
        line: 1,
        col: 1,
        path: '',
        message: `the effective policy (the built-in one with this file over it) ${message}`,
        rule: 'effective-policy',
      })),
    }
  return {ok: true, loaded}
}

/** The step kinds the pipeline schema knows (its step branches' kind constants). */
function stepKinds(): string[] {
  const schema = loadSchema('pipeline') as {definitions: Record<string, {oneOf?: Array<{$ref: string}>; properties?: {kind?: {const?: string}}}>}
  return (schema.definitions['step']?.oneOf ?? [])
    .map((branch) => schema.definitions[branch.$ref.replace('#/definitions/', '')]?.properties?.kind?.const)
    .filter((kind): kind is string => typeof kind === 'string')
}

/** What is wrong with an effective policy as a whole: every key present, every value as the schema says. */
export function effectiveProblems(effective: unknown): string[] {
  const missing = Object.keys(DEFAULT_POLICY).filter((key) => (effective as Record<string, unknown>)[key] === undefined)
  const result = check('policy', effective)
  return [...missing.map((key) => `has no ${key}`), ...result.errors.map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword}`)]
}

/** The policy.yaml a command in cwd uses when none is named: the nearest one upward to the repository root. */
export function discoverPolicyFile(cwd: string, ceiling?: string): string | null {
  return findUpward(cwd, 'policy.yaml', 'file', ceiling).found
}

/** The policy a run uses: --policy FILE, else the nearest policy.yaml (see discoverPolicyFile), else the built-in default. */
export async function resolvePolicy(explicit: string | undefined, cwd: string, ceiling?: string): Promise<PolicyResult> {
  if (explicit !== undefined) return loadPolicyFile(path.resolve(cwd, explicit))
  const local = discoverPolicyFile(cwd, ceiling)
  if (local !== null) return loadPolicyFile(local)
  return {ok: true, loaded: defaultPolicy()}
}
