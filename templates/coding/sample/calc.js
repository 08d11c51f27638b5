// add() has a bug the pipeline's agent fixes; mul() is right.
export function add(a, b) {
  return a - b
}

export function mul(a, b) {
  return a * b
}
