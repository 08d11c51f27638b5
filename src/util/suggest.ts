/** Suggests the closest of `candidates` to `word`, for "did you mean" hints; undefined when none is close. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  if (best === undefined) return undefined
  // Allow about one typo per three characters, so short names need a near match.
  const allowed = Math.max(1, Math.floor(Math.max(word.length, best.length) / 3))
  return bestDistance <= allowed ? best : undefined
}

export function didYouMean(word: string, candidates: Iterable<string>): string {
  const match = closest(word, candidates)
  return match === undefined ? '' : ` — did you mean "${match}"?`
}

/** Damerau-Levenshtein distance (optimal string alignment): a swap of two letters counts once. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1
  const cols = b.length + 1
  const d: number[][] = Array.from({length: rows}, (_, i) => Array.from({length: cols}, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      const row = d[i]!
      const prev = d[i - 1]!
      let value = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) value = Math.min(value, d[i - 2]![j - 2]! + 1)
      row[j] = value
    }
  }
  return d[a.length]![b.length]!
}
