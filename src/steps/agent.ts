/**
 * `kind: agent`: a bounded think/act/observe loop (seed 003). The model is given the task (the
 * prompt file with its {{vars}} filled) and the step's tools; each reply either calls tools, whose
 * results go back to it, or ends the loop with a final answer, or gives up.
 *
 * Every call is checked before it runs: the tool is one the step offers, its arguments match the
 * tool's JSON Schema (else the model gets the schema errors and nothing runs), and its level from
 * the policy does not need a person (else the run pauses: `pipe confirm RUN --yes|--no`). The
 * conversation is the step's durable state, written after every model reply and every tool
 * result, so a resume (after a pause or a crash) never asks the model again for a turn it
 * answered, nor runs again a call that finished.
 *
 * Outcomes: `done` (a final answer, matching output_schema when there is one), `gave_up` (the
 * model called give_up, or max_turns replies went by without a final answer), `denied` (the same,
 * but after at least one of its calls was refused by a person or denied by the policy: the
 * refusal is why it stopped). A thrown error (the endpoint, E_MODEL after max_repairs invalid
 * final answers) is the step's `error`.
 */
import type {KindFinding} from '../config/kind-contract.js'
import {stepDir} from '../config/positions.js'
import {loadOutputSchema} from '../config/output-schema.js'
import {didYouMean} from '../util/suggest.js'
import {PipeError} from '../errors.js'
import {needsConfirmation, preapproval, toolLevel, type ToolLevel} from '../policy/tools.js'
import type {ChatMessage, ChatReply, ToolCall, ToolSpec} from '../providers/chat.js'
import {parseReply} from '../providers/openai/provider.js'
import {renderPrompt} from '../providers/prompt.js'
import type {Usage} from '../providers/types.js'
import type {LoadedPolicy} from '../policy/policy.js'
import {sha256} from '../util/hash.js'
import {sealedAction, type ConfirmAction} from './confirm-action.js'
import {redact, redactDeep} from '../util/redact.js'
import {argumentProblems, commandSegments, resultProblems, TOOL_NAMES, toolNamed, type AgentTool, type EditScope, type ToolOutcome} from './agent/tools.js'
import {renderVar} from './model.js'
import {modelCall, promptOf, promptStepFindings} from './model-support.js'
import {narrowed} from './output-schemas.js'
import {outputsOf} from './outputs.js'
import type {EvidenceDraft, KindOutputs, StepContext, StepHandler, StepOf, StepResult, ToolCallRecord} from './types.js'
import {relativeToRoot} from '../util/stable-text.js'

export const DEFAULT_MAX_TURNS = 20
/** What one request may carry by default, in bytes of message text (about 50k tokens). */
export const DEFAULT_MAX_CONTEXT_BYTES = 200_000

function isToolResult(m: ChatMessage): boolean {
  return m.role === 'tool' || (m.role === 'user' && typeof m.content === 'string' && m.content.startsWith('Result of '))
}

function messageBytes(m: ChatMessage): number {
  return Buffer.byteLength(typeof m.content === 'string' ? m.content : '') + (m.role === 'assistant' && m.tool_calls ? Buffer.byteLength(JSON.stringify(m.tool_calls)) : 0)
}

const ELIDED = '{"elided":'

/**
 * Keeps a conversation within `budget` bytes by replacing the oldest tool results with a note of
 * what was dropped: the instructions, the task and the latest result stay. Without it every turn
 * would carry (and the reply cache and the state would store again) everything read so far, so
 * cost grew with the square of the turns. The same conversation is always cut the same way, so a
 * recorded run replays.
 */
export function fitConversation(messages: ChatMessage[], budget: number): number {
  let total = 0
  for (const m of messages) total += messageBytes(m)
  if (total <= budget) return 0
  let last = -1
  for (let i = messages.length - 1; i >= 0; i--) {
    if (isToolResult(messages[i]!)) {
      last = i
      break
    }
  }
  let elided = 0
  for (let i = 2; i < messages.length && total > budget; i++) {
    const m = messages[i]!
    if (i === last || !isToolResult(m)) continue
    const content = typeof m.content === 'string' ? m.content : ''
    const head = m.role === 'tool' ? '' : `${content.slice(0, content.indexOf('\n') + 1)}`
    if (content.slice(head.length).startsWith(ELIDED)) continue
    const note = `${head}${JSON.stringify({elided: `this result (${messageBytes(m)} bytes) was dropped to keep the conversation within ${budget} bytes; call the tool again if you need it`})}`
    const replaced: ChatMessage = {...m, content: note}
    total += messageBytes(replaced) - messageBytes(m)
    messages[i] = replaced
    elided++
  }
  return elided
}
/** Tool calls of one reply that are run; the rest are answered with an error, unrun. */
export const MAX_CALLS_PER_REPLY = 50
const GIVE_UP = 'give_up'

