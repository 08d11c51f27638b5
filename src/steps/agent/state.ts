/** What an agent step keeps between turns, pauses and crashes (StepContext.state): its durable conversation. */
import type {ToolLevel} from '../../policy/tools.js'
import type {ChatMessage, ToolCall} from '../../providers/chat.js'
import type {Usage} from '../../providers/types.js'
import {outputsOf} from '../outputs.js'
import type {KindOutputs, StepOf, StepResult, ToolCallRecord} from '../types.js'

export type AgentStep = StepOf<'agent'>
/** What an agent step's snapshot records as outputs (schemas/kinds/agent.outputs.json). */
export type AgentOutputs = KindOutputs<'agent'>
/** The agent's outputs as a snapshot holds them, each read typed (`agentOutput('patch').of(snapshot)`). */
export const agentOutput = outputsOf<AgentOutputs>()
export type AgentResult = StepResult<AgentOutputs>
/** How tool calls travel: the endpoint's function tools, or one JSON object per reply. */
export type Protocol = 'native' | 'json'

/** What the step keeps between turns, pauses and crashes (StepContext.state). */
export interface AgentState {
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
  /** The levels the pipeline declared for the tools of its own that the step offers (the policy may make them stricter). */
  declared_levels?: Record<string, ToolLevel>
  /** The argv a call to a pipeline's tool paused with, as the person was shown it (what pendingActionOf shows again). */
  planned?: {call_id: string; argv: string[][]}
  /** Results of safe calls since the last call that could change something, by tool and arguments. */
  cache: Record<string, {result: Record<string, unknown>; summary: string; ok: boolean}>
  usage: Usage
  repairs: number
  model: string | null
  files_changed: string[]
  patches: Array<{call_id: string; files: string[]; patch: string}>
}

/** A call that ran, as AgentState.executed keeps it. */
export interface ExecutedCall {
  /** The tool and its arguments (stableKey): the same id with other arguments is another call. */
  key: string
  /** The seq of the attempt it ran in; absent while it is this attempt. */
  seq?: number
  content: Record<string, unknown>
  record: Pick<ToolCallRecord, 'level' | 'decision' | 'ok' | 'summary' | 'files_changed' | 'by' | 'note'>
  patch?: string
}
