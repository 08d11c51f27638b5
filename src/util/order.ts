/**
 * Orders strings by their UTF-16 code units, the same on every machine. `localeCompare` follows the
 * process's locale (ICU orders Han by pinyin under zh_CN, by code point under en), so anything it
 * sorts into a record or a report would change with the LANG of whoever ran pipe; it also loads
 * ICU's collation data, a few milliseconds and megabytes of every run.
 */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
