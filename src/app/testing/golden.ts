/**
 * Golden files: a run's snapshots as text that stays the same from one run of a test to the next.
 * What differs by nature is masked: the date in run, spec and feature ids (the numbers stay: each
 * test has a fresh store, so they are deterministic), times, durations (fields and text a program
 * printed, such as `Ran 5 tests in 0.007s`), hashes, error trace ids (random per occurrence), and the absolute
 * paths of the temporary store and workspace and of the checkout.
 */
import {createTwoFilesPatch} from 'diff'
import type {Snapshot} from '../../types/snapshot.js'
import {maskTimings} from '../../util/stable-text.js'
import {TRACE_ID} from '../../util/trace.js'

export interface MaskPaths {
  /** Replaced by the name in angle brackets, longest first. */
  [name: string]: string
}

const TIME = /\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})/g
const HASH = /\b(sha256:)?[0-9a-f]{64}\b/g
const DATED_ID = /\b([RS])-\d{8}-(\d{4,})\b/g
const FEATURE_ID = /\bF-\d{4}-(\d{3,})\b/g

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function maskText(text: string, paths: ReadonlyArray<[string, string]>): string {
  let out = text
  for (const [name, dir] of paths) {
    out = out.replace(new RegExp(escape(dir), 'g'), `<${name}>`)
  }
  return maskTimings(out)
    .replace(TIME, '<time>')
    .replace(HASH, '<hash>')
    .replace(TRACE_ID, '<trace>')
    .replace(DATED_ID, '$1-YYYYMMDD-$2')
    .replace(FEATURE_ID, 'F-YYYY-$1')
}

function mask(value: unknown, key: string | undefined, paths: ReadonlyArray<[string, string]>): unknown {
  if (key !== undefined && /(^|_)(duration_ms|elapsed_ms)$/.test(key) && typeof value === 'number') return '<ms>'
  if (typeof value === 'string') return maskText(value, paths)
  if (Array.isArray(value)) return value.map((item) => mask(item, undefined, paths))
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    // Keys are masked too: a spec version can be one (meta.binds).
    for (const [k, v] of Object.entries(value)) out[maskText(k, paths)] = mask(v, k, paths)
    return out
  }
  return value
}

/** The snapshots as golden text: JSON, one document, masked; the per-field hashes (all masked anyway) are left out. */
export function goldenText(snapshots: readonly Snapshot[], paths: MaskPaths): string {
  const ordered = Object.entries(paths)
    .filter(([, dir]) => dir.length > 1)
    .sort((a, b) => b[1].length - a[1].length)
  const trimmed = snapshots.map((s) => {
    const meta = {...(s.meta as Record<string, unknown>)}
    delete meta['field_hashes']
    return {...s, meta}
  })
  return `${JSON.stringify(mask(trimmed, undefined, ordered), null, 2)}\n`
}

/** A unified diff from the golden (expected) to what the run gave (actual), without the index header. */
export function goldenDiff(file: string, expected: string, actual: string): string {
  return createTwoFilesPatch(`${file} (golden)`, `${file} (this run)`, expected, actual, undefined, undefined, {context: 3})
    .split('\n')
    .filter((line) => !line.startsWith('====='))
    .join('\n')
}
