/** Text helpers for the offline provider: line structure, sentences, tokens, in English and Chinese. */

// Counted with one match over the text each: a test per character (a spread of the text and a
// filter) cost ~0.8 ms more of an ingest of a 1.6 KB document, cold. Han letters only: the Han
// script also holds radicals (symbols) and 〇 (a number), which are no letters.
const LETTER = /\p{L}/gu
const HAN_LETTER = /(?=\p{L})\p{Script=Han}/gu

export function hanRatio(text: string): number {
  const letters = text.match(LETTER)?.length ?? 0
  if (letters === 0) return 0
  return (text.match(HAN_LETTER)?.length ?? 0) / letters
}

export function language(text: string): 'zh' | 'en' | 'mixed' {
  const ratio = hanRatio(text)
  if (ratio > 0.6) return 'zh'
  if (ratio < 0.1) return 'en'
  return 'mixed'
}

export interface LineInfo {
  /** 1-based line number in the source. */
  n: number
  text: string
  heading?: {level: number; text: string}
  /** The text of a list item, without its marker. */
  item?: string
  /** Indentation of a list item, to fold continuation lines into it. */
  indent: number
  blank: boolean
}

const BULLET = /^(\s*)(?:[-*+•·▪◦]|\[[ xX]\]|[-*+]\s+\[[ xX]\]|\d{1,3}[.)、．]|[(（]\d{1,3}[)）]|[a-zA-Z][.)]|[一二三四五六七八九十]{1,3}[、.．])\s*(.*)$/u
const CN_HEADING = /^([一二三四五六七八九十]{1,3})[、.．]\s*(.{1,30})$/u

export function analyseLines(text: string): LineInfo[] {
  const raw = text.split('\n')
  const out: LineInfo[] = []
  for (let i = 0; i < raw.length; i++) {
    const line = raw[i]!
    const trimmed = line.trim()
    const indent = line.length - line.trimStart().length
    const info: LineInfo = {n: i + 1, text: trimmed, indent, blank: trimmed === ''}
    const hash = /^(#{1,6})\s+(.+?)\s*#*\s*$/.exec(trimmed)
    const next = raw[i + 1]?.trim() ?? ''
    if (hash) {
      info.heading = {level: hash[1]!.length, text: hash[2]!}
    } else if (trimmed && /^(=+|-+)$/.test(next) && next.length >= 3 && !BULLET.test(line)) {
      info.heading = {level: next.startsWith('=') ? 1 : 2, text: trimmed}
      out.push(info)
      i++
      out.push({n: i + 1, text: '', indent: 0, blank: true})
      continue
    } else if (/^\*\*[^*]{1,60}\*\*[:：]?$/.test(trimmed) || /^__[^_]{1,60}__[:：]?$/.test(trimmed)) {
      info.heading = {level: 3, text: trimmed.replace(/^(\*\*|__)|(\*\*|__)[:：]?$/g, '')}
    } else if (/^[^\s].{0,40}[:：]$/u.test(trimmed) && !/[.。!！?？]/.test(trimmed.slice(0, -1)) && !BULLET.test(line)) {
      info.heading = {level: 3, text: trimmed.slice(0, -1)}
    } else if (CN_HEADING.test(trimmed) && !/[，,。；;]/.test(trimmed)) {
      info.heading = {level: 2, text: CN_HEADING.exec(trimmed)![2]!}
    } else {
      const bullet = BULLET.exec(line)
      if (bullet && bullet[2]!.trim() !== '') info.item = bullet[2]!.trim()
    }
    out.push(info)
  }
  return out
}

/** Splits prose into sentences; keeps decimals, versions and e.g. intact. */
export function sentences(text: string): string[] {
  const protectedText = text.replace(/\b(e\.g|i\.e|etc|vs|approx|incl)\./gi, (m) => m.replace('.', '\uE000'))
  return protectedText
    .split(/(?<=[。！？；])|(?<=[.!?;])\s+(?=\S)/u)
    .map((s) => s.replace(/\uE000/g, '.').trim())
    .filter((s) => s.length > 0)
}

const STOP = new Set(
  'the a an and or of to in on for with by from at as is are be been being it its this that these those will shall should must can could may might would have has had not no do does did so than then when given user users system able also into via per each all any such which who what where how our their your'.split(
    ' ',
  ),
)

/** Content tokens: lower-case words of 3+ letters (no stop words) and overlapping pairs of Han characters. */
export function tokens(text: string): string[] {
  const out: string[] = []
  for (const word of text.toLowerCase().match(/[a-z][a-z0-9-]{2,}/g) ?? []) {
    const stem = word.replace(/(ing|ed|es|s)$/, '')
    if (!STOP.has(word) && stem.length >= 3) out.push(stem)
  }
  for (const run of text.match(/\p{Script=Han}+/gu) ?? []) {
    if (run.length === 1) out.push(run)
    for (let i = 0; i + 1 < run.length; i++) out.push(run.slice(i, i + 2))
  }
  return out
}

export function overlap(a: string, b: string): number {
  const left = new Set(tokens(a))
  const right = new Set(tokens(b))
  let shared = 0
  for (const t of left) if (right.has(t)) shared++
  return shared
}

/** Shortens to at most `max` characters on a word boundary when it can. */
export function shorten(text: string, max: number): string {
  const clean = text.replace(/\s+/g, ' ').trim()
  if ([...clean].length <= max) return clean
  const cut = [...clean].slice(0, max - 1).join('')
  const space = cut.lastIndexOf(' ')
  return `${space > max / 2 ? cut.slice(0, space) : cut}…`
}

export function stripMarkdown(text: string): string {
  return text
    .replace(/\*\*(.+?)\*\*/g, '$1')
    .replace(/__(.+?)__/g, '$1')
    .replace(/`([^`]+)`/g, '$1')
    .replace(/\[([^\]]+)\]\([^)]+\)/g, '$1')
    .trim()
}