type AgentStep = StepOf<'agent'>
type Protocol = 'native' | 'json'

/** What the step keeps between turns, pauses and crashes (StepContext.state). */
interface AgentState {
  version: 1
  protocol: Protocol
  messages: ChatMessage[]
  /** Model replies so far. */
  turns: number
  /** Tool calls of the last reply that still need a result. */
  pending: ToolCall[]
  /** A call that started and did not finish before pipe stopped (a crash). */
  inflight?: string
  /** The call whose tool_call_request is on the run's timeline and whose result is not yet (one paused for a confirmation). */
  requested?: {call_id: string; at: string}
  calls: ToolCallRecord[]
  /** Confirmations already used: `CALL_ID AT` (the call and when the person answered; a bare call id in states of older versions). */
  consumed: string[]
  /**
   * The calls that ran (their effect happened), by call id, with what the model was given: a redrive
   * carries them into its new attempt, where a call with the same id and arguments is answered from
   * here and never runs again. Safe reads are left out: running one again changes nothing.
   */
  executed?: Record<string, ExecutedCall>
  /** Results of safe calls since the last call that could change something, by tool and arguments. */
  cache: Record<string, {result: Record<string, unknown>; summary: string; ok: boolean}>
  usage: Usage
  repairs: number
  model: string | null
  files_changed: string[]
  patches: Array<{call_id: string; files: string[]; patch: string}>
}

/** A call that ran, as AgentState.executed keeps it. */
interface ExecutedCall {
  /** The tool and its arguments (stableKey): the same id with other arguments is another call. */
  key: string
  /** The seq of the attempt it ran in; absent while it is this attempt. */
  seq?: number
  content: Record<string, unknown>
  record: Pick<ToolCallRecord, 'level' | 'decision' | 'ok' | 'summary' | 'files_changed' | 'by' | 'note'>
  patch?: string
}

function systemText(step: AgentStep, protocol: Protocol, tools: readonly AgentTool[], outputSchema: Record<string, unknown> | null): string {
  const lines = [
    `You are the agent step "${step.id}" of pipe, a pipeline runner. You work on the task the user gives you inside a repository, only through the tools offered. Think, act with a tool, observe its result, reflect, and repeat until the task is done.`,
    `You have at most ${step.max_turns ?? DEFAULT_MAX_TURNS} replies. Some tool calls may be refused by the policy or by a person; then find another way, or give up.`,
  ]
  const final = outputSchema ? `a JSON object that matches this JSON Schema: ${JSON.stringify(outputSchema)}` : 'a short summary of what you did'
  if (protocol === 'native') {
    lines.push(`When the task is done, reply without tool calls with your final answer: ${final}. If you cannot do it, call ${GIVE_UP} with the reason.`)
  } else {
    lines.push(
      'Reply with exactly one JSON object and nothing else, one of:',
      '{"tool": "<name>", "arguments": {...}}  to call a tool (one per reply);',
      `{"final": ...}  when the task is done, where ... is ${final};`,
      `{"${GIVE_UP}": "<reason>"}  when you cannot do it.`,
      'The tools, with the JSON Schema of their arguments:',
      ...tools.map((t) => `- ${t.name}: ${t.description.replace(/\n/g, '\n  ')}\n  arguments: ${JSON.stringify(t.parameters)}`),
    )
  }
  return lines.join('\n')
}

function toolSpecs(tools: readonly AgentTool[]): ToolSpec[] {
  return [
    ...tools.map((t) => ({type: 'function' as const, function: {name: t.name, description: t.description, parameters: t.parameters}})),
    {type: 'function' as const, function: {name: GIVE_UP, description: 'Stop: you cannot do the task. Say why.', parameters: {type: 'object', additionalProperties: false, required: ['reason'], properties: {reason: {type: 'string'}}}}},
  ]
}

function stableKey(name: string, args: unknown): string {
  const sort = (v: unknown): unknown =>
    v === null || typeof v !== 'object' ? v : Array.isArray(v) ? v.map(sort) : Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])]))
  return `${name}:${JSON.stringify(sort(args))}`
}

/** The endpoint refused function tools (400 about tools): the step goes on with the JSON protocol. */
function rejectsTools(error: unknown): boolean {
  if (!(error instanceof PipeError) || error.code !== 'E_MODEL') return false
  const status = (error.details as {status?: number} | undefined)?.status
  return status === 400 && /tool|function/i.test(error.message)
}

