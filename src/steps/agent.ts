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
import {loadOutputSchema} from '../config/output-schema.js'
import {didYouMean} from '../util/suggest.js'
import {PipeError} from '../errors.js'
import {BUILT_IN_AGENT_TOOLS} from '../config/agent-tools.js'
import {agentOutput, type AgentState} from './agent/state.js'
import {promptStepFindings} from './model-support.js'
import {narrowed} from './output-schemas.js'
import type {StepHandler} from './types.js'

import {diffLines} from '../edit/workspace.js'

export type {AgentOutputs} from './agent/state.js'
export {agentOutput}

export const agent: StepHandler<'agent'> = {
  kind: 'agent',
  waitsFor: 'confirm',
  summary: 'a model works on a task with tools (read, search, edit, run allowed commands) in a bounded loop, under the policy',
  outcomes: () => ['done', 'gave_up', 'denied'],
  failures: {
    gave_up: {
      code: 'E_MODEL',
      hint: ({run_id, step}) =>
        `The agent gave up; pipe snapshot show ${run_id} --step ${step} shows its tool calls and reason. Route the outcome with on: {gave_up: STEP}, give it more max_turns or a clearer prompt.`,
    },
    denied: {
      code: 'E_POLICY_DENIED',
      hint: ({run_id, step}) =>
        `The agent stopped after a call was refused or denied; pipe snapshot show ${run_id} --step ${step} shows which. Allow it in the policy, or route the outcome with on: {denied: STEP}.`,
    },
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
      const out = {
        value: agentOutput('value').of(snapshot),
        summary: agentOutput('summary').of(snapshot),
        files_changed: agentOutput('files_changed').of(snapshot),
        turns: agentOutput('turns').of(snapshot),
        tool_calls: agentOutput('tool_calls').of(snapshot),
        patch: agentOutput('patch').of(snapshot),
      }
      const edits = (snapshot.tool_calls ?? []).filter((c) => c.name === 'apply_edit_blocks')
      return {
        files: {
          'plan.json': {
            step: snapshot.step.name,
            seq: snapshot.step.seq,
            task,
            outcome: snapshot.decisions.at(-1)?.decision ?? null,
            answer: out.value ?? null,
            summary: out.summary ?? null,
            turns: out.turns ?? 0,
            tool_calls: out.tool_calls ?? 0,
          },
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
      const patch = agentOutput('patch').of(snapshot)
      const tools = [...new Set((snapshot.tool_calls ?? []).map((c) => c.name))]
      return [
        `agent: ${(snapshot.tool_calls ?? []).length} tool call(s)${tools.length > 0 ? ` (${tools.join(', ')})` : ''}${files.length > 0 ? `, patch ${files.length} file(s), ${patch ? diffLines(patch) : 0} line(s): ${files.join(', ')}` : ', no file changed'}`,
      ]
    },
  },
  check(step, loaded) {
    const out: KindFinding[] = []
    // The built-in tools and the ones the pipeline declares (its top-level tools:).
    const known = [...new Set([...BUILT_IN_AGENT_TOOLS, ...Object.keys(loaded.pipeline.tools ?? {})])]
    step.tools.forEach((name, i) => {
      if (!known.includes(name))
        out.push({rule: 'agent-step', at: ['tools', i], message: `unknown tool "${name}"${didYouMean(name, known)} (tools: ${known.join(', ')})`})
    })
    out.push(...promptStepFindings('agent-step', step, loaded))
    return out
  },
  // The loop, its tools and the policy's sandbox are run code: loaded when a step first needs them, never to validate or draw a pipeline.
  pendingAction: async (state, where) => (await import('./agent/confirmation.js')).pendingActionOf(state, where),
  async run(context) {
    try {
      const {runAgent} = await import('./agent/conversation.js')
      return await runAgent(context)
    } catch (error) {
      // A step that fails still says which calls it made (and what they changed): the snapshot keeps the error's details.
      const state = (await context.state.read().catch(() => undefined)) as AgentState | undefined
      if (error instanceof PipeError && state && state.calls.length > 0) {
        throw new PipeError(error.code, error.message, {
          ...(error.hint ? {hint: error.hint} : {}),
          retryable: error.retryable,
          blocking: error.blocking,
          details: {
            ...(error.details ?? {}),
            tool_calls: state.calls,
            files_changed: state.files_changed,
            // Its edits stay on disk and count against the task's max_patch_lines in a later attempt.
            patch_lines: state.patches.reduce((n, p) => n + diffLines(p.patch), 0),
          },
        })
      }
      throw error
    }
  },
}
