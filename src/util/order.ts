/**
 * Orders strings by their UTF-16 code units, the same on every machine. `localeCompare` follows the
 * process's locale (ICU orders Han by pinyin under zh_CN, by code point under en), so anything it
 * sorts into a record or a report would change with the LANG of whoever ran pipe; it also loads
 * ICU's collation data, a few milliseconds and megabytes of every run.
 */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/**
 * The order `localeCompare` gave names made of ASCII letters, digits, `_` and `.` (ICU's root
 * collation, the same under every locale for them): `_` before `.` before digits before letters,
 * letters compared without case first and lowercase first at the first case difference. Records
 * made by earlier versions keep lists in this order (a gate result's missing completeness weights),
 * so the same order reproduces them exactly, without ICU. Other characters sort after these, by
 * code unit.
 */
export function compareNames(a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const d = primary(a.charCodeAt(i)) - primary(b.charCodeAt(i))
    if (d !== 0) return d
  }
  if (a.length !== b.length) return a.length - b.length
  for (let i = 0; i < n; i++) {
    const d = upper(a.charCodeAt(i)) - upper(b.charCodeAt(i))
    if (d !== 0) return d
  }
  return 0
}

function primary(c: number): number {
  if (c === 0x5f) return 1 // _
  if (c === 0x2e) return 2 // .
  if (c >= 0x30 && c <= 0x39) return 10 + c - 0x30
  if (c >= 0x61 && c <= 0x7a) return 100 + c - 0x61
  if (c >= 0x41 && c <= 0x5a) return 100 + c - 0x41
  return 1000 + c
}

function upper(c: number): number {
  return c >= 0x41 && c <= 0x5a ? 1 : 0
}
