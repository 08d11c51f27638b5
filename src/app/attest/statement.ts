/**
 * The in-toto statements `pipe attest` signs, built from a run's records (and its child runs'):
 * a SLSA provenance v1 statement and pipe's own run statement (urn:pipe:attestation:run:v1), both
 * about the same subjects. Only what the records hold goes in, and of content only its hash: the
 * same run attested twice gives the same bytes.
 */
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {attestSubjects, views} from '../../steps/registry.js'
import type {AttestSubject} from '../../steps/types.js'
import type {RunStore} from '../../store/types.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import {canonicalJson, sha256} from '../../util/hash.js'

export const STATEMENT_TYPE = 'https://in-toto.io/Statement/v1'
export const SLSA_PROVENANCE = 'https://slsa.dev/provenance/v1'
export const PIPE_RUN_PREDICATE = 'urn:pipe:attestation:run:v1'
export const BUILD_TYPE = 'urn:pipe:attestation:build-type:run:v1'

export interface Statement {
  _type: typeof STATEMENT_TYPE
  subject: AttestSubject[]
  predicateType: string
  predicate: Record<string, unknown>
}

/** A run that can still change has not made what it will make: only an ended run is attested. */
const ENDED = new Set<RunRecord['status']>(['succeeded', 'failed', 'cancelled'])

interface RunRecords {
  run: RunRecord
  snapshots: Snapshot[]
  events: RunEvent[]
}

/** `sha256:HEX` as an in-toto DigestSet; a keyed seal (hmac-sha256:HEX) is named by its own algorithm. */
function digestOf(seal: string): Record<string, string> {
  const at = seal.indexOf(':')
  return {[seal.slice(0, at)]: seal.slice(at + 1)}
}

const hex = (data: string): string => sha256(data).slice('sha256:'.length)

async function readTree(store: RunStore, runId: string): Promise<RunRecords[]> {
  const run = await store.readRun(runId)
  const [snapshots, events] = await Promise.all([store.readSnapshots(runId), store.readEvents(runId)])
  const out: RunRecords[] = [{run, snapshots, events}]
  for (const child of await store.listChildren(runId)) out.push(...(await readTree(store, child.run_id)))
  return out
}

/** Where a path the run names is, as others can find it: relative to the run's repository, else its file name. */
function repoPath(run: RunRecord, file: string): string {
  const relative = path.relative(run.workspace ?? '', file)
  return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative.split(path.sep).join('/') : path.basename(file)
}

/** Each artifact once: a file written again is attested as it was last written, at the place it was first named. */
function subjectsOf(tree: RunRecords[]): AttestSubject[] {
  const byName = new Map<string, AttestSubject>()
  for (const {snapshots} of tree) for (const s of snapshots) for (const subject of attestSubjects(s)) byName.set(subject.name, subject)
  return [...byName.values()]
}

export async function buildStatements(store: RunStore, runId: string, pipeVersion: string): Promise<{provenance: Statement; run: Statement}> {
  const tree = await readTree(store, runId)
  const top = tree[0]!
  const {run} = top
  if (!ENDED.has(run.status))
    throw new PipeError('E_STATE', `run ${runId} is ${run.status}: only an ended run (succeeded, failed or cancelled) is attested`, {
      hint: `pipe resume ${runId} takes it to its end; then pipe attest ${runId}.`,
    })
  const subject = subjectsOf(tree)
  if (subject.length === 0)
    throw new PipeError('E_STATE', `run ${runId} made nothing to attest: no published spec version, written file or commit`, {
      hint: `pipe runs show ${runId} shows what it did; a run is attested for what it made.`,
    })
  const pipeline = {name: run.pipeline.name, path: repoPath(run, run.pipeline.path), digest: digestOf(run.pipeline.hash)}
  const input = run.input?.text !== undefined ? {kind: run.input.kind, digest: {sha256: hex(run.input.text)}} : undefined
  const provenance: Statement = {
    _type: STATEMENT_TYPE,
    subject,
    predicateType: SLSA_PROVENANCE,
    predicate: {
      buildDefinition: {
        buildType: BUILD_TYPE,
        externalParameters: {
          pipeline: {name: pipeline.name, path: pipeline.path, digest: pipeline.digest},
          ...(input ? {input} : {}),
          ...(run.inputs !== undefined ? {inputs: {digest: {sha256: hex(canonicalJson(run.inputs))}}} : {}),
        },
        internalParameters: {
          policy: {digest: digestOf(run.policy_version)},
          provider: {kind: run.provider?.kind ?? null, model: run.provider?.model ?? null},
        },
        resolvedDependencies: [
          {name: pipeline.path, digest: pipeline.digest, annotations: {role: 'pipeline'}},
          ...(input ? [{name: 'input', digest: input.digest, annotations: {role: 'input', kind: input.kind}}] : []),
          {
            name: 'policy',
            digest: digestOf(run.policy_version),
            annotations: {role: 'policy', note: 'sha256 of the effective policy (canonical JSON), as run.json records it'},
          },
        ],
      },
      runDetails: {
        builder: {id: `urn:pipe:builder:${run.owner?.host ?? 'unknown'}`, version: {pipe: pipeVersion}},
        metadata: {invocationId: run.run_id, startedOn: run.created_at, ...(run.ended_at ? {finishedOn: run.ended_at} : {})},
        byproducts: [
          ...(run.seal ? [{name: 'pipe-run-record', digest: digestOf(run.seal), annotations: {run_id: run.run_id}}] : []),
          ...(run.head?.snapshot_hash ? [{name: 'pipe-chain-head', digest: digestOf(run.head.snapshot_hash), annotations: {seq: run.head.seq}}] : []),
        ],
      },
    },
  }
  return {provenance, run: {_type: STATEMENT_TYPE, subject, predicateType: PIPE_RUN_PREDICATE, predicate: runPredicate(tree)}}
}

