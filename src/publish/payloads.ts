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

export function feishuPayload(spec: CanonicalSpec, context: PublishContext, secret?: string): Record<string, unknown> {
  const timestamp = Math.floor(context.publishedAt.getTime() / 1000)
  const lines = summaryLines(spec)
  return {
    ...(secret ? {timestamp: String(timestamp), sign: feishuSign(timestamp, secret)} : {}),
    msg_type: 'post',
    content: {
      post: {
        zh_cn: {
          title: title(spec),
          content: [...lines.map((text) => [{tag: 'text', text}]), [{tag: 'text', text: `run ${context.runId} · key ${context.key}`}]],
        },
      },
    },
  }
}

export function slackPayload(spec: CanonicalSpec, context: PublishContext): Record<string, unknown> {
  const lines = summaryLines(spec)
  return {
    text: `${title(spec)} — ${spec.meta.spec_version}`,
    blocks: [
      {type: 'header', text: {type: 'plain_text', text: title(spec).slice(0, 150)}},
      {type: 'section', text: {type: 'mrkdwn', text: lines.join('\n').slice(0, 3000)}},
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
