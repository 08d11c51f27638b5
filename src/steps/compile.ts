import {PROMPT_VARIABLES} from '../providers/prompt.js'
import {bodyOf, citationsToEvidence, requireIngest, promptOf, modelCall, withPrompt} from './model-support.js'
import type {KindOutputs, StepHandler} from './types.js'

export const compile: StepHandler<'compile'> = {
  kind: 'compile',
  summary: 'compile the ingested input (and the spec so far) into a new spec version',
  outcomes: () => ['success'],
  changesSpec: true,
  safeToRetry: true,
  promptVariables: PROMPT_VARIABLES.compile,
  async run(context) {
    const source = requireIngest(context)
    const provider = await context.provider()
    const previous = context.spec ? bodyOf(context.spec) : null
    const reply = await provider.compile(
      {text: source.text, sourceRef: source.source_ref, previous, ...withPrompt(await promptOf(context))},
      modelCall(context),
    )
    const {body, title, missing_fields: missing} = reply.value
    const {evidence, dropped} = citationsToEvidence(reply.citations, source, context.step.id, context.run.run_id)
    if (missing.length > 0) {
      evidence.push({
        type: 'log',
        link: 'partial_success',
        source: {ref: `run://${context.run.run_id}/${context.step.id}`},
        content: {
          excerpt: `partial success: missing ${missing.join(', ')}`,
          note: 'the spec was written as a draft; the gates and the clarify loop ask for what is missing',
        },
        linked_to: [{step: context.step.id}, ...missing.map((field) => ({spec_path: `spec.${field}`}))],
      })
    }
    const counts = `${body.features.length} features, ${body.acceptance_criteria.length} acceptance criteria, ${body.non_functional.length} non-functional, ${body.constraints.length} constraints`
    return {
      type: 'done',
      outcome: 'success',
      reason: missing.length > 0 ? `draft spec (missing ${missing.join(', ')}): ${counts}` : `compiled spec: ${counts}`,
      inputs: {ingest_ref: source.source_ref, ingest_sha256: source.sha256},
      outputs: {
        missing_fields: missing,
        counts: {
          features: body.features.length,
          acceptance_criteria: body.acceptance_criteria.length,
          non_functional: body.non_functional.length,
          constraints: body.constraints.length,
        },
        citations_dropped: dropped,
      } satisfies KindOutputs<'compile'>,
      spec: {body, status: missing.length > 0 ? 'draft' : 'compiled', title, missing_fields: missing},
      evidence,
      llmModel: provider.model,
      ...(reply.usage ? {usage: reply.usage} : {}),
    }
  },
}
