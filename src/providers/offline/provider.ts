/**
 * The offline rules provider: deterministic, no network, no key. Same input, same output. It does
 * real extraction and planning so that the default pipeline is useful without a model.
 */
import type {Task} from '../../types/spec.js'
import {PipeError} from '../../errors.js'
import type {ChatCall, ChatReply} from '../chat.js'
import {
  OFFLINE_MODEL,
  type ApplyAnswersRequest,
  type GenerateRequest,
  type ClarifyRequest,
  type CompileOutput,
  type CompileRequest,
  type ModelReply,
  type Provider,
  type Question,
  type SpecBody,
  type VvItem,
} from '../types.js'
import {isNegative, isNoneAnswer, isNonAnswer, nfrCategory, parseGwt, priorityOf, stripPriority, taskType} from './classify.js'
import {mergeWithPrevious, missingKeyFields, nextId, normalizeForCompare, pad} from '../spec-build.js'
import {extractSpec} from './extract.js'
import {overlap, sentences, shorten, tokens} from './text.js'
import {compareText} from '../../util/order.js'

const QUESTION_TEXT: Record<string, {en: string; zh: string}> = {
  goal: {en: 'What is the goal of this work, in one or two sentences: who benefits, and how?', zh: '这项工作的目标是什么？请用一两句话说明谁受益、如何受益。'},
  features: {
    en: 'Which features are needed? List them one per line, marking each P0 (must), P1 (should) or P2 (could).',
    zh: '需要哪些功能？请每行列出一个，并标注优先级 P0（必须）、P1（应该）或 P2（可以）。',
  },
  acceptance_criteria: {
    en: 'How will we know it works? List acceptance criteria one per line, ideally as "Given ..., when ..., then ...".',
    zh: '如何判断已经完成？请每行列出一条验收标准，最好写成“假如……，当……，那么……”。',
  },
  non_functional: {
    en: 'What non-functional requirements apply (performance, security, reliability, usability)? One per line, with numbers where possible.',
    zh: '有哪些非功能需求（性能、安全、可靠性、易用性）？请每行列出一条，尽量给出具体数字。',
  },
  constraints: {
    en: 'What constraints apply (technology, budget, deadlines, things that must not change)? One per line, or "none".',
    zh: '有哪些约束（技术、预算、期限、不能改动的部分）？请每行列出一条，没有请回答“无”。',
  },
}

function questionFor(path: string, message: string | undefined, zh: boolean): string {
  const root = path.split(/[.[]/)[0]!
  const known = QUESTION_TEXT[path] ?? QUESTION_TEXT[root]
  if (known) return zh ? known.zh : known.en
  const detail = message ? ` (${message})` : ''
  return zh ? `请补充 ${path} 的内容${detail}。` : `Please provide ${path}${detail}.`
}

function isChinese(spec: SpecBody): boolean {
  const sample = [spec.goal, ...spec.features.map((f) => f.title)].join(' ')
  return /\p{Script=Han}/u.test(sample) && (sample.match(/\p{Script=Han}/gu)?.length ?? 0) * 2 > (sample.match(/[A-Za-z]/g)?.length ?? 0)
}

/** Splits an answer into entries: lines or list items, else sentences/semicolons. */
function answerItems(answer: string): string[] {
  const lines = answer
    .split('\n')
    .map((l) => l.replace(/^\s*(?:[-*+•]|\d{1,3}[.)、])\s*/, '').trim())
    .filter(Boolean)
  if (lines.length > 1) return lines
  const single = lines[0] ?? ''
  if (parseGwt(single)) return [single]
  const parts = single
    .split(/[;；]\s*/)
    .map((s) => s.trim())
    .filter(Boolean)
  return parts.length > 1 ? parts : sentences(single)
}

function addItems(body: SpecBody, field: string, answer: string, source: string): number {
  const items = answerItems(answer)
  let added = 0
  const has = (list: Array<{text?: string; title?: string}>, text: string): boolean =>
    list.some((x) => normalizeForCompare(x.text ?? x.title ?? '') === normalizeForCompare(text))
  for (const raw of items) {
    const text = stripPriority(raw)
    if (!text) continue
    switch (field) {
      case 'features':
        if (has(body.features, text)) break
        body.features.push({
          id: nextId(
            'FR',
            body.features.map((f) => f.id),
          ),
          title: shorten(text, 120),
          priority: priorityOf(raw, 'P1'),
          source,
          ...(text.length > 120 ? {description: text} : {}),
        })
        added++
        break
      case 'acceptance_criteria': {
        if (has(body.acceptance_criteria, text)) break
        const gwt = parseGwt(text)
        body.acceptance_criteria.push({
          id: nextId(
            'AC',
            body.acceptance_criteria.map((a) => a.id),
          ),
          text,
          source,
          ...(gwt ?? {}),
        })
        added++
        break
      }
      case 'non_functional':
        if (has(body.non_functional, text)) break
        body.non_functional.push({
          id: nextId(
            'NFR',
            body.non_functional.map((n) => n.id),
          ),
          category: nfrCategory(text) ?? 'other',
          text,
          source,
        })
        added++
        break
      case 'constraints':
        if (has(body.constraints, text)) break
        body.constraints.push({
          id: nextId(
            'C',
            body.constraints.map((c) => c.id),
          ),
          text,
          source,
        })
        added++
        break
      default:
        break
    }
  }
  return added
}

