/**
 * `pipe attest verify FILE`: offline and without a store. Every envelope's signature is checked
 * against the keys the verifier trusts (a revoked one refused), every statement's shape, and each
 * named file against a subject's digest. What fails is E_INTEGRITY naming it; nothing is written.
 */
import * as crypto from 'node:crypto'
import path from 'node:path'
import {formatDiagnostic} from '../../config/diagnostics.js'
import {loadPolicyFile} from '../../config/policy.js'
import {PipeError} from '../../errors.js'
import type {SignedDecision} from '../../types/run.js'
import {decisionSignatureProblem, describeDecision} from '../../util/decision-signature.js'
import {decodeBase64, keyIdOf, publicKeyFromRaw, verifySignature, type Envelope} from '../../util/dsse.js'
import type {RunStore} from '../../store/types.js'
import {checkAgainstStore} from './against-store.js'
import {hashSubject, readBundle} from './files.js'
import {PAYLOAD_TYPE} from './attest.js'
import {PIPE_RUN_PREDICATE, SLSA_PROVENANCE, STATEMENT_TYPE} from './statement.js'
import {readFile} from '../../util/fs-async.js'

export interface TrustedKey {
  id: string
  name: string
  key: crypto.KeyObject
  revoked: boolean
}

export interface VerifyReport {
  ok: true
  file: string
  signed_by: Array<{id: string; name: string}>
  run: {
    run_id: string
    status: string | null
    pipeline: unknown
    input: unknown
    started: string | null
    finished: string | null
    builder: string | null
    chain_head: unknown
  }
  models: string[]
  decisions: unknown[]
  /** Each person's signed decision the run statement carries: who signed what, with which key, and whether the verifier trusts it. */
  signed_decisions: Array<{
    run_id: string
    step: string
    decision: string
    by: SignedDecision['by']
    at: string
    key_id: string
    key_name: string | null
    trust: 'trusted' | 'untrusted'
  }>
  subjects: Array<{name: string; digest: Record<string, string>}>
  checked_subjects: Array<{file: string; name: string; sha256: string}>
  /** With --store: the store's records of the run passed the audit and give the very statements signed. */
  store?: {checked: true; snapshots: number}
}

const refuse = (message: string, hint: string): PipeError => new PipeError('E_INTEGRITY', message, {hint})
const HINT_ALTERED = 'The attestation was altered or is not the one pipe attest wrote: get it again from whoever made it, and never edit it by hand.'

