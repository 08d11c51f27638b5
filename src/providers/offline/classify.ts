/** Deterministic classifiers for requirement sentences, English and Chinese. */
import type {CanonicalSpec} from '../../types/spec.js'

/**
 * The text with its ASCII letters in lower case and every other character as it was: what a
 * non-Unicode `/i` folds, since it matches an ASCII letter only to its other case (a letter whose
 * upper case is ASCII but which is not, as ſ and K, stays apart). So a pattern written in lower
 * case without `/i` tests `foldAscii(text)` exactly as the pattern with `/i` tested `text`, and
 * V8 compiles it without the case closure of each of its characters: a default run counted ~8 M
 * instructions fewer, 1.6% (bench/README.md, "Where a default run's instructions go").
 */
export function foldAscii(text: string): string {
  return /[A-Z]/.test(text) ? text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase()) : text
}

export type Priority = 'P0' | 'P1' | 'P2'
export type NfrCategory = CanonicalSpec['non_functional'][number]['category']
export type SectionKind = 'goal' | 'features' | 'stories' | 'constraints' | 'non_functional' | 'acceptance' | 'questions' | 'out_of_scope' | 'other'

const SECTION_PATTERNS: Array<[SectionKind, RegExp]> = [
  ['out_of_scope', /out of scope|non-goals?|not in scope|won'?t do|不做|不包括|范围外|非目标/],
  ['non_functional', /non[- ]?functional|nfr|quality attributes?|performance|security|reliability|availability|性能|安全|非功能|质量属性|可靠性|可用性/],
  ['acceptance', /acceptance|criteria|definition of done|\bdod\b|success metrics?|test(ing)? scenarios?|验收|成功标准|完成标准|测试场景/],
  ['constraints', /constraints?|limitations?|restrictions?|assumptions?|约束|限制|前提|假设/],
  ['questions', /open questions?|questions?|unknowns?|tbd|待定|问题|疑问/],
  ['stories', /user stories|stories|用户故事/],
  ['features', /features?|requirements?|functional|functionality|capabilit(y|ies)|scope|must[- ]haves?|功能|需求|特性|范围/],
  ['goal', /goal|objective|purpose|overview|summary|background|problem|vision|why|目标|目的|概述|背景|简介|愿景|问题陈述/],
]

export function classifySection(heading: string): SectionKind {
  const folded = foldAscii(heading)
  for (const [kind, pattern] of SECTION_PATTERNS) if (pattern.test(folded)) return kind
  return 'other'
}

const EXPLICIT_PRIORITY = /(?:^|[\s[(（【])(P[012])(?:$|[\s\])）】:：,，-])/
const MUST = /\b(must|shall|required|requires|need to|needs to|has to|have to|mandatory|critical)\b|必须|务必|须|一定要|要求|强制/
const SHOULD = /\b(should|ought to|expected to|important)\b|应该|应当|需要|最好能|建议/
const MAY = /\b(may|might|could|optional|nice[- ]to[- ]have|would be nice|if time permits|later|future)\b|可以|可选|锦上添花|后续|将来|有空/
const WANT = /\b(want|wants|would like|will|can|support|supports|allow|allows|provide|provides|enable|enables)\b|支持|提供|允许|能够|可以让|希望|想要/
const NEGATIVE =
  /\b(must not|mustn'?t|shall not|should not|shouldn'?t|cannot|can'?t|may not|never|do not|don'?t|no more than|not allowed|prohibited|forbidden|without)\b|不得|禁止|不能|不允许|不可|严禁|不要|不应|不超过|不依赖/

const MUST_HAVE = /\bmust[- ]have\b/
const SHOULD_HAVE = /\bshould[- ]have\b/
const COULD_HAVE = /\b(could[- ]have|nice[- ]to[- ]have)\b/

export function explicitPriority(text: string): Priority | undefined {
  const match = EXPLICIT_PRIORITY.exec(text)
  if (match) return match[1] as Priority
  const folded = foldAscii(text)
  if (MUST_HAVE.test(folded)) return 'P0'
  if (SHOULD_HAVE.test(folded)) return 'P1'
  if (COULD_HAVE.test(folded)) return 'P2'
  return undefined
}

export function stripPriority(text: string): string {
  return text
    .replace(/[[(（【]\s*P[012]\s*[\])）】]\s*[:：-]?\s*/g, '')
    .replace(/^\s*P[012]\s*[:：-]\s*/, '')
    .replace(/\s+P[012]$/, '')
    .replace(/^\s*(must|should|could|nice)[- ]to[- ]have\s*[:：-]\s*/i, '')
    .replace(/^\s*(must|should|could)[- ]have\s*[:：-]\s*/i, '')
    .trim()
}

export function priorityOf(text: string, fallback: Priority = 'P1'): Priority {
  const explicit = explicitPriority(text)
  if (explicit) return explicit
  const folded = foldAscii(text)
  if (MAY.test(folded) && !MUST.test(folded)) return 'P2'
  if (MUST.test(folded)) return 'P0'
  if (SHOULD.test(folded)) return 'P1'
  return fallback
}

export function isRequirementSentence(text: string): boolean {
  const folded = foldAscii(text)
  return MUST.test(folded) || SHOULD.test(folded) || MAY.test(folded) || WANT.test(folded) || explicitPriority(text) !== undefined
}

export function isNegative(text: string): boolean {
  return NEGATIVE.test(foldAscii(text))
}

const NFR_PATTERNS: Array<[NfrCategory, RegExp]> = [
  [
    'performance',
    /\b(latency|throughput|fast|faster|slow|response time|performance|p9[59]|percentile|\d+\s*(ms|milliseconds?|seconds?|s)\b|per second|rps|qps|load time)|性能|延迟|响应时间|吞吐|毫秒|秒内|速度/,
  ],
  [
    'security',
    /\b(secure|security|e-?mail address\w*|personal data|encrypt\w*|auth\w*|permission|access control|secret|password|token|tls|https|injection|xss|csrf|pii|privacy)|安全|加密|权限|认证|鉴权|隐私|密码|令牌/,
  ],
  [
    'reliability',
    /\b(availability|uptime|reliab\w*|fault[- ]tolerant|recover\w*|backup|retry|retries|durab\w*|99\.\d+%|sla|failover|crash)|可用性|可靠|容错|恢复|备份|重试|持久|宕机/,
  ],
  ['scalability', /\b(scal\w*|concurrent|concurrency|\d[\d,]*\s*(users|requests|records|rows))|扩展|并发|横向|伸缩/],
  [
    'usability',
    /\b(usab\w*|accessib\w*|a11y|wcag|intuitive|user[- ]friendly|ux|keyboard|screen reader|locali[sz]\w*|i18n)|易用|可访问|无障碍|用户体验|国际化|本地化/,
  ],
  [
    'maintainability',
    /\b(maintainab\w*|test coverage|coverage|lint\w*|documented|documentation|modular|readab\w*|logging|observab\w*|monitor\w*)|可维护|测试覆盖|文档|模块化|日志|监控|可观测/,
  ],
  ['compatibility', /\b(compatib\w*|browser|chrome|firefox|safari|windows|macos|linux|ios|android|node(\.js)? \d+|python \d|backward)|兼容|浏览器|平台|版本/],
  ['compliance', /\b(gdpr|hipaa|sox|pci|compliance|regulat\w*|audit\w*|legal|licen[cs]e)|合规|审计|法规|监管|许可/],
]

/** The category of a non-functional requirement, or undefined when the sentence is not one. */
export function nfrCategory(text: string): NfrCategory | undefined {
  const folded = foldAscii(text)
  for (const [category, pattern] of NFR_PATTERNS) if (pattern.test(folded)) return category
  return undefined
}

export interface Gwt {
  given: string
  when: string
  then: string
}

const GWT_EN = /^\s*(?:scenario[^:]*:\s*)?given\s+(.+?)[,;]?\s+when\s+(.+?)[,;]?\s+then\s+(.+?)\s*[.。]?\s*$/is
const GWT_ZH = /^\s*(?:假如|假设|给定|已知|在)\s*(.+?)[，,；;\s]*(?:当|如果)\s*(.+?)[，,；;\s]*(?:那么|则|就|应该|系统应)\s*(.+?)\s*[。.]?\s*$/su

export function parseGwt(text: string): Gwt | undefined {
  const match = GWT_EN.exec(text) ?? GWT_ZH.exec(text)
  if (!match) return undefined
  return {given: match[1]!.trim(), when: match[2]!.trim(), then: match[3]!.trim()}
}

export interface Story {
  role: string
  want: string
  so_that?: string
}

const STORY_EN = /^\s*as an?\s+(.+?),\s*i\s+(?:want|need|would like|wish)\s+(?:to\s+)?(.+?)(?:,?\s+so\s+(?:that\s+)?(.+?))?\s*[.。]?\s*$/is
const STORY_ZH = /^\s*作为(?:一个|一名|一位)?\s*(.+?)[，,]\s*我(?:希望|想要|想|需要|要)\s*(.+?)(?:[，,]\s*(?:以便|从而|这样|以)\s*(.+?))?\s*[。.]?\s*$/su

export function parseStory(text: string): Story | undefined {
  const match = STORY_EN.exec(text) ?? STORY_ZH.exec(text)
  if (!match) return undefined
  const story: Story = {role: match[1]!.trim(), want: match[2]!.trim()}
  if (match[3]) story.so_that = match[3].trim()
  return story
}

const NON_ANSWER = /^\s*(tbd|tbc|todo|\?+|unknown|not sure|don'?t know|later|pending|待定|不知道|不确定|稍后|以后再说|未定)\s*[.。!！]?\s*$/
const NONE_ANSWER = /^\s*(none|no|n\/a|na|nothing|no constraints?|not applicable|无|没有|不适用|暂无)\s*[.。!！]?\s*$/

/** Answers that defer rather than answer: they leave the field open. */
export function isNonAnswer(text: string): boolean {
  return NON_ANSWER.test(foldAscii(text))
}

/** Answers that say there is nothing to add. */
export function isNoneAnswer(text: string): boolean {
  return NONE_ANSWER.test(foldAscii(text))
}

const TASK_TYPES: Array<['docs' | 'add_test' | 'refactor' | 'wiring' | 'modify_file', RegExp]> = [
  ['docs', /\b(document\w*|docs?|readme|guide|manual|help text)\b|文档|说明|手册/],
  ['add_test', /\b(tests?|testing|coverage)\b|测试|覆盖率/],
  ['refactor', /\b(refactor\w*|restructur\w*|clean ?up|simplif\w*)\b|重构|整理|简化/],
  ['wiring', /\b(integrat\w*|wire|wiring|connect\w*|hook up|webhook|api client|plug ?in)\b|集成|对接|接入|打通/],
  ['modify_file', /\b(update|change|modify|fix|improve|extend|rename|migrat\w*)\b|修改|更新|修复|改进|扩展|迁移/],
]

export function taskType(text: string): 'create_file' | 'modify_file' | 'refactor' | 'add_test' | 'wiring' | 'docs' {
  const folded = foldAscii(text)
  for (const [type, pattern] of TASK_TYPES) if (pattern.test(folded)) return type
  return 'create_file'
}

/** Every pattern above that tests folded text (foldAscii): a unit test holds each to what it matched with `/i`. */
export const FOLDED_PATTERNS: readonly RegExp[] = [
  ...SECTION_PATTERNS.map(([, pattern]) => pattern),
  MUST,
  SHOULD,
  MAY,
  WANT,
  NEGATIVE,
  MUST_HAVE,
  SHOULD_HAVE,
  COULD_HAVE,
  ...NFR_PATTERNS.map(([, pattern]) => pattern),
  NON_ANSWER,
  NONE_ANSWER,
  ...TASK_TYPES.map(([, pattern]) => pattern),
]
