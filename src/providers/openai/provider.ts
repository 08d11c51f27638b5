/**
 * Model steps on any OpenAI-compatible chat-completions endpoint (OpenAI, Azure-compatible gateways,
 * Ollama, vLLM, llama.cpp's server). Each reply is checked against the step's output schema with
 * ajv; an invalid reply is sent back with its errors for a bounded number of repairs.
 */
import {PipeError} from '../../errors.js'
import {check, describeErrors, loadSchema, type ModelSchemaName} from '../../schema/registry.js'
import type {ApplyAnswersReply} from '../../types/model-apply-answers.js'
import type {ClarifyReply} from '../../types/model-clarify-questions.js'
import type {CompileReply} from '../../types/model-compile.js'
import type {GenerateVvReply} from '../../types/model-generate-vv.js'
import type {PlanTasksReply} from '../../types/model-plan-tasks.js'
import type {ProviderSettings} from '../../types/pipeline.js'
import type {Task} from '../../types/spec.js'
import {defaultPrompt, renderPrompt, type ModelKind} from '../prompt.js'
import {emptyBody, mergeWithPrevious, missingKeyFields, nextId, pad} from '../spec-build.js'
import type {
  ApplyAnswersRequest,
  ClarifyRequest,
  CompileOutput,
  CompileRequest,
  GenerateRequest,
  ModelReply,
  PromptedRequest,
  Provider,
  Question,
  SpecBody,
  Usage,
  VvItem,
} from '../types.js'
import type {ChatCall, ChatMessage, ChatReply, ChatRequest, ChatTransport} from '../chat.js'

interface CallOverrides {
  model?: string
  temperature?: number
}

export interface OpenAIOptions {
  settings: ProviderSettings
  /** Where requests go: the live endpoint, or a recording or cache around it. */
  transport: ChatTransport
}

const SYSTEM: Record<ModelKind, string> = {
  compile: 'You are the compile step of pipe, a spec pipeline. You turn a rough requirement into the fields of a canonical spec, inventing nothing.',
  clarify_questions: 'You are the clarify step of pipe, a spec pipeline. You ask the questions that fill the fields a spec is missing.',
  apply_answers: "You are the apply-answers step of pipe, a spec pipeline. You turn a person's answers into spec items.",
  plan_tasks: 'You are the planning step of pipe, a spec pipeline. You plan tasks with a definition of done.',
  generate_vv: 'You are the verification step of pipe, a spec pipeline. You write verification and validation items.',
}

/**
 * How a prompt names the requirement's source: a file by its name only. The directory says nothing
 * to the model, would tell the endpoint how the machine is laid out, and would make the same
 * requirement a different request on every checkout (a cassette recorded in one would not replay
 * in another).
 */
export function sourceName(ref: string): string {
  if (!ref.startsWith('file://')) return ref
  const name = ref.slice('file://'.length).split(/[\\/]/).pop()
  return name ? name : ref
}

function json(value: unknown): string {
  return JSON.stringify(value, null, 2)
}