/** The keys a --key file or a --policy file trusts. */
export async function trustedKeys(from: {key?: string; policy?: string}): Promise<TrustedKey[]> {
  if (from.key !== undefined) {
    let key: crypto.KeyObject
    try {
      const text = await readFile(from.key)
      // A private key file holds its public key too: accepted, so the signer can check their own attestation.
      key = text.includes('PRIVATE KEY') ? crypto.createPublicKey(crypto.createPrivateKey(text)) : crypto.createPublicKey(text)
      if (key.asymmetricKeyType !== 'ed25519') throw new Error(`is a ${key.asymmetricKeyType} key, not Ed25519`)
    } catch (error) {
      throw new PipeError('E_INVALID_ARGS', `--key ${from.key} is not an Ed25519 public key: ${(error as Error).message}`, {
        hint: 'Give the NAME.pub file pipe keys generate wrote (a PEM public key), or --policy with the trusted keys.',
      })
    }
    return [{id: keyIdOf(key), name: path.basename(from.key), key, revoked: false}]
  }
  if (from.policy === undefined)
    throw new PipeError('E_INVALID_ARGS', 'say whose signatures you trust: --key PUBKEY or --policy policy.yaml', {
      hint: 'pipe attest verify FILE --policy policy.yaml (its attestation.trusted_keys), or --key NAME.pub.',
    })
  const result = await loadPolicyFile(from.policy)
  if (!result.ok)
    throw new PipeError('E_CONFIG', `${from.policy} is not a valid policy:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {
      hint: 'Fix the lines named above (pipe policy check shows them), then verify again.',
    })
  const listed = result.loaded.policy.attestation?.trusted_keys ?? []
  if (listed.length === 0)
    throw new PipeError('E_CONFIG', `${from.policy} trusts no key: it has no attestation.trusted_keys`, {
      hint: "Add the signer's entry (pipe keys list --json prints it) under attestation: {trusted_keys: [...]}, or give --key NAME.pub.",
    })
  return listed.map((k) => ({id: k.id, name: k.name, key: publicKeyFromRaw(Buffer.from(k.public_key, 'base64')), revoked: k.revoked === true}))
}

function parseEnvelope(line: string, where: string): Envelope {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    throw refuse(`${where} is not JSON (truncated or damaged)`, HINT_ALTERED)
  }
  const e = value as Partial<Envelope> | null
  if (typeof e !== 'object' || e === null || Array.isArray(e)) throw refuse(`${where} is not a DSSE envelope (not an object)`, HINT_ALTERED)
  if (typeof e.payloadType !== 'string' || typeof e.payload !== 'string' || !Array.isArray(e.signatures) || e.signatures.length === 0)
    throw refuse(`${where} is not a DSSE envelope: it needs payloadType, payload and at least one signature`, HINT_ALTERED)
  for (const s of e.signatures as unknown[]) {
    const sig = s as {keyid?: unknown; sig?: unknown} | null
    if (typeof sig !== 'object' || sig === null || typeof sig.sig !== 'string' || (sig.keyid !== undefined && typeof sig.keyid !== 'string'))
      throw refuse(`${where} has a signature that is not {keyid, sig}`, HINT_ALTERED)
  }
  if (e.payloadType !== PAYLOAD_TYPE) throw refuse(`${where} has payloadType ${JSON.stringify(e.payloadType)}, not ${PAYLOAD_TYPE}`, HINT_ALTERED)
  return e as Envelope
}

/** The first trusted, valid signature; else what was wrong with each. */
function signer(envelope: Envelope, payload: Buffer, trusted: TrustedKey[], where: string): TrustedKey {
  const problems: string[] = []
  for (const s of envelope.signatures) {
    const sig = decodeBase64(s.sig)
    if (!sig) {
      problems.push(`a signature is not standard base64 (re-encoded?)`)
      continue
    }
    // The keyid is a hint: a signature with none is tried against every trusted key.
    const candidates = s.keyid ? trusted.filter((k) => k.id === s.keyid) : trusted
    if (candidates.length === 0) {
      problems.push(`signed by key ${s.keyid}, which is not trusted`)
      continue
    }
    for (const k of candidates) {
      if (!verifySignature(envelope, payload, sig, k.key)) {
        problems.push(`the signature by ${k.name} (${k.id}) does not verify: the payload or the signature was changed`)
        continue
      }
      if (k.revoked) {
        problems.push(`signed by ${k.name} (${k.id}), a revoked key`)
        continue
      }
      return k
    }
  }
  throw refuse(
    `${where}: ${problems.join('; ')}`,
    problems.some((p) => p.includes('revoked') || p.includes('not trusted'))
      ? 'Only a signature by a key your policy trusts and has not revoked counts: ask for an attestation signed by one (pipe attest RUN --key), or check attestation.trusted_keys.'
      : HINT_ALTERED,
  )
}

interface StatementShape {
  _type: string
  subject: Array<{name: string; digest: Record<string, string>}>
  predicateType: string
  predicate: Record<string, unknown>
}

function parseStatement(payload: Buffer, where: string): StatementShape {
  let value: unknown
  try {
    value = JSON.parse(payload.toString('utf8'))
  } catch {
    throw refuse(`${where}: the payload is not JSON`, HINT_ALTERED)
  }
  const s = value as Partial<StatementShape> | null
  const subjectsOk =
    Array.isArray(s?.subject) &&
    s.subject.length > 0 &&
    s.subject.every(
      (x) => typeof x?.name === 'string' && typeof x.digest === 'object' && x.digest !== null && Object.values(x.digest).every((d) => typeof d === 'string'),
    )
  if (!s || s._type !== STATEMENT_TYPE || !subjectsOk || typeof s.predicateType !== 'string' || typeof s.predicate !== 'object' || s.predicate === null)
    throw refuse(`${where}: the payload is not an in-toto Statement v1 (_type, subject with name and digest, predicateType, predicate)`, HINT_ALTERED)
  return s as StatementShape
}

export async function verifyAttestation(
  file: string,
  options: {subjects: string[]; trusted: TrustedKey[]; store?: {store: RunStore; pipeVersion: string}},
): Promise<VerifyReport> {
  const text = await readBundle(file)
  const lines = text.split('\n').filter((l) => l.trim() !== '')
  if (lines.length === 0) throw refuse(`${file} holds no envelope (empty or truncated)`, HINT_ALTERED)
  const statements: StatementShape[] = []
  const signers = new Map<string, string>()
  lines.forEach((line, i) => {
    const where = `${file} line ${i + 1}`
    const envelope = parseEnvelope(line, where)
    const payload = decodeBase64(envelope.payload)
    if (!payload) throw refuse(`${where}: the payload is not standard base64 (re-encoded or truncated)`, HINT_ALTERED)
    const k = signer(envelope, payload, options.trusted, where)
    signers.set(k.id, k.name)
    statements.push(parseStatement(payload, where))
  })
  // pipe attest writes exactly these two: a statement taken out would verify what is left while hiding,
  // say, the decisions; one added twice or of another type was put there by someone else.
  const provenance = statements.find((s) => s.predicateType === SLSA_PROVENANCE)
  const runStatement = statements.find((s) => s.predicateType === PIPE_RUN_PREDICATE)
  if (statements.length !== 2 || !provenance || !runStatement) {
    const types = statements.map((s) => s.predicateType).join(', ')
    throw refuse(
      `${file} holds ${statements.length} envelope${statements.length === 1 ? '' : 's'} (${types}); pipe attest writes one SLSA provenance and one run statement (${SLSA_PROVENANCE}, ${PIPE_RUN_PREDICATE})`,
      HINT_ALTERED,
    )
  }
  const details = provenance.predicate.runDetails as
    | {
        builder?: {id?: string}
        metadata?: {invocationId?: string; startedOn?: string; finishedOn?: string}
        byproducts?: Array<{name?: string; digest?: unknown}>
      }
    | undefined
  const definition = provenance.predicate.buildDefinition as {externalParameters?: {pipeline?: unknown; input?: unknown}} | undefined
  const runId = details?.metadata?.invocationId
  if (typeof runId !== 'string') throw refuse(`${file}: the provenance names no run (runDetails.metadata.invocationId)`, HINT_ALTERED)
  const pipePredicate = runStatement.predicate as
    {run?: {run_id?: string; status?: string}; model_requests?: Array<{model?: string | null}>; decisions?: unknown[]} | undefined
  // Two statements of one bundle must be about the same run and the same artifacts, or one was swapped in from another bundle.
  if (pipePredicate?.run?.run_id !== runId)
    throw refuse(`${file}: the run statement is about ${pipePredicate?.run?.run_id}, the provenance about ${runId}`, HINT_ALTERED)
  if (JSON.stringify(runStatement.subject) !== JSON.stringify(provenance.subject))
    throw refuse(`${file}: the run statement and the provenance name different subjects`, HINT_ALTERED)
  const signedDecisions = checkSignedDecisions(pipePredicate?.decisions ?? [], options.trusted, file)
  const checked: VerifyReport['checked_subjects'] = []
  for (const subjectFile of options.subjects) {
    const digest = await hashSubject(subjectFile)
    const given = subjectFile.split(path.sep).join('/')
    const matching = provenance.subject.filter((s) => s.digest.sha256 === digest)
    const match = matching.find((s) => s.name === given || given.endsWith(`/${s.name}`)) ?? matching[0]
    if (!match) {
      const named = provenance.subject.find((s) => s.name === subjectFile.split(path.sep).join('/') || path.basename(s.name) === path.basename(subjectFile))
      throw refuse(
        `${subjectFile} (sha256:${digest}) is not a subject of ${file}${named ? `: ${named.name} was attested as sha256:${named.digest.sha256 ?? '(no sha256)'}` : ''}`,
        "The file is not what the run made (changed after the run, or another file): get it again from the run's output.",
      )
    }
    checked.push({file: subjectFile, name: match.name, sha256: `sha256:${digest}`})
  }
  const againstStore = options.store ? await checkAgainstStore(options.store.store, runId, statements, options.store.pipeVersion) : undefined
  const models = [...new Set((pipePredicate?.model_requests ?? []).map((m) => m.model).filter((m): m is string => typeof m === 'string'))]
  return {
    ok: true,
    file,
    signed_by: [...signers].map(([id, name]) => ({id, name})),
    run: {
      run_id: runId,
      status: pipePredicate?.run?.status ?? null,
      pipeline: definition?.externalParameters?.pipeline ?? null,
      input: definition?.externalParameters?.input ?? null,
      started: details?.metadata?.startedOn ?? null,
      finished: details?.metadata?.finishedOn ?? null,
      builder: details?.builder?.id ?? null,
      chain_head: details?.byproducts?.find((b) => b.name === 'pipe-chain-head')?.digest ?? null,
    },
    models,
    decisions: pipePredicate?.decisions ?? [],
    signed_decisions: signedDecisions,
    subjects: provenance.subject,
    checked_subjects: checked,
    ...(againstStore ? {store: {checked: true, snapshots: againstStore.audited}} : {}),
  }
}

/**
 * People's signatures over their decisions, inside the signed statement: each must hold over the
 * decision it carries (else the statement was built from altered records), and one by a key the
 * verifier's policy revoked is refused as an envelope's would be; a key it does not name is said.
 */
function checkSignedDecisions(decisions: unknown[], trusted: TrustedKey[], file: string): VerifyReport['signed_decisions'] {
  const out: VerifyReport['signed_decisions'] = []
  for (const d of decisions) {
    const signed = (d as {signed?: unknown} | null)?.signed as SignedDecision | undefined
    if (signed === undefined) continue
    const bad = decisionSignatureProblem(signed)
    if (bad)
      throw refuse(
        `${file}: ${describeDecision(signed)} of run ${String(signed.run_id)}: the signed decision ${bad}`,
        "The run's records were altered before they were attested: pipe audit verify on the store names what changed.",
      )
    const key = trusted.find((k) => k.id === signed.signature.key_id)
    if (key?.revoked)
      throw refuse(
        `${file}: ${describeDecision(signed)} of run ${signed.run_id} was signed by ${key.name} (${key.id}), a revoked key`,
        "A decision signed by a revoked key is no longer anyone's word: have the person decide again with a key the policy trusts.",
      )
    out.push({
      run_id: signed.run_id,
      step: signed.step,
      decision: signed.decision,
      by: signed.by,
      at: signed.at,
      key_id: signed.signature.key_id,
      key_name: key?.name ?? null,
      trust: key ? 'trusted' : 'untrusted',
    })
  }
  return out
}
