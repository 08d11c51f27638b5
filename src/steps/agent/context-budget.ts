/**
 * What one request of an agent's conversation may carry: the oldest tool results give way to a note
 * of what was dropped once the conversation outgrows its budget (max_context_bytes).
 */
import type {ChatMessage} from '../../providers/chat.js'

/** What one request may carry by default, in bytes of message text (about 50k tokens). */
export const DEFAULT_MAX_CONTEXT_BYTES = 200_000

function isToolResult(m: ChatMessage): boolean {
  return m.role === 'tool' || (m.role === 'user' && typeof m.content === 'string' && m.content.startsWith('Result of '))
}

function messageBytes(m: ChatMessage): number {
  return (
    Buffer.byteLength(typeof m.content === 'string' ? m.content : '') +
    (m.role === 'assistant' && m.tool_calls ? Buffer.byteLength(JSON.stringify(m.tool_calls)) : 0)
  )
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
