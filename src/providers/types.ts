/**
 * What a model step asks of a model. The offline rules provider and the openai provider answer the
 * same questions, so a pipeline runs the same way with or without a key.
 */
import type {CanonicalSpec, Task} from '../types/spec.js'
import type {ChatCall, ChatReply, ChatRequest} from './chat.js'

/** The model name the offline rules provider records. */
export const OFFLINE_MODEL = 'offline-rules-1'

export type SpecBody = Omit<CanonicalSpec, 'meta'>
export type VvItem = CanonicalSpec['vv'][number]

export interface MissingField {
  path: string
  message?: string
}

export interface Question {
  id: string
  field: string
  question: string
}

/** A span of the input (or of an answer) that supports a spec field. */
export interface Citation {
  spec_path: string
  excerpt: string
  note?: string
  /** For citations of answers: the question whose answer is quoted. */
  question_id?: string
}

export interface Usage {
  prompt_tokens: number
  completion_tokens: number
  /** Requests made, repairs included. */
  calls: number
}

export interface ModelReply<T> {
  value: T
  citations: Citation[]
  usage?: Usage
}

/** Fields every model request may carry: the step's prompt template, when the pipeline names one. */
export interface PromptedRequest {
  prompt?: string
}

export interface CompileRequest extends PromptedRequest {
  text: string
  sourceRef: string
  /** The spec the run already has, when the pipeline loops back to compile. */
  previous: SpecBody | null
}

export interface CompileOutput {
  body: SpecBody
  title: string
  /** Key fields the input did not fill (partial success: the spec is a draft). */
  missing_fields: string[]
}

export interface ClarifyRequest extends PromptedRequest {
  spec: SpecBody
  missing: MissingField[]
  maxQuestions: number
  /** Number of the first question, so ids stay unique across rounds (Q-001, Q-002, ...). */
  firstNumber: number
}

export interface ApplyAnswersRequest extends PromptedRequest {
  spec: SpecBody
  questions: Question[]
  /** Answer text by question id. */
  answers: Record<string, string>
}

/** A model step of the pipeline's own: a rendered prompt and the JSON Schema its reply must match. */
export interface GenerateRequest {
  /** Names the request: the step id (the endpoint's json_schema name, and in messages). */
  name: string
  /** The prompt with its placeholders filled. */
  prompt: string
  /** The output schema as written; its root is an object. */
  schema: Record<string, unknown>
  /** The problems of a parsed reply in one line, or null when it matches the schema. */
  check: (value: unknown) => string | null
  /** Overrides of the pipeline's provider settings for this step. */
  model?: string
  temperature?: number
  maxRepairs?: number
}

export interface Provider {
  readonly name: string
  readonly model: string | null
  readonly endpointHost: string | null
  compile(request: CompileRequest, call: ChatCall): Promise<ModelReply<CompileOutput>>
  clarify(request: ClarifyRequest, call: ChatCall): Promise<ModelReply<{questions: Question[]}>>
  applyAnswers(request: ApplyAnswersRequest, call: ChatCall): Promise<ModelReply<{body: SpecBody}>>
  planTasks(request: {spec: SpecBody} & PromptedRequest, call: ChatCall): Promise<ModelReply<{tasks: Task[]}>>
  generateVv(request: {spec: SpecBody} & PromptedRequest, call: ChatCall): Promise<ModelReply<{vv: VvItem[]}>>
  /** A reply that matches the request's schema (bounded repairs, then E_MODEL); `model` is the model that answered. */
  generate(request: GenerateRequest, call: ChatCall): Promise<ModelReply<unknown> & {model: string}>
  /** One raw chat turn (tools included) for steps that hold a conversation; the pipeline's model and settings fill what the request leaves out. */
  chat(request: Omit<ChatRequest, 'model'> & {model?: string}, call: ChatCall): Promise<ChatReply>
  /** A reply of chat() the step found invalid (it broke the output schema): never reused from the reply cache, so a redrive asks again. */
  reject?(reply: ChatReply, problem: string): Promise<void>
}
