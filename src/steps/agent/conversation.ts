/**
 * The think/act/observe loop of an agent step: ask the model, answer its tool calls, until a final
 * answer (checked against output_schema), giving up, or max_turns. The state is saved after every
 * reply and every result, so a resume never asks again for a turn that was answered.
 */
import {stepDir} from '../../config/positions.js'
import {loadOutputSchema} from '../../config/output-schema.js'
import {PipeError} from '../../errors.js'
import type {ChatReply} from '../../providers/chat.js'
import {parseReply} from '../../providers/openai/provider.js'
import {renderPrompt} from '../../providers/prompt.js'
import {sha256} from '../../util/hash.js'
import {redact, redactDeep} from '../../util/redact.js'
import {renderVar} from '../model.js'
import {modelCall, promptOf} from '../model-support.js'
import type {EvidenceDraft, StepContext} from '../types.js'
import {answerCall} from './answer-call.js'
import {DEFAULT_MAX_CONTEXT_BYTES, fitConversation} from './context-budget.js'
import {DEFAULT_MAX_TURNS, readReply, rejectsTools, resultMessage, safeParse, systemText, toJsonProtocol, toolSpecs, withUniqueIds} from './protocol.js'
import type {AgentOutputs, AgentResult, AgentState, AgentStep, Protocol} from './state.js'
import {customTools, toolNamed} from './tools.js'

/** Tool calls of one reply that are run; the rest are answered with an error, unrun. */
export const MAX_CALLS_PER_REPLY = 50

/**
 * Which visit of this step in the run this is (1 the first time; a loop back from QA makes 2), as
 * the engine counts iterations: a snapshot a redrive retried is not an attempt of its own.
 */
function attemptOf({step, run, history}: StepContext<AgentStep>): number {
  const retried = new Set((run.redrives ?? []).filter((r) => r.step === step.id).map((r) => r.seq))
  return 1 + history.snapshots.filter((s) => s.run_id === run.run_id && s.step.name === step.id && !retried.has(s.step.seq)).length
}

export async function runAgent(context: StepContext<AgentStep>): Promise<AgentResult> {
  const {step} = context
  const declared = context.pipeline.pipeline.tools ?? {}
  const own = await customTools(declared, step.tools)
  const tools = step.tools.map((name) => {
    const tool = toolNamed(name) ?? own.get(name)
    if (!tool)
      throw new PipeError('E_CONFIG', `agent step "${step.id}" names an unknown tool "${name}"`, {
        hint: 'pipe validate lists the tools an agent step may name.',
      })
    return tool
  })
  let outputSchema: {schema: Record<string, unknown>; check: (v: unknown) => string | null} | null = null
  if (step.output_schema !== undefined) {
    const loaded = loadOutputSchema(stepDir(context.pipeline, step.id), step.output_schema)
    if (!loaded.ok)
      throw new PipeError('E_CONFIG', `output_schema "${step.output_schema}" ${loaded.problem}`, {hint: 'pipe validate checks output schemas before a run.'})
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
      messages: [
        {role: 'system', content: systemText(step, startProtocol, tools, outputSchema?.schema ?? null)},
        {role: 'user', content: redact(prompt)},
      ],
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
      ...(own.size > 0 ? {declared_levels: Object.fromEntries([...own.values()].map((t) => [t.name, t.level ?? 'dangerous']))} : {}),
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
      content: {
        excerpt: [...p.patch].slice(0, 500).join(''),
        note: `agent step ${step.id}, tool call ${p.call_id}: apply_edit_blocks changed ${p.files.join(', ')}`,
      },
      linked_to: [{step: step.id}, {run_id: context.run.run_id}],
    }))
    return {
      type: 'done',
      outcome,
      reason,
      inputs: {
        ...(step.task !== undefined ? {task: step.task} : {}),
        prompt: step.prompt,
        prompt_sha256: sha256(prompt),
        vars: redactDeep(vars),
        tools: step.tools,
        // What the pipeline's own tools ran: the template, as written, and the level it declared.
        ...(own.size > 0
          ? {
              declared_tools: Object.fromEntries(
                [...own.keys()].map((name) => [name, {argv: declared[name]!.argv, level: declared[name]!.level ?? 'dangerous'}]),
              ),
            }
          : {}),
        max_turns: maxTurns,
        protocol: s.protocol,
        ...(step.output_schema ? {output_schema: step.output_schema} : {}),
      },
      outputs: {
        value,
        summary: redact(summary),
        files_changed: s.files_changed,
        turns: s.turns,
        tool_calls: s.calls.length,
        patch: s.patches.map((p) => p.patch).join(''),
        attempt: attemptOf(context),
      } satisfies AgentOutputs,
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
    s.messages.push(
      redactDeep({role: 'assistant', content: reply.message.content, ...(s.protocol === 'native' && toolCalls?.length ? {tool_calls: toolCalls} : {})}),
    )
    if ('calls' in reading) {
      // The state is a record too; the model never saw a secret, so masking its arguments changes nothing it asked for.
      const calls = redactDeep(reading.calls)
      s.pending = calls.slice(0, MAX_CALLS_PER_REPLY)
      // max_turns bounds the replies; this bounds what one reply can make pipe do (and the transcript it grows).
      for (const extra of calls.slice(MAX_CALLS_PER_REPLY)) {
        const why = `not run: one reply may call at most ${MAX_CALLS_PER_REPLY} tools; call it again in a later reply if it is still needed`
        s.calls.push({
          call_id: extra.id,
          turn: s.turns,
          name: extra.function.name,
          duration_ms: 0,
          arguments: safeParse(extra.function.arguments),
          decision: 'invalid',
          ok: false,
          summary: why,
          cache_hit: false,
        })
        const at = context.now().toISOString()
        await context.event({at, event: 'tool_call_request', call_id: extra.id, tool: extra.function.name})
        await context.event({
          at,
          event: 'tool_call_result',
          call_id: extra.id,
          tool: extra.function.name,
          started_at: at,
          duration_ms: 0,
          decision: 'invalid',
          ok: false,
          summary: why,
        })
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
          return finish(
            'done',
            `final answer matches ${step.output_schema} after ${s.turns} turn(s) and ${s.calls.length} tool call(s)${changed()}`,
            parsed.value,
            reading.text,
          )
        }
        problem = `the final answer does not match the schema: ${found}`
      } else problem = `the final answer is not JSON: ${parsed.error}`
    }
    await provider.reject?.(reply, problem)
    if (s.repairs >= maxRepairs) {
      await save()
      throw new PipeError('E_MODEL', `agent step "${step.id}": ${problem} (after ${s.repairs} repair(s))`, {
        hint: 'Try a stronger model, a clearer prompt, or a simpler output_schema.',
      })
    }
    s.repairs++
    s.messages.push({role: 'user', content: `${problem}\nReply again${s.protocol === 'json' ? ' with one JSON object' : ''}.`})
    await save()
  }
}
