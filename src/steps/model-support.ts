/** What the model step kinds share: reading the current spec, the ingested text, and turning citations into evidence. */
import {readFile} from '../util/fs-async.js'
import path from 'node:path'
import {fileEscape} from '../config/pipeline-files.js'
import {loadOutputSchema} from '../config/output-schema.js'
import type {KindFinding} from '../config/kind-contract.js'
import type {LoadedPipeline} from '../config/loaded.js'
import {promptText, stepDir} from '../config/positions.js'
import {didYouMean} from '../util/suggest.js'
import {PipeError} from '../errors.js'
import type {ChatCall} from '../providers/chat.js'
import type {Citation, SpecBody} from '../providers/types.js'
import type {Step} from '../types/pipeline.js'
import type {CanonicalSpec} from '../types/spec.js'
import {variablesUsed} from '../util/template.js'
import {ingestResult, type IngestResult} from './ingest.js'
import type {EvidenceDraft, StepContext, StepDone} from './types.js'

export function bodyOf(spec: CanonicalSpec): SpecBody {
  const {meta: _meta, ...body} = spec
  return structuredClone(body)
}

export function requireSpec(context: StepContext, why: string): CanonicalSpec {
  if (!context.spec) {
    throw new PipeError('E_STATE', `step "${context.step.id}" needs a spec to ${why}, but the run has none yet`, {
      hint: 'Put a step that writes a spec (compile) before it in the pipeline.',
    })
  }
  return context.spec
}

export function requireIngest(context: StepContext): IngestResult {
  const result = ingestResult.latest(context.history)
  if (!result) {
    throw new PipeError('E_STATE', `step "${context.step.id}" needs ingested input, but no ingest step has run`, {
      hint: 'Put an ingest step before it in the pipeline.',
    })
  }
  return result
}

function fold(text: string): string {
  return text.replace(/\s+/g, ' ').trim()
}

/** Line range of an excerpt in the text, or null when it does not occur (exactly or after folding white space). */
export function findExcerpt(text: string, excerpt: string): {from: number; to: number} | null {
  const clean = excerpt.replace(/…$/, '')
  let index = text.indexOf(clean)
  if (index === -1) {
    const folded = fold(text)
    const needle = fold(clean)
    if (needle === '' || !folded.includes(needle)) return null
    // Find the first line where the folded excerpt starts.
    const lines = text.split('\n')
    const firstWord = needle.split(' ')[0]!
    index = 0
    for (const line of lines) {
      if (line.includes(firstWord)) break
      index += line.length + 1
    }
  }
  const from = text.slice(0, index).split('\n').length
  const to = from + clean.split('\n').length - 1
  return {from, to}
}

/** Citations that occur in the source become quote evidence; the rest are dropped and reported. */
export function citationsToEvidence(
  citations: Citation[],
  source: IngestResult,
  stepId: string,
  runId: string,
): {evidence: NonNullable<StepDone['evidence']>; dropped: Citation[]} {
  const evidence: NonNullable<StepDone['evidence']> = []
  const dropped: Citation[] = []
  for (const citation of citations) {
    const at = findExcerpt(source.text, citation.excerpt)
    if (!at) {
      dropped.push(citation)
      continue
    }
    const draft: EvidenceDraft = {
      type: 'quote',
      source: {ref: `${source.source_ref}#L${at.from}${at.to > at.from ? `-L${at.to}` : ''}`, hash: source.sha256},
      content: {excerpt: [...citation.excerpt].slice(0, 500).join(''), ...(citation.note ? {note: [...citation.note].slice(0, 2000).join('')} : {})},
      linked_to: [{spec_path: `spec.${citation.spec_path}`}, {step: stepId}, {run_id: runId}],
    }
    evidence.push({...draft, link: 'quote'})
  }
  return {evidence, dropped}
}

/** The step's prompt template, when the pipeline names a prompt file. */
export async function promptOf(context: StepContext): Promise<string | undefined> {
  const file = 'prompt' in context.step ? context.step.prompt : undefined
  if (file === undefined) return undefined
  const dir = stepDir(context.pipeline, context.step.id)
  const escape = fileEscape(dir, file)
  if (escape)
    throw new PipeError('E_CONFIG', `prompt file "${file}" ${escape}`, {hint: "Keep prompt files inside the pipeline's directory; pipe validate reports this."})
  const full = path.resolve(dir, file)
  try {
    return await readFile(full, 'utf8')
  } catch (error) {
    throw new PipeError('E_CONFIG', `cannot read the prompt file ${full} (${(error as NodeJS.ErrnoException).code ?? String(error)})`, {
      hint: 'pipe validate checks that prompt files exist.',
    })
  }
}

/** Citations of answers that occur in the answer they name become evidence; the rest are dropped and reported. */
export function answerCitationsToEvidence(
  citations: Citation[],
  answers: Readonly<Record<string, string>>,
  stepId: string,
  runId: string,
): {evidence: NonNullable<StepDone['evidence']>; dropped: Citation[]} {
  const evidence: NonNullable<StepDone['evidence']> = []
  const dropped: Citation[] = []
  for (const citation of citations) {
    const answer = citation.question_id ? answers[citation.question_id] : undefined
    if (answer === undefined || !findExcerpt(answer, citation.excerpt)) {
      dropped.push(citation)
      continue
    }
    evidence.push({
      type: 'quote',
      link: 'quote',
      source: {ref: `run://${runId}/answers/${citation.question_id}`},
      content: {excerpt: [...citation.excerpt].slice(0, 500).join(''), note: `quoted from the answer to ${citation.question_id}`},
      linked_to: [{spec_path: `spec.${citation.spec_path}`}, {step: stepId}, {run_id: runId}],
    })
  }
  return {evidence, dropped}
}

export function withPrompt(prompt: string | undefined): {prompt?: string} {
  return prompt === undefined ? {} : {prompt}
}

/** Who a model request is for: named in recordings and in errors about a request. */
export function modelCall(context: StepContext): ChatCall {
  return {signal: context.signal, step: context.step.id, run: context.run.run_id, ...(context.budget ? {budget: context.budget} : {})}
}

/**
 * The checks a step that renders a prompt file shares (model, agent): its output schema compiles,
 * and every {{name}} of the prompt is a key of vars.
 */
export function promptStepFindings(rule: string, step: Extract<Step, {kind: 'model' | 'agent'}>, loaded: LoadedPipeline): KindFinding[] {
  const out: KindFinding[] = []
  const index = loaded.pipeline.steps.indexOf(step)
  const dir = stepDir(loaded, index)
  if (typeof step.output_schema === 'string' && !fileEscape(dir, step.output_schema)) {
    const schema = loadOutputSchema(dir, step.output_schema)
    if (!schema.ok) out.push({rule, at: ['output_schema'], message: `output_schema "${step.output_schema}" ${schema.problem}`})
  }
  const text = promptText(loaded, step, index)
  if (text === undefined) return out
  const names = Object.keys(step.vars ?? {})
  for (const use of variablesUsed(text)) {
    if (names.includes(use.name)) continue
    out.push({
      rule,
      at: ['prompt'],
      message: `prompt file "${step.prompt}" line ${use.line} column ${use.col} uses {{${use.name}}}, which is not a key of the step's vars${didYouMean(use.name, names)} (vars: ${names.join(', ') || 'none'})`,
    })
  }
  return out
}
