/** One tool call of an agent's reply: checked, answered from what already ran, confirmed by a person or paused for one, run, and recorded. */
import {didYouMean} from '../../util/suggest.js'
import {PipeError} from '../../errors.js'
import {diffLines} from '../../edit/workspace.js'
import {commandConfirmRule} from '../../policy/confirm.js'
import {needsConfirmation, preapproval, toolLevel, type ToolLevel} from '../../policy/tools.js'
import type {ToolCall} from '../../providers/chat.js'
import {redact, redactDeep} from '../../util/redact.js'
import {relativeToRoot} from '../../util/stable-text.js'
import type {StepContext, ToolCallRecord} from '../types.js'
import {standingAnswer} from '../confirm-action.js'
import {argvOf, shownAction} from './confirmation.js'
import {DEFAULT_MAX_CONTEXT_BYTES, fitConversation} from './context-budget.js'
import {resultMessage, safeParse, stableKey} from './protocol.js'
import {agentOutput, type AgentResult, type AgentState, type AgentStep} from './state.js'
import {argumentProblems, resultProblems, type AgentTool, type EditScope, type ToolOutcome} from './tools.js'

/** The files the step's edits are bounded to (the engine resolved its expressions into lists), or undefined. */
function editScope(step: AgentStep): EditScope | undefined {
  const list = (value: string[] | string | undefined): string[] | undefined => {
    if (value === undefined) return undefined
    if (!Array.isArray(value))
      throw new PipeError('E_CONFIG', `agent step "${step.id}": ${value} was not resolved to a list of paths`, {
        hint: 'Give files_touched and forbidden_paths as lists, or one ${{ expression }} that gives a list.',
      })
    return value
  }
  const filesTouched = list(step.files_touched)
  const forbidden = list(step.forbidden_paths)
  if (filesTouched === undefined && forbidden === undefined) return undefined
  return {...(filesTouched !== undefined ? {files_touched: filesTouched} : {}), ...(forbidden !== undefined ? {forbidden_paths: forbidden} : {})}
}

/**
 * Runs (or refuses, or pauses at) one tool call and appends its result to the conversation.
 * Returns a pause when a person must decide first; null once the call has its result.
 */
