/** The bodies a webhook target sends: a Feishu/Lark custom bot, a Slack incoming webhook, or plain JSON. */
import {createHmac} from 'node:crypto'
import type {CanonicalSpec} from '../types/spec.js'

export interface PublishContext {
  key: string
  runId: string
  target: string
  publishedAt: Date
}

function summaryLines(spec: CanonicalSpec): string[] {
  const p0 = spec.features.filter((f) => f.priority === 'P0').length
  return [
    `${spec.meta.feature_id} ${spec.meta.spec_version} (${spec.meta.status})`,
    `Goal: ${spec.goal || '-'}`,
    `${spec.features.length} features (${p0} P0), ${spec.acceptance_criteria.length} acceptance criteria, ${spec.tasks.length} tasks, ${spec.vv.length} V&V items`,
    ...spec.features.slice(0, 10).map((f) => `• [${f.priority}] ${f.title}`),
  ]
}

function title(spec: CanonicalSpec): string {
  return `Spec published: ${spec.meta.title ?? spec.meta.feature_id}`
}

/**
 * Feishu/Lark custom-bot signature: base64(HMAC-SHA256(key = "timestamp\nsecret", message = "")),
 * with the timestamp in seconds.
 */
export function feishuSign(timestamp: number, secret: string): string {
  return createHmac('sha256', `${timestamp}\n${secret}`).update('').digest('base64')
}

/**
 * Slack reads `&`, `<` and `>` as control characters in every text object and in a message's
 * `text` (`<!channel>` pings everyone, `<@U…>` a person, `<url|label>` is a link): spec text is
 * escaped as HTML entities, which Slack decodes for display.
 */
export function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/**
 * Feishu/Lark `text` elements of a post are shown literally (a mention is an `at` element, which
 * pipe never sends), but `text` messages and `md` elements parse `<at user_id="all">`: a zero-width
 * space after `<` keeps spec text from ever becoming a mention, and shows the same.
 */
export function feishuText(text: string): string {
  return text.replace(/<(\/?at\b)/gi, '<\u200B$1')
}

export function feishuPayload(spec: CanonicalSpec, context: PublishContext, secret?: string): Record<string, unknown> {
  const timestamp = Math.floor(context.publishedAt.getTime() / 1000)
  const lines = summaryLines(spec)
  return {
    ...(secret ? {timestamp: String(timestamp), sign: feishuSign(timestamp, secret)} : {}),
    msg_type: 'post',
    content: {
      post: {
        zh_cn: {
          title: feishuText(title(spec)),
          content: [...lines.map((text) => [{tag: 'text', text: feishuText(text)}]), [{tag: 'text', text: `run ${context.runId} · key ${context.key}`}]],
        },
      },
    },
  }
}

/** Cuts at `max` characters without splitting an entity such as `&amp;`. */
function clip(text: string, max: number): string {
  if (text.length <= max) return text
  const cut = text.slice(0, max)
  return cut.replace(/&[a-z]*$/, '')
}

export function slackPayload(spec: CanonicalSpec, context: PublishContext): Record<string, unknown> {
  const lines = summaryLines(spec)
  return {
    text: slackEscape(`${title(spec)} — ${spec.meta.spec_version}`),
    blocks: [
      {type: 'header', text: {type: 'plain_text', text: clip(slackEscape(title(spec)), 150)}},
      {type: 'section', text: {type: 'mrkdwn', text: clip(slackEscape(lines.join('\n')), 3000)}},
      {type: 'context', elements: [{type: 'mrkdwn', text: `run ${context.runId} · key \`${context.key}\``}]},
    ],
  }
}

export function jsonPayload(spec: CanonicalSpec, context: PublishContext): Record<string, unknown> {
  return {
    event: 'spec.published',
    idempotency_key: context.key,
    feature_id: spec.meta.feature_id,
    spec_version: spec.meta.spec_version,
    content_hash: spec.meta.content_hash,
    run_id: context.runId,
    target: context.target,
    published_at: context.publishedAt.toISOString(),
    spec,
  }
}
