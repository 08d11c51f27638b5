/**
 * HTML built so that what a model, a requirement or a command wrote can never become markup: every
 * value put into the `html` template is escaped unless it is itself Html made by this module. The
 * pages show nothing else, so a `<script>` in a requirement is text on the page, never a script.
 */

const brand: unique symbol = Symbol('html')

/** Markup this module made (escaped values and pipe's own literal template text). */
export interface Html {
  readonly [brand]: true
  readonly text: string
}

function made(text: string): Html {
  return {[brand]: true, text}
}

export function isHtml(value: unknown): value is Html {
  return typeof value === 'object' && value !== null && (value as Partial<Html>)[brand] === true
}

/**
 * Characters that reorder or hide text (bidi embeddings, overrides, isolates and marks, the
 * Arabic letter mark included; zero-width and other invisible characters): shown as their code point, so a reviewer sees `⟨U+202E⟩` where a hostile string would
 * have made `exe.txt` read as `txt.exe`.
 */
export const INVISIBLE = /[\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF\uFFF9-\uFFFB]/g

/** Text as it is safe inside an element or a quoted attribute. */
export function escapeText(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
    .replace(INVISIBLE, showInvisible)
}

/** One invisible character as the code point a reader sees. */
export function showInvisible(c: string): string {
  return `⟨U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[]

function piece(value: Value): string {
  if (typeof value === 'string') return escapeText(value)
  if (typeof value === 'number' || value === true) return escapeText(String(value))
  if (value === null || value === undefined || value === false) return ''
  if (isHtml(value)) return value.text
  return value.map(piece).join('')
}

/** The template's literal text as markup, every interpolated value escaped (or joined, for lists). */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0] ?? ''
  values.forEach((value, i) => {
    out += piece(value) + (strings[i + 1] ?? '')
  })
  return made(out)
}

/** Markup pipe itself generated (an SVG it drew from escaped parts, a stylesheet it ships). */
export function trusted(text: string): Html {
  return made(text)
}

/**
 * A link target a page may use: only pipe's own paths (`/runs/R-…`) and fragments. A `javascript:`
 * or `data:` URL from a record never becomes a link.
 */
export function safeHref(target: string): string {
  return /^(\/(?!\/)|#|\?)/.test(target) ? target : '#'
}

/** Any JSON value as readable, escaped text (for a <pre>). */
export function jsonBlock(value: unknown): Html {
  return html`<pre class="json">${JSON.stringify(value, null, 2) ?? 'null'}</pre>`
}
