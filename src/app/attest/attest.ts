/**
 * `pipe attest RUN`: the run's statements, each serialised once and signed as a DSSE envelope, one
 * envelope a line (an in-toto JSON-lines bundle, as SLSA's *.intoto.jsonl files are).
 */
import {createHash} from 'node:crypto'
import {PipeError} from '../../errors.js'
import type {RunStore} from '../../store/types.js'
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
}

export async function attestRun(store: RunStore, runId: string, options: {out: string; key?: string; pipeVersion: string}): Promise<AttestResult> {
  // The key first: a missing key is said before any record is read, and nothing is written.
  const signer = await loadSigningKey(options.key)
  const {provenance, run} = await buildStatements(store, runId, options.pipeVersion)
  const lines = [provenance, run].map((statement) => JSON.stringify(signEnvelope(PAYLOAD_TYPE, Buffer.from(JSON.stringify(statement), 'utf8'), signer.key)))
  const text = `${lines.join('\n')}\n`
  await writeNew(options.out, text)
  return {
    run_id: runId,
    file: options.out,
    sha256: `sha256:${createHash('sha256').update(text).digest('hex')}`,
    key_id: signer.id,
    subjects: provenance.subject,
    predicate_types: [provenance.predicateType, run.predicateType],
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