/** Takes the JSON object out of a reply, tolerating a Markdown code fence around it. */
export function parseReply(content: string): {ok: true; value: unknown} | {ok: false; error: string} {
  const trimmed = content.trim()
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n```$/.exec(trimmed)
  try {
    return {ok: true, value: JSON.parse(fenced ? fenced[1]! : trimmed)}
  } catch (error) {
    return {ok: false, error: `the reply is not valid JSON (${(error as Error).message})`}
  }
}

export class OpenAIProvider implements Provider {
  readonly name = 'openai'
  readonly model: string
  readonly endpointHost: string | null
  private readonly transport: ChatTransport

  constructor(private readonly options: OpenAIOptions) {
    this.model = options.settings.model ?? 'gpt-4o-mini'
    this.transport = options.transport
    this.endpointHost = options.transport.endpointHost
  }

  /** The request as pipe composes it; the transport decides where it goes. */
  private request(name: string, messages: ChatMessage[], schema: Record<string, unknown>, overrides: CallOverrides): ChatRequest {
    const {settings} = this.options
    const format = settings.response_format ?? 'json_schema'
    const temperature = overrides.temperature ?? settings.temperature
    return {
      model: overrides.model ?? this.model,
      messages,
      ...(temperature !== undefined ? {temperature} : {}),
      ...(settings.max_tokens !== undefined ? {max_tokens: settings.max_tokens} : {}),
      ...(format === 'json_schema'
        ? {response_format: {type: 'json_schema' as const, json_schema: {name, schema, strict: false}}}
        : format === 'json_object'
          ? {response_format: {type: 'json_object' as const}}
          : {}),
    }
  }

  async chat(request: Omit<ChatRequest, 'model'> & {model?: string}, call: ChatCall): Promise<ChatReply> {
    const temperature = request.temperature ?? this.options.settings.temperature
    const maxTokens = request.max_tokens ?? this.options.settings.max_tokens
    return this.transport.complete(
      {
        ...request,
        model: request.model ?? this.model,
        ...(temperature !== undefined ? {temperature} : {}),
        ...(maxTokens !== undefined ? {max_tokens: maxTokens} : {}),
      },
      call,
    )
  }

  async reject(reply: ChatReply, problem: string): Promise<void> {
    if (reply.key !== undefined) await this.transport.reject?.(reply.key, problem)
  }

  /** Asks for JSON matching the step's schema; repairs invalid replies a bounded number of times. */
  private async structured<T>(kind: ModelKind, prompt: string, call: ChatCall): Promise<{value: T; usage: Usage}> {
    const name: ModelSchemaName = `model/${kind}`
    const {$schema: _s, $id: _i, ...bareSchema} = loadSchema(name)
    const problems = (value: unknown): string | null => {
      const result = check(name, value)
      return result.valid ? null : describeErrors(result.errors)
    }
    return this.ask<T>({name: kind, what: `the ${kind} step`, system: SYSTEM[kind], prompt, schema: bareSchema, check: problems}, call)
  }

  /** The request/validate/repair loop every model step shares. */
  private async ask<T>(
    request: {
      name: string
      what: string
      system: string
      prompt: string
      schema: Record<string, unknown>
      check: (value: unknown) => string | null
      maxRepairs?: number
    },
    call: ChatCall,
    overrides: CallOverrides = {},
  ): Promise<{value: T; usage: Usage}> {
    const messages: ChatMessage[] = [
      {
        role: 'system',
        content: `${request.system}\nReply with one JSON object that matches this JSON Schema, and nothing else:\n${JSON.stringify(request.schema)}`,
      },
      {role: 'user', content: request.prompt},
    ]
    const usage: Usage = {prompt_tokens: 0, completion_tokens: 0, calls: 0}
    const repairs = request.maxRepairs ?? this.options.settings.repair_attempts ?? 2
    const problems: string[] = []
    for (let attempt = 0; attempt <= repairs; attempt++) {
      const reply = await this.transport.complete(this.request(request.name, [...messages], request.schema, overrides), call)
      usage.calls++
      usage.prompt_tokens += reply.usage?.prompt_tokens ?? 0
      usage.completion_tokens += reply.usage?.completion_tokens ?? 0
      const content = reply.message.content ?? ''
      const parsed = parseReply(content)
      let problem: string
      if (parsed.ok) {
        const found = request.check(parsed.value)
        if (found === null) return {value: parsed.value as T, usage}
        problem = `the reply does not match the schema: ${found}`
      } else problem = parsed.error
      await this.reject(reply, problem)
      problems.push(problem)
      messages.push({role: 'assistant', content}, {role: 'user', content: `${problem}\nReply again with only the corrected JSON object.`})
    }
    throw new PipeError('E_MODEL', `the model's replies to ${request.what} did not match its schema after ${repairs + 1} attempt(s): ${problems.at(-1)}`, {
      hint: 'Try a stronger model, a clearer prompt file, or provider.response_format json_schema if the endpoint supports it.',
      details: {attempts: problems.map((p, i) => ({attempt: i + 1, problem: p})), usage},
    })
  }

  async generate(request: GenerateRequest, call: ChatCall): Promise<ModelReply<unknown> & {model: string}> {
    const {$schema: _s, $id: _i, ...bareSchema} = request.schema
    const overrides: CallOverrides = {
      ...(request.model !== undefined ? {model: request.model} : {}),
      ...(request.temperature !== undefined ? {temperature: request.temperature} : {}),
    }
    const {value, usage} = await this.ask<unknown>(
      {
        name: request.name,
        what: `model step "${request.name}"`,
        system: `You are the model step "${request.name}" of pipe, a pipeline runner. Answer the user's request.`,
        prompt: request.prompt,
        schema: bareSchema,
        check: request.check,
        ...(request.maxRepairs !== undefined ? {maxRepairs: request.maxRepairs} : {}),
      },
      call,
      overrides,
    )
    return {value, citations: [], usage, model: overrides.model ?? this.model}
  }

  private prompt(kind: ModelKind, request: PromptedRequest, values: Record<string, string>): string {
    return renderPrompt(request.prompt ?? defaultPrompt(kind), values)
  }

  async compile(request: CompileRequest, call: ChatCall): Promise<ModelReply<CompileOutput>> {
    const previous = request.previous ? `The spec so far (keep what it has unless the requirement contradicts it):\n${json(request.previous)}` : ''
    const {value, usage} = await this.structured<CompileReply>(
      'compile',
      this.prompt('compile', request, {input: request.text, source_ref: sourceName(request.sourceRef), previous_spec: previous}),
      call,
    )
    const body = emptyBody()
    body.goal = value.goal.trim()
    value.features.forEach((f, i) =>
      body.features.push({
        id: `FR-${pad(i + 1)}`,
        title: f.title,
        priority: f.priority,
        source: 'model',
        ...(f.description ? {description: f.description} : {}),
      }),
    )
    value.constraints.forEach((text, i) => body.constraints.push({id: `C-${pad(i + 1)}`, text, source: 'model'}))
    value.non_functional.forEach((n, i) => body.non_functional.push({id: `NFR-${pad(i + 1)}`, category: n.category, text: n.text, source: 'model'}))
    value.acceptance_criteria.forEach((a, i) => body.acceptance_criteria.push({id: `AC-${pad(i + 1)}`, ...a, source: 'model'}))
    value.open_questions.forEach((question, i) => body.open_questions.push({id: `Q-${pad(i + 1)}`, question, status: 'open'}))
    const merged = request.previous ? mergeWithPrevious(body, request.previous) : body
    return {value: {body: merged, title: value.title, missing_fields: missingKeyFields(merged)}, citations: value.citations, usage}
  }

  async clarify(request: ClarifyRequest, call: ChatCall): Promise<ModelReply<{questions: Question[]}>> {
    const missing = request.missing.map((m) => `- ${m.path}${m.message ? `: ${m.message}` : ''}`).join('\n')
    const {value, usage} = await this.structured<ClarifyReply>(
      'clarify_questions',
      this.prompt('clarify_questions', request, {spec: json(request.spec), missing_fields: missing, max_questions: String(request.maxQuestions)}),
      call,
    )
    const wanted = [...new Set(request.missing.map((m) => m.path))].slice(0, request.maxQuestions)
    // One question per missing field, in the order the gates listed them; a field the model skipped gets a plain one.
    const questions = wanted.map((field, i) => ({
      id: `Q-${pad(request.firstNumber + i)}`,
      field,
      question: value.questions.find((q) => q.field === field)?.question ?? `Please provide ${field}.`,
    }))
    return {value: {questions}, citations: [], usage}
  }

  async applyAnswers(request: ApplyAnswersRequest, call: ChatCall): Promise<ModelReply<{body: SpecBody}>> {
    const answers = request.questions.map((q) => `${q.id} [${q.field}] ${q.question}\nAnswer: ${request.answers[q.id] ?? '(none)'}`).join('\n\n')
    const {value, usage} = await this.structured<ApplyAnswersReply>(
      'apply_answers',
      this.prompt('apply_answers', request, {spec: json(request.spec), answers}),
      call,
    )
    const body = structuredClone(request.spec)
    if (value.goal.trim()) body.goal = value.goal.trim()
    for (const f of value.features)
      body.features.push({
        id: nextId(
          'FR',
          body.features.map((x) => x.id),
        ),
        title: f.title,
        priority: f.priority,
        source: 'answer',
        ...(f.description ? {description: f.description} : {}),
      })
    for (const text of value.constraints)
      body.constraints.push({
        id: nextId(
          'C',
          body.constraints.map((x) => x.id),
        ),
        text,
        source: 'answer',
      })
    for (const n of value.non_functional)
      body.non_functional.push({
        id: nextId(
          'NFR',
          body.non_functional.map((x) => x.id),
        ),
        category: n.category,
        text: n.text,
        source: 'answer',
      })
    for (const a of value.acceptance_criteria)
      body.acceptance_criteria.push({
        id: nextId(
          'AC',
          body.acceptance_criteria.map((x) => x.id),
        ),
        ...a,
        source: 'answer',
      })
    for (const q of request.questions) {
      const answer = request.answers[q.id]
      if (answer === undefined) continue
      const record = {id: q.id, field: q.field, question: q.question, status: 'answered' as const, answer}
      const existing = body.open_questions.find((x) => x.id === q.id)
      if (existing) Object.assign(existing, record)
      else body.open_questions.push(record)
    }
    return {value: {body}, citations: value.citations, usage}
  }

  async planTasks(request: {spec: SpecBody} & PromptedRequest, call: ChatCall): Promise<ModelReply<{tasks: Task[]}>> {
    const {value, usage} = await this.structured<PlanTasksReply>('plan_tasks', this.prompt('plan_tasks', request, {spec: json(request.spec)}), call)
    const features = new Set(request.spec.features.map((f) => f.id))
    const criteria = new Set(request.spec.acceptance_criteria.map((a) => a.id))
    const idByTitle = new Map(value.tasks.map((t, i) => [t.title, `T-${pad(i + 1)}`]))
    const tasks: Task[] = value.tasks.map((t, i) => ({
      id: `T-${pad(i + 1)}`,
      title: t.title,
      goal: t.goal,
      type: t.type,
      priority: t.priority,
      feature_ids: t.feature_ids.filter((id) => features.has(id)),
      acceptance_criteria: t.acceptance_criteria.filter((id) => criteria.has(id)),
      depends_on: t.depends_on.map((d) => idByTitle.get(d) ?? (/^T-\d{3,}$/.test(d) ? d : '')).filter((d) => d !== '' && d !== `T-${pad(i + 1)}`),
      inputs: {files_required: [], context_queries: []},
      expected_changes: {files_touched: t.files_touched, interfaces_affected: []},
      constraints: {forbidden_paths: [], forbidden_actions: request.spec.constraints.map((c) => c.text)},
      acceptance_tests: {static_checks: t.static_checks, unit_tests: t.unit_tests, smoke_tests: t.smoke_tests, expected_signals: t.expected_signals},
      rollback_plan: {strategy: 'git_reset'},
      max_retries: 3,
    }))
    return {value: {tasks}, citations: [], usage}
  }

  async generateVv(request: {spec: SpecBody} & PromptedRequest, call: ChatCall): Promise<ModelReply<{vv: VvItem[]}>> {
    const {value, usage} = await this.structured<GenerateVvReply>('generate_vv', this.prompt('generate_vv', request, {spec: json(request.spec)}), call)
    const spec = request.spec
    const criteria = new Set(spec.acceptance_criteria.map((a) => a.id))
    const tasks = new Set(spec.tasks.map((t) => t.id))
    const requirements = new Set([...spec.features.map((f) => f.id), ...spec.non_functional.map((n) => n.id)])
    const vv: VvItem[] = value.vv.map((item, i) => ({
      id: `VV-${pad(i + 1)}`,
      kind: item.kind,
      method: item.method,
      description: item.description,
      acceptance_criteria: item.acceptance_criteria.filter((id) => criteria.has(id)),
      tasks: item.tasks.filter((id) => tasks.has(id)),
      requirements: item.requirements.filter((id) => requirements.has(id)),
    }))
    return {value: {vv}, citations: [], usage}
  }
}
