/**
 * Extracts a spec from requirement text by its structure: headings name sections, list items are
 * entries, and loose sentences are classified by their wording (must/should/shall, Given/When/Then,
 * "As a ... I want ...", and their Chinese equivalents).
 */
import {emptyBody, pad} from '../spec-build.js'
import type {Citation, SpecBody} from '../types.js'
import {classifySection, isNegative, isRequirementSentence, nfrCategory, parseGwt, parseStory, priorityOf, stripPriority, type SectionKind} from './classify.js'
import {normalizeForCompare} from '../spec-build.js'
import {analyseLines, sentences, shorten, stripMarkdown} from './text.js'

export interface Extracted {
  title: string
  body: SpecBody
  citations: Citation[]
}

interface Entry {
  text: string
  section: SectionKind
  /** Whether it was a list item (true) or a sentence of prose (false). */
  item: boolean
  line: number
}

/** Collects list items (with their continuation lines) and prose sentences, each tagged with its section. */
function entries(text: string): {entries: Entry[]; title: string; goalParagraphs: string[]} {
  const lines = analyseLines(text)
  const out: Entry[] = []
  const goalParagraphs: string[] = []
  let section: SectionKind = 'other'
  let title = ''
  let paragraph: {text: string; line: number} | null = null
  let current: Entry | null = null
  let currentIndent = 0

  const flushParagraph = (): void => {
    if (!paragraph) return
    const clean = stripMarkdown(paragraph.text)
    if (section === 'goal' || (section === 'other' && goalParagraphs.length === 0)) goalParagraphs.push(clean)
    for (const sentence of sentences(clean)) out.push({text: sentence, section, item: false, line: paragraph.line})
    paragraph = null
  }
  const flushItem = (): void => {
    if (current) out.push({...current, text: stripMarkdown(current.text)})
    current = null
  }

  for (const line of lines) {
    if (line.heading) {
      flushParagraph()
      flushItem()
      if (line.heading.level === 1 && !title) {
        title = stripMarkdown(line.heading.text)
        const kind = classifySection(line.heading.text)
        section = kind === 'goal' ? 'goal' : 'other'
      } else {
        section = classifySection(line.heading.text)
      }
      continue
    }
    if (line.blank) {
      flushParagraph()
      continue
    }
    if (line.item !== undefined) {
      flushParagraph()
      flushItem()
      current = {text: line.item, section, item: true, line: line.n}
      currentIndent = line.indent
      continue
    }
    if (current && line.indent > currentIndent) {
      current.text += ` ${line.text}`
      continue
    }
    flushItem()
    if (paragraph) paragraph.text += /\p{Script=Han}$/u.test(paragraph.text) ? line.text : ` ${line.text}`
    else paragraph = {text: line.text, line: line.n}
  }
  flushParagraph()
  flushItem()
  return {entries: out, title, goalParagraphs}
}

class Builder {
  readonly body = emptyBody()
  readonly citations: Citation[] = []
  private readonly seen = new Set<string>()

  private fresh(kind: string, text: string): boolean {
    const key = `${kind}:${normalizeForCompare(text)}`
    if (this.seen.has(key) || normalizeForCompare(text) === '') return false
    this.seen.add(key)
    return true
  }

  private cite(path: string, excerpt: string): void {
    this.citations.push({spec_path: path, excerpt: shorten(excerpt, 500)})
  }

  feature(text: string, source: string, fallbackPriority: 'P0' | 'P1' | 'P2' = 'P1'): void {
    const clean = stripPriority(text)
    const story = parseStory(clean)
    if (!this.fresh('feature', clean)) return
    const index = this.body.features.length
    const feature: SpecBody['features'][number] = {
      id: `FR-${pad(index + 1)}`,
      title: shorten(story ? story.want : clean, 120),
      priority: priorityOf(text, fallbackPriority),
      source,
    }
    if ([...clean].length > 120 || story) feature.description = clean
    if (story) feature.story = story
    this.body.features.push(feature)
    this.cite(`features[${index}]`, text)
  }

  constraint(text: string, source: string): void {
    const clean = stripPriority(text)
    if (!this.fresh('constraint', clean)) return
    const index = this.body.constraints.length
    this.body.constraints.push({id: `C-${pad(index + 1)}`, text: clean, source})
    this.cite(`constraints[${index}]`, text)
  }

  nfr(text: string, source: string): void {
    const clean = stripPriority(text)
    if (!this.fresh('nfr', clean)) return
    const index = this.body.non_functional.length
    this.body.non_functional.push({id: `NFR-${pad(index + 1)}`, category: nfrCategory(clean) ?? 'other', text: clean, source})
    this.cite(`non_functional[${index}]`, text)
  }

  criterion(text: string, source: string): void {
    const clean = stripPriority(text)
    if (!this.fresh('ac', clean)) return
    const index = this.body.acceptance_criteria.length
    const ac: SpecBody['acceptance_criteria'][number] = {id: `AC-${pad(index + 1)}`, text: clean, source}
    const gwt = parseGwt(clean)
    if (gwt) Object.assign(ac, gwt)
    this.body.acceptance_criteria.push(ac)
    this.cite(`acceptance_criteria[${index}]`, text)
  }

  question(text: string): void {
    if (!this.fresh('question', text)) return
    const index = this.body.open_questions.length
    this.body.open_questions.push({id: `Q-${pad(index + 1)}`, question: text, status: 'open'})
    this.cite(`open_questions[${index}]`, text)
  }

  goal(text: string): void {
    this.body.goal = text
    this.cite('goal', text)
  }
}

/** Routes one entry to the spec field its section and wording say it belongs to. */
function place(builder: Builder, entry: Entry): void {
  const {text, section} = entry
  if (parseGwt(text)) return builder.criterion(text, 'input')
  switch (section) {
    case 'acceptance':
      return builder.criterion(text, 'input')
    case 'constraints':
      return builder.constraint(text, 'input')
    case 'out_of_scope':
      return builder.constraint(/^(out of scope|不做|不包括)/i.test(text) ? text : `Out of scope: ${text}`, 'input')
    case 'non_functional':
      return builder.nfr(text, 'input')
    case 'questions':
      return builder.question(text)
    case 'features':
    case 'stories':
      if (!entry.item && !isRequirementSentence(text) && !parseStory(stripPriority(text))) return
      if (isNegative(text) && !parseStory(stripPriority(text))) return builder.constraint(text, 'input')
      return builder.feature(text, 'input')
    case 'goal':
    case 'other': {
      if (parseStory(stripPriority(text))) return builder.feature(text, 'input')
      if (!isRequirementSentence(text) && !entry.item) return
      if (isNegative(text)) return builder.constraint(text, 'input')
      if (nfrCategory(text) && !entry.item) return builder.nfr(text, 'input')
      if (section === 'goal' && !entry.item) return
      if (entry.item || isRequirementSentence(text)) return builder.feature(text, 'input')
    }
  }
}

export function extractSpec(text: string): Extracted {
  const builder = new Builder()
  const {entries: list, title, goalParagraphs} = entries(text)
  for (const entry of list) place(builder, entry)

  const firstProse = list.find((e) => !e.item && e.section !== 'questions')
  const goal = goalParagraphs.find((p) => p.trim() !== '') ?? firstProse?.text ?? title
  if (goal) builder.goal(shorten(goal, 1000))
  // A single requirement sentence is itself the one thing asked for.
  if (builder.body.features.length === 0 && goal) builder.feature(goal, 'input', 'P0')
  const specTitle = title || shorten(goal || 'Untitled requirement', 80)
  return {title: specTitle, body: builder.body, citations: builder.citations}
}
