import {PipeError} from '../errors.js'
import {sha256} from '../util/hash.js'
import {decodeText} from '../util/text-input.js'
import {language} from '../providers/offline/text.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepHandler} from './types.js'

export interface IngestResult {
  source_ref: string
  source_kind: 'file' | 'stdin' | 'text'
  sha256: string
  bytes: number
  chars: number
  lines: number
  language: string
  /** The requirement, normalised (LF, NFC, no BOM). */
  text: string
}

export type IngestOutputs = {ingest_result: IngestResult}

/** The ingested requirement; the model steps read the newest one. */
export const ingestResult = outputsOf<IngestOutputs>()('ingest_result')

export const ingest: StepHandler<'ingest'> = {
  kind: 'ingest',
  summary: 'read the run input, normalise it and record it as evidence',
  outcomes: () => ['success'],
  changesSpec: false,
  safeToRetry: true,
  readsInput: true,
  async run({step, run, policy}) {
    if (run.input.kind === 'none' || run.input.text === undefined) {
      throw new PipeError('E_INPUT', 'this run has no input to ingest', {hint: 'Start the run with --input FILE, --input - (stdin) or --text "..."'})
    }
    const limit = step.max_bytes ?? policy.policy.resource_limits.max_input_bytes
    const text = decodeText(Buffer.from(run.input.text, 'utf8'), `input ${run.input.ref}`, limit)
    const hash = sha256(text)
    const lines = text.split('\n').length - 1
    const result: IngestResult = {
      source_ref: run.input.ref,
      source_kind: run.input.kind,
      sha256: hash,
      bytes: Buffer.byteLength(text),
      chars: [...text].length,
      lines,
      language: language(text),
      text,
    }
    return {
      type: 'done',
      outcome: 'success',
      reason: `ingested ${result.bytes} bytes (${lines} lines, ${result.language}) from ${run.input.ref}`,
      inputs: {source_ref: run.input.ref},
      outputs: {ingest_result: result} satisfies IngestOutputs & KindOutputs<'ingest'>,
      evidence: [
        {
          type: run.input.kind === 'file' ? 'file' : 'doc',
          source: {ref: run.input.ref, hash},
          content: {excerpt: [...text].slice(0, 500).join(''), note: 'the requirement as given to the run, normalised (LF, NFC, no BOM)'},
          linked_to: [{step: step.id}, {run_id: run.run_id}],
          link: run.input.kind === 'file' ? 'file' : 'doc',
        },
      ],
    }
  },
}
