/**
 * `kind: model`: a model step of the pipeline's own. The prompt file's {{name}} placeholders are
 * filled from `vars`, the reply must match the step's `output_schema` (bounded repairs, then
 * E_MODEL), and the valid reply is the step's `outputs.value`. With `spec_path` the reply is also
 * written into the spec, under `sections`, as a new immutable version.
 *
 * By the time `run` is called the engine has resolved every `${{ }}` in the step, so `vars`
 * holds plain JSON values.
 */
import {loadOutputSchema} from '../config/output-schema.js'
import {stepDir} from '../config/positions.js'
import {PipeError} from '../errors.js'
import {renderPrompt} from '../providers/prompt.js'
import {emptyBody, missingKeyFields} from '../providers/spec-build.js'
import type {SpecBody} from '../providers/types.js'
import {sha256} from '../util/hash.js'
import {bodyOf, modelCall, promptOf, promptStepFindings} from './model-support.js'
import {narrowed} from './output-schemas.js'
import type {KindOutputs, StepHandler} from './types.js'

/**
 * How a var goes into the prompt: strings as they are, numbers and booleans as written, null as
 * nothing, lists and maps as JSON indented by two spaces (unambiguous, and what models read best).
 */
export function renderVar(value: unknown): string {
  if (value === null || value === undefined) return ''
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  return JSON.stringify(value, null, 2)
}

/** The spec body with `value` at `spec_path` under `sections`, creating the maps on the way. */
export function writeSection(body: SpecBody, specPath: string, value: unknown): SpecBody {
  const next = structuredClone(body)
  const names = specPath.split('.')
  let node: Record<string, unknown> = (next.sections ??= {})
  names.slice(0, -1).forEach((name, i) => {
    const child = node[name]
    if (child === undefined) node[name] = {}
    else if (child === null || typeof child !== 'object' || Array.isArray(child)) {
      throw new PipeError(
        'E_STATE',
        `spec_path "${specPath}" goes through sections.${names.slice(0, i + 1).join('.')}, which holds ${Array.isArray(child) ? 'a list' : JSON.stringify(child)}, not a map`,
        {
          hint: 'Choose a spec_path that does not run through a value another step wrote.',
        },
      )
    }
    node = node[name] as Record<string, unknown>
  })
  node[names.at(-1)!] = structuredClone(value)
  return next
}

export const model: StepHandler<'model'> = {
  kind: 'model',
  summary: 'ask a model, with your prompt and vars, for JSON matching your output schema; with spec_path, write it into the spec',
  outcomes: () => ['success'],
  changesSpec: (step) => step.spec_path !== undefined,
  needsModel: true,
  rerunsFromReplies: true,
  // Asking again costs tokens but changes nothing outside the run.
  safeToRetry: true,
  outputsSchema(step, pipeline) {
    const loaded = loadOutputSchema(pipeline.dir, step.output_schema)
    // A broken file is a validate error of its own; expressions then read the value unchecked.
    const value = loaded.ok ? loaded.output.schema : true
    const root = loaded.ok ? loaded.output.schema : {}
    return {
      ...narrowed('model', {value}),
      // Local $refs of the file ("#/definitions/item") resolve against this wrapper.
      ...(root['definitions'] !== undefined ? {definitions: root['definitions']} : {}),
      ...(root['$defs'] !== undefined ? {$defs: root['$defs']} : {}),
    }
  },
  check: (step, loaded) => promptStepFindings('model-step', step, loaded),
  async run(context) {
    const {step} = context
    const template = (await promptOf(context))!
    const loaded = loadOutputSchema(stepDir(context.pipeline, step.id), step.output_schema)
    if (!loaded.ok)
      throw new PipeError('E_CONFIG', `output_schema "${step.output_schema}" ${loaded.problem}`, {hint: 'pipe validate checks output schemas before a run.'})
    const vars = step.vars ?? {}
    const prompt = renderPrompt(template, Object.fromEntries(Object.entries(vars).map(([name, value]) => [name, renderVar(value)])))
    const provider = await context.provider()
    const reply = await provider.generate(
      {
        name: step.id,
        prompt,
        schema: loaded.output.schema,
        check: loaded.output.check,
        ...(step.model !== undefined ? {model: step.model} : {}),
        ...(step.temperature !== undefined ? {temperature: step.temperature} : {}),
        ...(step.max_repairs !== undefined ? {maxRepairs: step.max_repairs} : {}),
      },
      modelCall(context),
    )
    const inputs = {prompt: step.prompt, prompt_sha256: sha256(prompt), output_schema: step.output_schema, vars}
    const done = {
      type: 'done' as const,
      outcome: 'success',
      inputs,
      outputs: {value: reply.value} satisfies KindOutputs<'model'>,
      llmModel: reply.model,
      ...(reply.usage ? {usage: reply.usage} : {}),
    }
    if (step.spec_path === undefined) return {...done, reason: `the reply matches ${step.output_schema}`}
    const current = context.spec
    const body = writeSection(current ? bodyOf(current) : emptyBody(), step.spec_path, reply.value)
    const missing = current ? (current.meta.missing_fields ?? []) : missingKeyFields(body)
    return {
      ...done,
      reason: `the reply matches ${step.output_schema}; written to the spec at sections.${step.spec_path}`,
      spec: {body, status: current?.meta.status ?? 'draft', ...(current?.meta.title ? {title: current.meta.title} : {}), missing_fields: missing},
    }
  },
}