/** A conversation held with native tool calls, retold for the JSON protocol. */
function toJsonProtocol(messages: ChatMessage[], system: string): ChatMessage[] {
  return messages.map((m, i): ChatMessage => {
    if (i === 0 && m.role === 'system') return {role: 'system', content: system}
    if (m.role === 'assistant' && m.tool_calls?.length) {
      const call = m.tool_calls[0]!
      return {role: 'assistant', content: JSON.stringify({tool: call.function.name, arguments: safeParse(call.function.arguments)})}
    }
    if (m.role === 'tool') return {role: 'user', content: `Result of call ${m.tool_call_id}:\n${m.content}`}
    return m
  })
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/** One model reply, read as tool calls, a final answer, or giving up. */
type Reading = {calls: ToolCall[]} | {final: unknown; text: string} | {giveUp: string} | {unreadable: string}

function readReply(reply: ChatReply, protocol: Protocol, turn: number): Reading {
  if (protocol === 'native') {
    const calls = reply.message.tool_calls ?? []
    const giveUp = calls.find((c) => c.function.name === GIVE_UP)
    if (giveUp) {
      const reason = (safeParse(giveUp.function.arguments) as {reason?: unknown} | null)?.reason
      return {giveUp: typeof reason === 'string' ? reason : 'no reason given'}
    }
    if (calls.length > 0) return {calls}
    const text = reply.message.content ?? ''
    return {final: text, text}
  }
  const parsed = parseReply(reply.message.content ?? '')
  if (!parsed.ok || parsed.value === null || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
    return {unreadable: parsed.ok ? 'the reply is not a JSON object' : parsed.error}
  }
  const value = parsed.value as Record<string, unknown>
  if (typeof value['tool'] === 'string') {
    return {calls: [{id: `call_json_${turn}`, type: 'function', function: {name: value['tool'], arguments: JSON.stringify(value['arguments'] ?? {})}}]}
  }
  if (GIVE_UP in value) return {giveUp: typeof value[GIVE_UP] === 'string' ? value[GIVE_UP] : 'no reason given'}
  if ('final' in value) return {final: value['final'], text: typeof value['final'] === 'string' ? value['final'] : JSON.stringify(value['final'])}
  return {unreadable: `the reply has none of "tool", "final" or "${GIVE_UP}"`}
}

/**
 * The calls with ids no earlier call of the conversation (or of the reply) has: a model that
 * numbers its calls afresh each reply (call_0 every time) would otherwise have a later call taken
 * for one already confirmed, run or interrupted. Renamed in the transcript too, so every result
 * still answers its call.
 */
function withUniqueIds(calls: ToolCall[], messages: readonly ChatMessage[], turn: number, executed: Readonly<Record<string, ExecutedCall>> = {}): ToolCall[] {
  const used = new Set(messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : [])))
  return calls.map((call, i) => {
    let id = call.id || `call_${turn}_${i + 1}`
    // A call an earlier attempt ran keeps its id only when it is that call again (then it is answered from the record).
    const ran = executed[id]
    if (used.has(id) || (ran && ran.key !== stableKey(call.function.name, safeParse(call.function.arguments)))) id = `${id}_t${turn}_${i + 1}`
    while (used.has(id)) id = `${id}_`
    used.add(id)
    return id === call.id ? call : {...call, id}
  })
}

function resultMessage(protocol: Protocol, call: ToolCall, content: Record<string, unknown>): ChatMessage {
  // Masked value by value: in the JSON text a secret with a quote or a backslash is escaped, and would not be found.
  const text = JSON.stringify(redactDeep(content))
  return protocol === 'native' ? {role: 'tool', tool_call_id: call.id, content: text} : {role: 'user', content: `Result of ${call.function.name} (${call.id}):\n${text}`}
}

function argvOf(tool: string, args: Record<string, unknown>, policy: LoadedPolicy, root: string): string[][] | undefined {
  if (tool !== 'run_command') return undefined
  const planned = commandSegments(args, {policy, root})
  return planned.ok ? planned.segments.map((s) => s.argv) : undefined
}

/** The action a confirm pause shows for a call, with the hash a confirmation binds (see confirm-action.ts). */
function shownAction(call: ToolCall, args: Record<string, unknown>, level: ToolLevel, argv: string[][] | undefined, cwd: string): ConfirmAction {
  return sealedAction({call_id: call.id, tool: call.function.name, level, arguments: redactDeep(args), ...(argv ? {argv: redactDeep(argv)} : {}), cwd})
}

/** The action a resume of this saved state would run first (StepHandler.pendingAction): what pipe confirm compares with the one shown. */
function pendingActionOf(state: unknown, where: {policy: LoadedPolicy; cwd: string}): ConfirmAction | null {
  const call = (state as Partial<AgentState> | null)?.pending?.[0]
  if (!call || typeof call.function?.name !== 'string' || typeof call.function.arguments !== 'string') return null
  const parsed = call.function.arguments.trim() === '' ? {} : safeParse(call.function.arguments)
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null
  const args = parsed as Record<string, unknown>
  return shownAction(call, args, toolLevel(where.policy, call.function.name), argvOf(call.function.name, args, where.policy, where.cwd), where.cwd)
}