/** Links each acceptance criterion to the features it shares the most words with. */
function linkCriteria(spec: SpecBody): Map<string, string[]> {
  const links = new Map<string, string[]>()
  for (const ac of spec.acceptance_criteria) {
    if (ac.feature_ids && ac.feature_ids.length > 0) {
      links.set(ac.id, ac.feature_ids)
      continue
    }
    let best = 0
    let ids: string[] = []
    for (const feature of spec.features) {
      const score = overlap(ac.text, `${feature.title} ${feature.description ?? ''}`)
      if (score > best) {
        best = score
        ids = [feature.id]
      } else if (score === best && score > 0) ids.push(feature.id)
    }
    links.set(ac.id, best > 0 ? ids : [])
  }
  return links
}

function keywords(text: string, max: number): string[] {
  const counts = new Map<string, number>()
  for (const t of tokens(text)) counts.set(t, (counts.get(t) ?? 0) + 1)
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || compareText(a[0], b[0]))
    .slice(0, max)
    .map(([t]) => t)
}

const PRIORITY_ORDER = {P0: 0, P1: 1, P2: 2} as const

export class OfflineProvider implements Provider {
  readonly name = 'offline'
  readonly model = OFFLINE_MODEL
  readonly endpointHost = null

  async compile(request: CompileRequest, _call?: ChatCall): Promise<ModelReply<CompileOutput>> {
    const extracted = extractSpec(request.text)
    const body = request.previous ? mergeWithPrevious(extracted.body, request.previous) : extracted.body
    return {value: {body, title: extracted.title, missing_fields: missingKeyFields(body)}, citations: extracted.citations}
  }

  async clarify(request: ClarifyRequest, _call?: ChatCall): Promise<ModelReply<{questions: Question[]}>> {
    const zh = isChinese(request.spec)
    const seen = new Set<string>()
    const questions: Question[] = []
    for (const field of request.missing) {
      if (seen.has(field.path) || questions.length >= request.maxQuestions) continue
      seen.add(field.path)
      questions.push({id: `Q-${pad(request.firstNumber + questions.length)}`, field: field.path, question: questionFor(field.path, field.message, zh)})
    }
    return {value: {questions}, citations: []}
  }

  async applyAnswers(request: ApplyAnswersRequest, _call?: ChatCall): Promise<ModelReply<{body: SpecBody}>> {
    const body = structuredClone(request.spec)
    for (const question of request.questions) {
      const answer = request.answers[question.id]
      if (answer === undefined) continue
      const deferred = isNonAnswer(answer)
      if (!deferred) {
        if (question.field === 'goal') body.goal = answer.trim()
        else if (isNoneAnswer(answer) && (question.field === 'constraints' || question.field === 'non_functional')) {
          addItems(
            body,
            question.field,
            question.field === 'constraints'
              ? `No constraints beyond the defaults (answer to ${question.id})`
              : `No specific ${question.field.replace('_', '-')} requirements (answer to ${question.id})`,
            `answer:${question.id}`,
          )
        } else if (question.field === 'features' && isNegative(answer) && answerItems(answer).every(isNegative)) {
          addItems(body, 'constraints', answer, `answer:${question.id}`)
        } else addItems(body, question.field, answer, `answer:${question.id}`)
      }
      const existing = body.open_questions.find((q) => q.id === question.id)
      const record = {id: question.id, field: question.field, question: question.question, status: deferred ? ('open' as const) : ('answered' as const), answer}
      if (existing) Object.assign(existing, record)
      else body.open_questions.push(record)
    }
    return {value: {body}, citations: []}
  }