/** The timeline lines of a person's decision: a vote under an approvals rule, or the decision that continued the run. */
const DECISION_LINES = new Set(['answers_given', 'confirm_given', 'review_given', 'vote_cast', 'budget_granted'])

/** pipe's own predicate: what the run did, in order, each thing by its record's hash. */
function runPredicate(tree: RunRecords[]): Record<string, unknown> {
  const {run} = tree[0]!
  const steps: unknown[] = []
  const modelRequests: unknown[] = []
  const toolCalls: unknown[] = []
  const decisions: unknown[] = []
  const gates: unknown[] = []
  const specVersions: unknown[] = []
  for (const {run: r, snapshots, events} of tree) {
    for (const s of snapshots) {
      const at = {run_id: r.run_id, seq: s.step.seq, step: s.step.name}
      steps.push({
        ...at,
        kind: s.step.kind,
        outcome: s.decisions.at(-1)?.decision ?? null,
        spec_version_in: s.spec_version_in ?? null,
        spec_version_out: s.spec_version_out ?? null,
        record_hash: s.meta.record_hash ?? null,
        ...(s.meta.usage ? {tokens: {prompt: s.meta.usage.prompt_tokens, completion: s.meta.usage.completion_tokens, total: s.meta.usage.total_tokens}} : {}),
      })
      for (const call of s.meta.model_calls ?? [])
        modelRequests.push({...at, model: s.meta.llm_model, provider: s.meta.provider ?? null, request: call.key, source: call.source})
      const gate = views.gate.result.of(s)
      if (gate) gates.push({...at, pass: gate.pass, completeness_score: gate.completeness_score ?? null})
      if (s.spec_version_out) specVersions.push({...at, version: s.spec_version_out, digest: digestOf(s.meta.binds?.[s.spec_version_out] ?? 'sha256:')})
      const shown = typeof s.inputs.canonical_spec_ref === 'string' ? s.inputs.canonical_spec_ref : undefined
      for (const d of s.decisions) {
        if (!d.by) continue
        decisions.push({
          ...at,
          kind: s.step.kind,
          decision: d.decision,
          by: d.by,
          at: d.at ?? null,
          ...(shown && s.meta.binds?.[shown] ? {shown: {spec_version: shown, digest: digestOf(s.meta.binds[shown])}} : {}),
        })
      }
    }
    for (const e of events) {
      if (e.event === 'tool_call_result')
        toolCalls.push({
          run_id: r.run_id,
          step: e.step ?? null,
          seq: e.seq ?? null,
          call_id: e.call_id ?? null,
          tool: e.tool ?? null,
          level: e.level ?? null,
          decision: e.decision ?? null,
          ok: e.ok ?? null,
          record_hash: e.hash,
        })
      else if (e.by && DECISION_LINES.has(e.event))
        decisions.push({
          run_id: r.run_id,
          step: e.step ?? e.signed?.step ?? null,
          seq: e.seq ?? null,
          kind: e.event,
          by: e.by,
          at: e.at,
          record_hash: e.hash,
          // The person's own signature over what they decided, with exactly what it covers: checkable by anyone (pipe attest verify).
          ...(e.signed ? {signed: e.signed} : {}),
        })
    }
  }
  return {
    run: {
      run_id: run.run_id,
      status: run.status,
      feature_id: run.feature_id ?? null,
      pipeline: {name: run.pipeline.name, digest: digestOf(run.pipeline.hash)},
      policy: {digest: digestOf(run.policy_version)},
      spec_version: run.spec_version ?? null,
      children: tree.slice(1).map((t) => t.run.run_id),
    },
    steps,
    model_requests: modelRequests,
    tool_calls: toolCalls,
    decisions,
    gates,
    spec_versions: specVersions,
  }
}