/** Lines a unified diff removes plus lines it adds (its file headers not counted). */
export function diffLines(patch: string): number {
  return patch.split('\n').filter((line) => (line.startsWith('+') && !line.startsWith('+++')) || (line.startsWith('-') && !line.startsWith('---'))).length
}

/** What an agent step's snapshot records as outputs (schemas/kinds/agent.outputs.json). */
export type AgentOutputs = KindOutputs<'agent'>
type AgentResult = StepResult<AgentOutputs>
export const agentOutput = outputsOf<AgentOutputs>()

export const agent: StepHandler<'agent'> = {
  kind: 'agent',
  waitsFor: 'confirm',
  summary: 'a model works on a task with tools (read, search, edit, run allowed commands) in a bounded loop, under the policy',
  outcomes: () => ['done', 'gave_up', 'denied'],
  failures: {
    gave_up: {code: 'E_MODEL', hint: ({run_id, step}) => `The agent gave up; pipe snapshot show ${run_id} --step ${step} shows its tool calls and reason. Route the outcome with on: {gave_up: STEP}, give it more max_turns or a clearer prompt.`},
    denied: {code: 'E_POLICY_DENIED', hint: ({run_id, step}) => `The agent stopped after a call was refused or denied; pipe snapshot show ${run_id} --step ${step} shows which. Allow it in the policy, or route the outcome with on: {denied: STEP}.`},
  },
  changesSpec: false,
  needsModel: true,
  // A retry would repeat tool calls that changed the repository: the conversation's state carries it instead.
  safeToRetry: false,
  outputsSchema(step, pipeline) {
    const loaded = step.output_schema !== undefined ? loadOutputSchema(pipeline.dir, step.output_schema) : null
    const value = loaded === null ? {type: 'string'} : loaded.ok ? loaded.output.schema : true
    const root = loaded?.ok ? loaded.output.schema : {}
    return {
      ...narrowed('agent', {value}),
      ...(root['definitions'] !== undefined ? {definitions: root['definitions']} : {}),
      ...(root['$defs'] !== undefined ? {$defs: root['$defs']} : {}),
    }
  },
  graph: {details: (step) => [`tools: ${step.tools.join(', ')}`]},
  // Each agent step run is an attempt at its task: what it planned, the patch, how its edits applied.
  exportRole: {
    attempt: 'starts',
    files(snapshot, {task}) {
      const out = {value: agentOutput('value').of(snapshot), summary: agentOutput('summary').of(snapshot), files_changed: agentOutput('files_changed').of(snapshot), turns: agentOutput('turns').of(snapshot), tool_calls: agentOutput('tool_calls').of(snapshot), patch: agentOutput('patch').of(snapshot)}
      const edits = (snapshot.tool_calls ?? []).filter((c) => c.name === 'apply_edit_blocks')
      return {
        files: {
          'plan.json': {step: snapshot.step.name, seq: snapshot.step.seq, task, outcome: snapshot.decisions.at(-1)?.decision ?? null, answer: out.value ?? null, summary: out.summary ?? null, turns: out.turns ?? 0, tool_calls: out.tool_calls ?? 0},
          'patch.diff': out.patch ?? '',
          'patch_apply.json': {
            status: edits.some((c) => c.ok) ? 'applied' : edits.length > 0 ? 'failed' : 'none',
            files_changed: out.files_changed ?? [],
            edits: edits.map((c) => ({call_id: c.call_id, ok: c.ok, decision: c.decision, summary: c.summary, files_changed: c.files_changed ?? []})),
          },
        },
      }
    },
    metrics(snapshot) {
      const patch = agentOutput('patch').of(snapshot)
      return patch ? {patch_lines: diffLines(patch)} : {}
    },
    timeline(snapshot) {
      const files = agentOutput('files_changed').of(snapshot) ?? []
      return [`agent: ${(snapshot.tool_calls ?? []).length} tool call(s)${files.length > 0 ? `, changed ${files.join(', ')}` : ', no file changed'}`]
    },
  },
  check(step, loaded) {
    const out: KindFinding[] = []
    step.tools.forEach((name, i) => {
      if (!TOOL_NAMES.includes(name)) out.push({rule: 'agent-step', at: ['tools', i], message: `unknown tool "${name}"${didYouMean(name, TOOL_NAMES)} (tools: ${TOOL_NAMES.join(', ')})`})
    })
    out.push(...promptStepFindings('agent-step', step, loaded))
    return out
  },
  pendingAction: pendingActionOf,
  async run(context) {
    try {
      return await runAgent(context)
    } catch (error) {
      // A step that fails still says which calls it made (and what they changed): the snapshot keeps the error's details.
      const state = (await context.state.read().catch(() => undefined)) as AgentState | undefined
      if (error instanceof PipeError && state && state.calls.length > 0) {
        throw new PipeError(error.code, error.message, {...(error.hint ? {hint: error.hint} : {}), retryable: error.retryable, blocking: error.blocking, details: {...(error.details ?? {}), tool_calls: state.calls, files_changed: state.files_changed}})
      }
      throw error
    }
  },
}

