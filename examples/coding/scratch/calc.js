// A tiny module for the coding example: add() has a bug the pipeline fixes.
export function add(a, b) {
  return a - b
}

export function mul(a, b) {
  return a * b
}
