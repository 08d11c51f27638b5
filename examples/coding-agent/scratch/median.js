/** The middle value of a list of numbers: for an even count, the mean of the two middle values. */
export function median(values) {
  if (values.length === 0) throw new RangeError('median of an empty list')
  const sorted = [...values].sort()
  const middle = Math.floor(sorted.length / 2)
  return sorted[middle]
}
