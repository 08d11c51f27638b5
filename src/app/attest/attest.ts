/**
 * `pipe attest RUN`: the run's statements, each serialised once and signed as a DSSE envelope, one
 * envelope a line (an in-toto JSON-lines bundle, as SLSA's *.intoto.jsonl files are).
 */
import {createHash} from 'node:crypto'
import {existsSync} from 'node:fs'
import {PipeError} from '../../errors.js'
import type {RunStore} from '../../store/types.js'
import type {RunRecord} from '../../types/run.js'
import {annotateCommits, ATTESTATION_NOTES_REF} from '../../vcs/git.js'
import {signEnvelope} from '../../util/dsse.js'
import {writeNamedFile} from '../../util/fs.js'
import {loadSigningKey} from './keys.js'
import {buildStatements} from './statement.js'

export const PAYLOAD_TYPE = 'application/vnd.in-toto+json'

export interface AttestResult {
  run_id: string
  file: string
  /** sha256 of the bundle file as written: what a commit trailer or a release note can name. */
  sha256: string
  key_id: string
  subjects: Array<{name: string; digest: Record<string, string>}>
  predicate_types: string[]
  /** The commits among the subjects that now carry a note naming this bundle (git log --notes=pipe). */
  git_notes: {ref: string; annotated: string[]; missing: string[]; skipped?: string}
}

export async function attestRun(
  store: RunStore,
  runId: string,
  options: {out: string; key?: string; pipeVersion: string; gitNotes?: boolean},
): Promise<AttestResult> {
  // The key first: a missing key is said before any record is read, and nothing is written.
  const signer = await loadSigningKey(options.key)
  const {provenance, run} = await buildStatements(store, runId, options.pipeVersion)
  const lines = [provenance, run].map((statement) => JSON.stringify(signEnvelope(PAYLOAD_TYPE, Buffer.from(JSON.stringify(statement), 'utf8'), signer.key)))
  const text = `${lines.join('\n')}\n`
  await writeNew(options.out, text)
  const digest = `sha256:${createHash('sha256').update(text).digest('hex')}`
  const commits = provenance.subject.flatMap((s) => ('gitCommit' in s.digest ? [s.digest.gitCommit] : []))
  return {
    run_id: runId,
    file: options.out,
    sha256: digest,
    key_id: signer.id,
    subjects: provenance.subject,
    predicate_types: [provenance.predicateType, run.predicateType],
    git_notes:
      options.gitNotes === false
        ? {ref: ATTESTATION_NOTES_REF, annotated: [], missing: commits, skipped: 'not asked (--no-git-notes)'}
        : await noteCommits(await store.readRun(runId), commits, `Pipe-Run: ${runId}\nPipe-Attestation: ${digest}\n`),
  }
}

/**
 * The bundle is written whatever happens here: a repository that is not on this machine (a
 * worker's) or that pipe may not run git in is said, and the commits keep their Pipe-Run trailer.
 */
async function noteCommits(run: RunRecord, commits: string[], note: string): Promise<AttestResult['git_notes']> {
  const none = (skipped: string): AttestResult['git_notes'] => ({ref: ATTESTATION_NOTES_REF, annotated: [], missing: commits, skipped})
  if (commits.length === 0) return {ref: ATTESTATION_NOTES_REF, annotated: [], missing: []}
  if (!run.workspace || !run.workspace_git || !existsSync(run.workspace_git))
    return none(`the run's repository is not on this machine (${run.workspace ?? 'unknown'})`)
  try {
    return {ref: ATTESTATION_NOTES_REF, ...(await annotateCommits(run.workspace, run.workspace_git, commits, note))}
  } catch (error) {
    return none(error instanceof PipeError ? error.message : String(error))
  }
}

/** Written as every file named on the command line is (util/fs.ts writeNamedFile): whole or not at all, and a link or device written through. */
async function writeNew(file: string, text: string): Promise<void> {
  try {
    writeNamedFile(file, text)
  } catch (error) {
    throw new PipeError('E_IO', `cannot write ${file}: ${(error as Error).message}`, {hint: 'Give --out a file in a folder you can write to.'})
  }
}