export async function answerCall(
  context: StepContext<AgentStep>,
  s: AgentState,
  call: ToolCall,
  tools: readonly AgentTool[],
  save: () => Promise<void>,
): Promise<AgentResult | null> {
  const {policy} = context
  const name = call.function.name
  const started = Date.now()
  const offered = tools.find((t) => t.name === name)
  const known = offered ? toolLevel(policy, name, offered.level) : undefined
  // The request goes on the timeline as the call starts (once, though a confirmation pauses it), so
  // a long agent step shows its progress; the result follows when it has one.
  if (s.requested?.call_id !== call.id) {
    s.requested = {call_id: call.id, at: context.now().toISOString()}
    await context.event({at: s.requested.at, event: 'tool_call_request', call_id: call.id, tool: name, ...(known ? {level: known} : {})})
  }
  const startedAt = s.requested.at
  const record = async (
    entry: Omit<ToolCallRecord, 'call_id' | 'turn' | 'name' | 'duration_ms'>,
    content: Record<string, unknown>,
  ): Promise<Record<string, unknown>> => {
    const duration = Math.max(0, Date.now() - started)
    s.calls.push({call_id: call.id, turn: s.turns, name, duration_ms: duration, ...redactDeep(entry), summary: redact(entry.summary)})
    delete s.requested
    // The timeline gets the call's verdict, never its content (a file read, a command's output).
    await context.event({
      at: context.now().toISOString(),
      event: 'tool_call_result',
      call_id: call.id,
      tool: name,
      started_at: startedAt,
      duration_ms: duration,
      ...(entry.level ? {level: entry.level} : {}),
      decision: entry.decision,
      ok: entry.ok === true,
      summary: redact(entry.summary),
    })
    // An error names the repository's folder (a Node error, a refused path): the model reads it relative, as in any checkout.
    const said = typeof content['error'] === 'string' ? {...content, error: relativeToRoot(content['error'], context.cwd)} : content
    s.messages.push(resultMessage(s.protocol, call, said))
    fitConversation(s.messages, context.step.max_context_bytes ?? DEFAULT_MAX_CONTEXT_BYTES)
    return said
  }
  const tool = tools.find((t) => t.name === name)
  const parsedArgs = safeParse(call.function.arguments)
  if (!tool) {
    await record(
      {arguments: parsedArgs, decision: 'invalid', ok: false, summary: `unknown tool ${name}`, cache_hit: false},
      {
        error: `there is no tool "${name}"${didYouMean(
          name,
          tools.map((t) => t.name),
        )}; the tools are: ${tools.map((t) => t.name).join(', ')}`,
      },
    )
    return null
  }
  const level: ToolLevel = toolLevel(policy, name, tool.level)
  if (typeof call.function.arguments !== 'string' || (call.function.arguments.trim() !== '' && parsedArgs === call.function.arguments)) {
    await record(
      {arguments: call.function.arguments, level, decision: 'invalid', ok: false, summary: 'arguments are not JSON', cache_hit: false},
      {error: 'the arguments are not valid JSON; nothing was run', schema: tool.parameters},
    )
    return null
  }
  const args = (call.function.arguments.trim() === '' ? {} : parsedArgs) as Record<string, unknown>
  const problems = argumentProblems(tool, args)
  if (problems !== null) {
    await record(
      {arguments: args, level, decision: 'invalid', ok: false, summary: `invalid arguments: ${problems}`, cache_hit: false},
      {error: `invalid arguments: ${problems}; nothing was run`, schema: tool.parameters},
    )
    return null
  }
  // A call that was running when pipe stopped: its effect is unknown, so it is never run again blindly.
  if (s.inflight === call.id) {
    delete s.inflight
    await record(
      {arguments: args, level, decision: 'auto', ok: false, summary: 'interrupted: pipe stopped while it ran; its effect is unknown', cache_hit: false},
      {error: 'pipe was interrupted while this call ran; whether it took effect is unknown. Read the files (or run the check) again before going on.'},
    )
    return null
  }
  const key = stableKey(name, args)
  // It ran in an attempt a redrive retried: its effect happened, so the model is given what it was given then, and it never runs again.
  const ran = s.executed?.[call.id]
  if (ran && ran.key === key) {
    const {summary, files_changed: files, ...was} = ran.record
    await record(
      {
        arguments: args,
        ...was,
        summary: `not run again: it ran in attempt #${ran.seq ?? '?'} of this step before a redrive (${summary})`,
        cache_hit: false,
        ...(ran.seq !== undefined ? {replayed_from: ran.seq} : {}),
        ...(files?.length ? {files_changed: files} : {}),
      },
      ran.content,
    )
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
  // A pipeline's own tool runs one vector built from the arguments: that is what a person is shown and what preapprovals match.
  const planned = tool.plan?.(args)
  const argv = planned ? (planned.ok ? [planned.argv] : undefined) : argvOf(name, args, context.policy, context.cwd)
  // A confirm.commands pattern asks whatever the tool's level, and no preapproval lifts it: the policy named that command line.
  const byPattern = argv !== undefined ? commandConfirmRule(policy, argv) : null
  if (needsConfirmation(policy, level) || byPattern !== null) {
    // A command line every segment of which a person approved in advance needs no one now.
    const approved = byPattern === null && argv !== undefined && argv.length > 0 && argv.every((a) => preapproval(policy, a, {root: context.cwd}) !== null)
    const given = context.run.confirmation
    const matches =
      given &&
      given.call_id === call.id &&
      !s.consumed.includes(call.id) &&
      !s.consumed.includes(`${given.call_id} ${given.at}`) &&
      (given.action_sha256 === undefined || given.action_sha256 === shownAction(call, args, level, argv, context.cwd).sha256)
    // pipe confirm --for step|run: an answer that stands for every later call of this step (or of the run).
    const standing = matches ? null : standingAnswer(context.run, context.step.id)
    if (approved) decision = 'preapproved'
    else if (argv === undefined && (name === 'run_command' || planned !== undefined)) {
      // A line that cannot run (refused syntax, a denied segment) is answered without asking anyone.
    } else if ((matches && given) || standing) {
      // The answer is for exactly the action the person was shown, once: another call that took its id (or an edited one) is asked about again.
      const answer = matches && given ? given : standing!
      if (matches && given) s.consumed.push(`${given.call_id} ${given.at}`)
      person = {by: answer.by, ...(answer.note ? {note: answer.note} : {})}
      if (answer.decision === 'no') {
        await record(
          {
            arguments: args,
            level,
            decision: 'refused',
            ok: false,
            summary: `refused by ${answer.by}${answer.note ? `: ${answer.note}` : ''}`,
            cache_hit: false,
            ...person,
          },
          {
            error: `a person (${answer.by}) refused this call; it did not run`,
            refused: true,
            ...(answer.note ? {note: answer.note} : {}),
          },
        )
        return null
      }
      decision = 'confirmed'
    } else {
      if (planned?.ok) s.planned = {call_id: call.id, argv: [planned.argv]}
      await save()
      const shown = argv ? argv.map((a) => a.join(' ')).join(' ; ') : JSON.stringify(args)
      return {
        type: 'await',
        kind: 'confirm',
        reason: `agent step ${context.step.id} wants to call ${name} (${level}${byPattern !== null ? `; ${byPattern}` : ''}): ${redact(shown)}`,
        action: shownAction(call, args, level, argv, context.cwd),
      }
    }
  }
  if (tool.mutates) {
    s.inflight = call.id
    await save()
  }
  const edits = editScope(context.step)
  const outcome: ToolOutcome = await tool.run(args, {
    policy,
    root: context.cwd,
    signal: context.signal,
    slotsDir: context.slotsDir,
    patchLines: patchLinesSoFar(context, s),
    ...(edits ? {edits} : {}),
  })
  const shape = resultProblems(tool, outcome.result)
  if (shape !== null) throw new PipeError('E_INTERNAL', `the result of ${name} does not match its result schema: ${shape}`, {hint: 'This is a bug in pipe.'})
  delete s.inflight
  if (tool.mutates) s.cache = {}
  else if (cacheable) s.cache[key] = {result: outcome.result, summary: outcome.summary, ok: outcome.ok}
  if (outcome.files_changed?.length) {
    for (const f of outcome.files_changed) if (!s.files_changed.includes(f)) s.files_changed.push(f)
    if (outcome.patch) s.patches.push({call_id: call.id, files: outcome.files_changed, patch: redact(outcome.patch)})
  }
  const entry = {
    level,
    decision: outcome.denied ? ('denied' as const) : decision,
    ok: outcome.ok,
    summary: outcome.summary,
    ...(outcome.files_changed?.length ? {files_changed: outcome.files_changed} : {}),
    ...(person ?? {}),
  }
  const said = await record({arguments: args, ...entry, cache_hit: false, ...(outcome.denied ? {} : {executed: true})}, outcome.result)
  // What ran is kept with what the model was given, in the same save as its result, so no redrive runs it again.
  if (!outcome.denied && !cacheable) {
    s.executed ??= {}
    s.executed[call.id] = {
      key,
      content: redactDeep(said),
      record: redactDeep({...entry, summary: redact(entry.summary)}),
      ...(outcome.patch && outcome.files_changed?.length ? {patch: redact(outcome.patch)} : {}),
    }
  }
  return null
}

/**
 * The lines the step's applied edits changed so far (seed 004: max_patch_lines bounds a task, not a
 * call): this attempt's, and with them the earlier attempts' of the same step in this run (a
 * coding task's child run is its task).
 */
function patchLinesSoFar(context: StepContext<AgentStep>, s: AgentState): {attempt: number; task: number; step: string} {
  const attempt = s.patches.reduce((n, p) => n + diffLines(p.patch), 0)
  const earlier = context.history.snapshots
    .filter((snapshot) => snapshot.step.name === context.step.id)
    .reduce((n, snapshot) => {
      const patch = agentOutput('patch').of(snapshot)
      return n + (patch !== undefined ? diffLines(patch) : erredPatchLines(snapshot))
    }, 0)
  return {attempt, task: earlier + attempt, step: context.step.id}
}

/** The lines an attempt that ended in an error had changed (agent.ts keeps them in its error's details). */
function erredPatchLines(snapshot: {errors: ReadonlyArray<{details?: Record<string, unknown> | undefined}>}): number {
  const lines = snapshot.errors.at(-1)?.details?.['patch_lines']
  return typeof lines === 'number' ? lines : 0
}