/** The files the step's edits are bounded to (the engine resolved its expressions into lists), or undefined. */
function editScope(step: AgentStep): EditScope | undefined {
  const list = (value: string[] | string | undefined): string[] | undefined => {
    if (value === undefined) return undefined
    if (!Array.isArray(value)) throw new PipeError('E_CONFIG', `agent step "${step.id}": ${value} was not resolved to a list of paths`, {hint: 'Give files_touched and forbidden_paths as lists, or one ${{ expression }} that gives a list.'})
    return value
  }
  const filesTouched = list(step.files_touched)
  const forbidden = list(step.forbidden_paths)
  if (filesTouched === undefined && forbidden === undefined) return undefined
  return {...(filesTouched !== undefined ? {files_touched: filesTouched} : {}), ...(forbidden !== undefined ? {forbidden_paths: forbidden} : {})}
}

/**
 * Which visit of this step in the run this is (1 the first time; a loop back from QA makes 2), as
 * the engine counts iterations: a snapshot a redrive retried is not an attempt of its own.
 */
function attemptOf({step, run, history}: StepContext<AgentStep>): number {
  const retried = new Set((run.redrives ?? []).filter((r) => r.step === step.id).map((r) => r.seq))
  return 1 + history.snapshots.filter((s) => s.run_id === run.run_id && s.step.name === step.id && !retried.has(s.step.seq)).length
}

