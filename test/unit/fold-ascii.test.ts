/**
 * The offline provider's classifiers test ASCII-folded text with lower-case patterns instead of `/i`
 * (src/providers/offline/classify.ts, foldAscii): each must match exactly what it matched with `/i`,
 * on any text, the letters `/i` treats apart (ſ, K, İ, ı) included.
 */
import {expect} from 'chai'
import {readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {FOLDED_PATTERNS, foldAscii} from '../../src/providers/offline/classify.js'
import {examples} from '../helpers/cli.js'

/** A fixed sequence of numbers in [0, 1): the same strings on every run (mulberry32). */
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The pattern's text without its escapes (\b, \w, \s, \d, \u4e0d...), whose letters' case is their meaning. */
const withoutEscapes = (source: string): string => source.replace(/\\u[0-9a-fA-F]{4}|\\./g, '')

describe('classifiers on ASCII-folded text', () => {
  it('each pattern is written in lower case, without /i or /u', () => {
    expect(FOLDED_PATTERNS.length).to.be.greaterThan(20)
    for (const pattern of FOLDED_PATTERNS) {
      expect(pattern.flags, String(pattern)).to.not.match(/[iu]/)
      expect(withoutEscapes(pattern.source), String(pattern)).to.not.match(/[A-Z]/)
    }
  })

  it('folds ASCII letters only, keeping every other character and the length', () => {
    expect(foldAscii('MUST Not, R\u00e9sum\u00e9 \u0130\u0131 \u017f \u212a \u00c9T\u00c9 \u5fc5\u987b A-Z')).to.equal(
      'must not, r\u00e9sum\u00e9 \u0130\u0131 \u017f \u212a \u00c9t\u00c9 \u5fc5\u987b a-z',
    )
    expect(foldAscii('already lower')).to.equal('already lower')
  })

  it('matches what each pattern matched with /i, on the example PRDs with their letters cased at random and on random text', () => {
    const next = random(38)
    const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!
    // Letters cased at random, and now and then one that /i keeps apart from ASCII in its place (ſ for s, K for k, ı or İ for i).
    const apart: Record<string, string[]> = {s: ['\u017f'], k: ['\u212a'], i: ['\u0131', '\u0130']}
    const recase = (text: string): string =>
      [...text].map((c) => (apart[c.toLowerCase()] && next() < 0.1 ? pick(apart[c.toLowerCase()]!) : next() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join('')
    // The words and the characters of the patterns themselves, and what /i treats apart from ASCII.
    const words = [...new Set(FOLDED_PATTERNS.flatMap((p) => withoutEscapes(p.source).split(/[^a-z0-9\u4e00-\u9fff'-]+/)))].filter(Boolean)
    const odd = [
      '\u212a',
      '\u017f',
      '\u0130',
      '\u0131',
      'ß',
      'É',
      'é',
      'Ω',
      'µ',
      'ﬀ',
      '。',
      '：',
      '，',
      '-',
      '.',
      ',',
      ' ',
      '  ',
      '\n',
      '\t',
      '5',
      '99.9%',
      '[P0]',
    ]
    const texts: string[] = []
    for (const file of readdirSync(examples).filter((f) => f.endsWith('.md'))) {
      for (const line of readFileSync(path.join(examples, file), 'utf8').split('\n')) texts.push(line, recase(line))
    }
    for (let i = 0; i < 4000; i++) {
      const parts = Array.from({length: 1 + Math.floor(next() * 8)}, () => (next() < 0.7 ? recase(pick(words)) : pick(odd)))
      texts.push(parts.join(next() < 0.5 ? ' ' : ''))
    }
    let matched = 0
    for (const pattern of FOLDED_PATTERNS) {
      const caseless = new RegExp(pattern.source, `${pattern.flags}i`)
      for (const text of texts) {
        const expected = caseless.test(text)
        if (expected) matched++
        expect(pattern.test(foldAscii(text)), `${String(pattern)} on ${JSON.stringify(text)}`).to.equal(expected)
      }
    }
    // The texts reach the patterns: a comparison of misses alone would prove nothing.
    expect(matched).to.be.greaterThan(1000)
  })
})