  async planTasks(request: {spec: SpecBody}, _call?: ChatCall): Promise<ModelReply<{tasks: Task[]}>> {
    const spec = request.spec
    const links = linkCriteria(spec)
    const forbiddenActions = spec.constraints.map((c) => c.text)
    const features = [...spec.features].sort((a, b) => PRIORITY_ORDER[a.priority] - PRIORITY_ORDER[b.priority] || compareText(a.id, b.id))
    const tasks: Task[] = []
    const taskOfFeature = new Map<string, string>()
    for (const feature of features) {
      const id = `T-${pad(tasks.length + 1)}`
      taskOfFeature.set(feature.id, id)
      const criteria = spec.acceptance_criteria.filter((ac) => links.get(ac.id)?.includes(feature.id))
      const text = `${feature.title} ${feature.description ?? ''}`
      tasks.push({
        id,
        title: feature.title,
        goal: feature.story ? `As ${feature.story.role}, ${feature.story.want}` : (feature.description ?? feature.title),
        type: taskType(text),
        priority: feature.priority,
        feature_ids: [feature.id],
        acceptance_criteria: criteria.map((c) => c.id),
        depends_on: [],
        inputs: {files_required: [], context_queries: keywords(text, 5)},
        expected_changes: {files_touched: [], interfaces_affected: []},
        constraints: {forbidden_paths: [], forbidden_actions: forbiddenActions},
        acceptance_tests: {
          static_checks: [],
          unit_tests: [],
          smoke_tests: [],
          expected_signals: criteria.length > 0 ? criteria.map((c) => c.text) : [`${feature.title} works as described`],
        },
        rollback_plan: {strategy: 'git_reset'},
        max_retries: 3,
      })
    }
    const p0Tasks = features.filter((f) => f.priority === 'P0').map((f) => taskOfFeature.get(f.id)!)
    for (const ac of spec.acceptance_criteria) {
      if ((links.get(ac.id) ?? []).length > 0) continue
      tasks.push({
        id: `T-${pad(tasks.length + 1)}`,
        title: shorten(`Verify: ${ac.text}`, 120),
        goal: `Add an automated check for ${ac.id}: ${ac.text}`,
        type: 'add_test',
        acceptance_criteria: [ac.id],
        feature_ids: [],
        depends_on: p0Tasks,
        inputs: {files_required: [], context_queries: keywords(ac.text, 5)},
        expected_changes: {files_touched: [], interfaces_affected: []},
        constraints: {forbidden_paths: [], forbidden_actions: forbiddenActions},
        acceptance_tests: {static_checks: [], unit_tests: [], smoke_tests: [], expected_signals: [ac.text]},
        rollback_plan: {strategy: 'git_reset'},
        max_retries: 3,
      })
    }
    return {value: {tasks}, citations: []}
  }

  async generateVv(request: {spec: SpecBody}, _call?: ChatCall): Promise<ModelReply<{vv: VvItem[]}>> {
    const spec = request.spec
    const links = linkCriteria(spec)
    const vv: VvItem[] = []
    const id = (): string => `VV-${pad(vv.length + 1)}`
    for (const ac of spec.acceptance_criteria) {
      const tasks = spec.tasks.filter((t) => t.acceptance_criteria?.includes(ac.id)).map((t) => t.id)
      const description = ac.given && ac.when && ac.then ? `Test: given ${ac.given}, when ${ac.when}, then ${ac.then}` : `Test that ${ac.text}`
      vv.push({id: id(), kind: 'verification', method: 'test', description, acceptance_criteria: [ac.id], tasks, requirements: links.get(ac.id) ?? []})
    }
    for (const nfr of spec.non_functional) {
      const method =
        nfr.category === 'performance' || nfr.category === 'reliability' || nfr.category === 'scalability'
          ? 'test'
          : nfr.category === 'other'
            ? 'inspection'
            : nfr.category === 'maintainability' || nfr.category === 'compliance'
              ? 'inspection'
              : 'analysis'
      const verb = method === 'test' ? 'Measure that' : method === 'inspection' ? 'Inspect that' : 'Check that'
      vv.push({id: id(), kind: 'verification', method, description: `${verb} ${nfr.text}`, acceptance_criteria: [], tasks: [], requirements: [nfr.id]})
    }
    for (const feature of spec.features.filter((f) => f.priority === 'P0')) {
      const tasks = spec.tasks.filter((t) => t.feature_ids?.includes(feature.id)).map((t) => t.id)
      const criteria = spec.acceptance_criteria.filter((ac) => links.get(ac.id)?.includes(feature.id)).map((ac) => ac.id)
      vv.push({
        id: id(),
        kind: 'validation',
        method: 'demonstration',
        description: `Demonstrate "${feature.title}" to the requester and confirm it meets the goal`,
        acceptance_criteria: criteria,
        tasks,
        requirements: [feature.id],
      })
    }
    return {value: {vv}, citations: []}
  }

  /**
   * The rules answer the built-in kinds only: a prompt of the pipeline's own needs a model. Not
   * retryable: asking again cannot help.
   */
  async generate(request: GenerateRequest, _call?: ChatCall): Promise<ModelReply<unknown> & {model: string}> {
    throw new PipeError(
      'E_CONFIG',
      `model step "${request.name}" needs a model, but the run uses the offline rules provider, which answers only the built-in kinds (compile, clarify_questions, apply_answers, plan_tasks, generate_vv)`,
      {
        hint: 'Point pipe at an OpenAI-compatible endpoint: set OPENAI_API_KEY, and OPENAI_BASE_URL for a server other than OpenAI (e.g. http://127.0.0.1:11434/v1 for Ollama); the default --provider auto then uses it (or say --provider openai, or provider.kind: openai in the pipeline). A recorded reply (--replay, in a later version) will also answer it.',
      },
    )
  }

  async chat(_request: unknown, call: ChatCall): Promise<ChatReply> {
    throw new PipeError('E_CONFIG', `step "${call.step}" holds a conversation with a model, but the run uses the offline rules provider, which has none`, {
      hint: 'Point pipe at an OpenAI-compatible endpoint: set OPENAI_API_KEY, and OPENAI_BASE_URL for a server other than OpenAI; the default --provider auto then uses it (or say --provider openai).',
    })
  }
}