async function runAgent(context: StepContext<AgentStep>): Promise<AgentResult> {
  const {step} = context
  const tools = step.tools.map((name) => {
    const tool = toolNamed(name)
    if (!tool) throw new PipeError('E_CONFIG', `agent step "${step.id}" names an unknown tool "${name}"`, {hint: 'pipe validate lists the tools an agent step may name.'})
    return tool
  })
  let outputSchema: {schema: Record<string, unknown>; check: (v: unknown) => string | null} | null = null
  if (step.output_schema !== undefined) {
    const loaded = loadOutputSchema(stepDir(context.pipeline, step.id), step.output_schema)
    if (!loaded.ok) throw new PipeError('E_CONFIG', `output_schema "${step.output_schema}" ${loaded.problem}`, {hint: 'pipe validate checks output schemas before a run.'})
    outputSchema = loaded.output
  }
  const maxTurns = step.max_turns ?? DEFAULT_MAX_TURNS
  const maxRepairs = step.max_repairs ?? 2
  const provider = await context.provider()
  const template = (await promptOf(context))!
  const vars = step.vars ?? {}
  const prompt = renderPrompt(template, Object.fromEntries(Object.entries(vars).map(([name, value]) => [name, renderVar(value)])))
  const startProtocol: Protocol = step.tool_protocol === 'json' ? 'json' : 'native'

  let state = (await context.state.read()) as AgentState | undefined
  if (!state) {
    state = {
      version: 1,
      protocol: startProtocol,
      // The transcript is a record: whatever secret reached the prompt is masked in it.
      messages: [{role: 'system', content: systemText(step, startProtocol, tools, outputSchema?.schema ?? null)}, {role: 'user', content: redact(prompt)}],
      turns: 0,
      pending: [],
      calls: [],
      consumed: [],
      cache: {},
      usage: {prompt_tokens: 0, completion_tokens: 0, calls: 0},
      repairs: 0,
      model: null,
      files_changed: [],
      patches: [],
      executed: {},
    }
    // A redrive: the calls the attempts it retried ran stay done, and their confirmations stay used.
    for (const {seq, state: before} of await context.state.earlier()) {
      const earlier = before as Partial<AgentState>
      for (const [id, ran] of Object.entries(earlier.executed ?? {})) state.executed![id] = {...ran, seq: ran.seq ?? seq}
      for (const used of earlier.consumed ?? []) if (!state.consumed.includes(used)) state.consumed.push(used)
    }
    await context.state.write(state)
  }
  const s = state
  const save = (): Promise<void> => context.state.write(s)

  const finish = (outcome: 'done' | 'gave_up' | 'denied', reason: string, value: unknown, summary: string): AgentResult => {
    const evidence: Array<EvidenceDraft & {link: 'repo'}> = s.patches.map((p) => ({
      type: 'repo',
      link: 'repo',
      source: {ref: `repo://${p.files.join(',')}`},
      content: {excerpt: [...p.patch].slice(0, 500).join(''), note: `agent step ${step.id}, tool call ${p.call_id}: apply_edit_blocks changed ${p.files.join(', ')}`},
      linked_to: [{step: step.id}, {run_id: context.run.run_id}],
    }))
    return {
      type: 'done',
      outcome,
      reason,
      inputs: {...(step.task !== undefined ? {task: step.task} : {}), prompt: step.prompt, prompt_sha256: sha256(prompt), vars: redactDeep(vars), tools: step.tools, max_turns: maxTurns, protocol: s.protocol, ...(step.output_schema ? {output_schema: step.output_schema} : {})},
      outputs: {value, summary: redact(summary), files_changed: s.files_changed, turns: s.turns, tool_calls: s.calls.length, patch: s.patches.map((p) => p.patch).join(''), attempt: attemptOf(context)} satisfies AgentOutputs,
      toolCalls: s.calls,
      ...(evidence.length > 0 ? {evidence} : {}),
      llmModel: s.model,
      usage: s.usage,
    }
  }
  // The progress line and the snapshot's reason say what the agent changed, not only that it answered.
  const changed = (): string => (s.files_changed.length > 0 ? `; changed ${s.files_changed.join(', ')}` : '; changed no file')
  const refusedOrDenied = (): boolean => s.calls.some((c) => c.decision === 'refused' || c.decision === 'denied')
  const stop = (why: string): AgentResult => {
    const denied = refusedOrDenied()
    return finish(denied ? 'denied' : 'gave_up', denied ? `${why}, after a call was refused or denied` : why, null, why)
  }

  for (;;) {
    // Answer the calls of the last reply, in order, each once.
    while (s.pending.length > 0) {
      const call = s.pending[0]!
      const answered = await answerCall(context, s, call, tools, save)
      if (answered) return answered
      s.pending.shift()
      await save()
    }
    if (s.turns >= maxTurns) return stop(`no final answer within max_turns ${maxTurns}`)
    fitConversation(s.messages, step.max_context_bytes ?? DEFAULT_MAX_CONTEXT_BYTES)
    let reply: ChatReply
    try {
      reply = await provider.chat(
        {
          messages: s.messages,
          ...(s.protocol === 'native' ? {tools: toolSpecs(tools), tool_choice: 'auto' as const} : {}),
          ...(step.model !== undefined ? {model: step.model} : {}),
          ...(step.temperature !== undefined ? {temperature: step.temperature} : {}),
        },
        modelCall(context),
      )
    } catch (error) {
      if (s.protocol === 'native' && step.tool_protocol !== 'native' && rejectsTools(error)) {
        s.protocol = 'json'
        s.messages = toJsonProtocol(s.messages, systemText(step, 'json', tools, outputSchema?.schema ?? null))
        await save()
        continue
      }
      throw error
    }
    s.turns++
    s.model = reply.model
    s.usage.calls++
    s.usage.prompt_tokens += reply.usage?.prompt_tokens ?? 0
    s.usage.completion_tokens += reply.usage?.completion_tokens ?? 0
    const reading = readReply(reply, s.protocol, s.turns)
    if ('calls' in reading) reading.calls = withUniqueIds(reading.calls, s.messages, s.turns, s.executed)
    const toolCalls = 'calls' in reading ? reading.calls : reply.message.tool_calls
    s.messages.push(redactDeep({role: 'assistant', content: reply.message.content, ...(s.protocol === 'native' && toolCalls?.length ? {tool_calls: toolCalls} : {})}))
    if ('calls' in reading) {
      // The state is a record too; the model never saw a secret, so masking its arguments changes nothing it asked for.
      const calls = redactDeep(reading.calls)
      s.pending = calls.slice(0, MAX_CALLS_PER_REPLY)
      // max_turns bounds the replies; this bounds what one reply can make pipe do (and the transcript it grows).
      for (const extra of calls.slice(MAX_CALLS_PER_REPLY)) {
        const why = `not run: one reply may call at most ${MAX_CALLS_PER_REPLY} tools; call it again in a later reply if it is still needed`
        s.calls.push({call_id: extra.id, turn: s.turns, name: extra.function.name, duration_ms: 0, arguments: safeParse(extra.function.arguments), decision: 'invalid', ok: false, summary: why, cache_hit: false})
        const at = context.now().toISOString()
        await context.event({at, event: 'tool_call_request', call_id: extra.id, tool: extra.function.name})
        await context.event({at, event: 'tool_call_result', call_id: extra.id, tool: extra.function.name, started_at: at, duration_ms: 0, decision: 'invalid', ok: false, summary: why})
        s.messages.push(resultMessage(s.protocol, extra, {error: why}))
        fitConversation(s.messages, step.max_context_bytes ?? DEFAULT_MAX_CONTEXT_BYTES)
      }
      await save()
      continue
    }
    if ('giveUp' in reading) {
      await save()
      return stop(`the model gave up: ${reading.giveUp}`)
    }
    let problem: string
    if ('unreadable' in reading) problem = reading.unreadable
    else if (!outputSchema) {
      await save()
      return finish('done', `final answer after ${s.turns} turn(s) and ${s.calls.length} tool call(s)${changed()}`, reading.text, reading.text)
    } else {
      const parsed = typeof reading.final === 'string' ? parseReply(reading.final) : {ok: true as const, value: reading.final}
      if (parsed.ok) {
        const found = outputSchema.check(parsed.value)
        if (found === null) {
          await save()
          return finish('done', `final answer matches ${step.output_schema} after ${s.turns} turn(s) and ${s.calls.length} tool call(s)${changed()}`, parsed.value, reading.text)
        }
        problem = `the final answer does not match the schema: ${found}`
      } else problem = `the final answer is not JSON: ${parsed.error}`
    }
    await provider.reject?.(reply, problem)
    if (s.repairs >= maxRepairs) {
      await save()
      throw new PipeError('E_MODEL', `agent step "${step.id}": ${problem} (after ${s.repairs} repair(s))`, {hint: 'Try a stronger model, a clearer prompt, or a simpler output_schema.'})
    }
    s.repairs++
    s.messages.push({role: 'user', content: `${problem}\nReply again${s.protocol === 'json' ? ' with one JSON object' : ''}.`})
    await save()
  }
}

/**
 * Runs (or refuses, or pauses at) one tool call and appends its result to the conversation.
 * Returns a pause when a person must decide first; null once the call has its result.
 */
async function answerCall(context: StepContext<AgentStep>, s: AgentState, call: ToolCall, tools: readonly AgentTool[], save: () => Promise<void>): Promise<AgentResult | null> {
  const {policy} = context
  const name = call.function.name
  const started = Date.now()
  const known = tools.find((t) => t.name === name) ? toolLevel(policy, name) : undefined
  // The request goes on the timeline as the call starts (once, though a confirmation pauses it), so
  // a long agent step shows its progress; the result follows when it has one.
  if (s.requested?.call_id !== call.id) {
    s.requested = {call_id: call.id, at: context.now().toISOString()}
    await context.event({at: s.requested.at, event: 'tool_call_request', call_id: call.id, tool: name, ...(known ? {level: known} : {})})
  }
  const startedAt = s.requested.at
  const record = async (entry: Omit<ToolCallRecord, 'call_id' | 'turn' | 'name' | 'duration_ms'>, content: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const duration = Math.max(0, Date.now() - started)
    s.calls.push({call_id: call.id, turn: s.turns, name, duration_ms: duration, ...redactDeep(entry), summary: redact(entry.summary)})
    delete s.requested
    // The timeline gets the call's verdict, never its content (a file read, a command's output).
    await context.event({at: context.now().toISOString(), event: 'tool_call_result', call_id: call.id, tool: name, started_at: startedAt, duration_ms: duration, ...(entry.level ? {level: entry.level} : {}), decision: entry.decision, ok: entry.ok === true, summary: redact(entry.summary)})
    // An error names the repository's folder (a Node error, a refused path): the model reads it relative, as in any checkout.
    const said = typeof content['error'] === 'string' ? {...content, error: relativeToRoot(content['error'], context.cwd)} : content
    s.messages.push(resultMessage(s.protocol, call, said))
    fitConversation(s.messages, context.step.max_context_bytes ?? DEFAULT_MAX_CONTEXT_BYTES)
    return said
  }
  const tool = tools.find((t) => t.name === name)
  const parsedArgs = safeParse(call.function.arguments)
  if (!tool) {
    await record({arguments: parsedArgs, decision: 'invalid', ok: false, summary: `unknown tool ${name}`, cache_hit: false}, {error: `there is no tool "${name}"${didYouMean(name, tools.map((t) => t.name))}; the tools are: ${tools.map((t) => t.name).join(', ')}`})
    return null
  }
  const level: ToolLevel = toolLevel(policy, name)
  if (typeof call.function.arguments !== 'string' || (call.function.arguments.trim() !== '' && parsedArgs === call.function.arguments)) {
    await record({arguments: call.function.arguments, level, decision: 'invalid', ok: false, summary: 'arguments are not JSON', cache_hit: false}, {error: 'the arguments are not valid JSON; nothing was run', schema: tool.parameters})
    return null
  }
  const args = (call.function.arguments.trim() === '' ? {} : parsedArgs) as Record<string, unknown>
  const problems = argumentProblems(tool, args)
  if (problems !== null) {
    await record({arguments: args, level, decision: 'invalid', ok: false, summary: `invalid arguments: ${problems}`, cache_hit: false}, {error: `invalid arguments: ${problems}; nothing was run`, schema: tool.parameters})
    return null
  }
  // A call that was running when pipe stopped: its effect is unknown, so it is never run again blindly.
  if (s.inflight === call.id) {
    delete s.inflight
    await record({arguments: args, level, decision: 'auto', ok: false, summary: 'interrupted: pipe stopped while it ran; its effect is unknown', cache_hit: false}, {error: 'pipe was interrupted while this call ran; whether it took effect is unknown. Read the files (or run the check) again before going on.'})
    return null
  }
  const key = stableKey(name, args)
  // It ran in an attempt a redrive retried: its effect happened, so the model is given what it was given then, and it never runs again.
  const ran = s.executed?.[call.id]
  if (ran && ran.key === key) {
    const {summary, files_changed: files, ...was} = ran.record
    await record({arguments: args, ...was, summary: `not run again: it ran in attempt #${ran.seq ?? '?'} of this step before a redrive (${summary})`, cache_hit: false, ...(ran.seq !== undefined ? {replayed_from: ran.seq} : {}), ...(files?.length ? {files_changed: files} : {})}, ran.content)
    for (const f of files ?? []) if (!s.files_changed.includes(f)) s.files_changed.push(f)
    if (ran.patch && files?.length) s.patches.push({call_id: call.id, files, patch: ran.patch})
    return null
  }
  const cacheable = level === 'safe' && !tool.mutates
  const cached = cacheable ? s.cache[key] : undefined
  if (cached) {
    await record({arguments: args, level, decision: 'auto', ok: cached.ok, summary: cached.summary, cache_hit: true}, cached.result)
    return null
  }
  let decision: ToolCallRecord['decision'] = 'auto'
  let person: {by: string; note?: string} | undefined
  const argv = argvOf(name, args, context.policy, context.cwd)
  if (needsConfirmation(policy, level)) {
    // A command line every segment of which a person approved in advance needs no one now.
    const approved = argv !== undefined && argv.length > 0 && argv.every((a) => preapproval(policy, a, {root: context.cwd}) !== null)
    const given = context.run.confirmation
    if (approved) decision = 'preapproved'
    else if (argv === undefined && name === 'run_command') {
      // A line that cannot run (refused syntax, a denied segment) is answered without asking anyone.
    } else if (given && given.call_id === call.id && !s.consumed.includes(call.id) && !s.consumed.includes(`${given.call_id} ${given.at}`) && (given.action_sha256 === undefined || given.action_sha256 === shownAction(call, args, level, argv, context.cwd).sha256)) {
      // The answer is for exactly the action the person was shown, once: another call that took its id (or an edited one) is asked about again.
      s.consumed.push(`${given.call_id} ${given.at}`)
      person = {by: given.by, ...(given.note ? {note: given.note} : {})}
      if (given.decision === 'no') {
        await record({arguments: args, level, decision: 'refused', ok: false, summary: `refused by ${given.by}${given.note ? `: ${given.note}` : ''}`, cache_hit: false, ...person}, {
          error: `a person (${given.by}) refused this call; it did not run`,
          refused: true,
          ...(given.note ? {note: given.note} : {}),
        })
        return null
      }
      decision = 'confirmed'
    } else {
      await save()
      const shown = argv ? argv.map((a) => a.join(' ')).join(' ; ') : JSON.stringify(args)
      return {
        type: 'await',
        kind: 'confirm',
        reason: `agent step ${context.step.id} wants to call ${name} (${level}): ${redact(shown)}`,
        action: shownAction(call, args, level, argv, context.cwd),
      }
    }
  }
  if (tool.mutates) {
    s.inflight = call.id
    await save()
  }
  const edits = editScope(context.step)
  const outcome: ToolOutcome = await tool.run(args, {policy, root: context.cwd, signal: context.signal, slotsDir: context.slotsDir, ...(edits ? {edits} : {})})
  const shape = resultProblems(tool, outcome.result)
  if (shape !== null) throw new PipeError('E_INTERNAL', `the result of ${name} does not match its result schema: ${shape}`, {hint: 'This is a bug in pipe.'})
  delete s.inflight
  if (tool.mutates) s.cache = {}
  else if (cacheable) s.cache[key] = {result: outcome.result, summary: outcome.summary, ok: outcome.ok}
  if (outcome.files_changed?.length) {
    for (const f of outcome.files_changed) if (!s.files_changed.includes(f)) s.files_changed.push(f)
    if (outcome.patch) s.patches.push({call_id: call.id, files: outcome.files_changed, patch: redact(outcome.patch)})
  }
  const entry = {level, decision: outcome.denied ? ('denied' as const) : decision, ok: outcome.ok, summary: outcome.summary, ...(outcome.files_changed?.length ? {files_changed: outcome.files_changed} : {}), ...(person ?? {})}
  const said = await record({arguments: args, ...entry, cache_hit: false, ...(outcome.denied ? {} : {executed: true})}, outcome.result)
  // What ran is kept with what the model was given, in the same save as its result, so no redrive runs it again.
  if (!outcome.denied && !cacheable) {
    s.executed ??= {}
    s.executed[call.id] = {key, content: redactDeep(said), record: redactDeep({...entry, summary: redact(entry.summary)}), ...(outcome.patch && outcome.files_changed?.length ? {patch: redact(outcome.patch)} : {})}
  }
  return null
}
