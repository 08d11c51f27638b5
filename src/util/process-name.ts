/**
 * The name this process gives itself as a driver of runs (pipe worker --name): the lease it holds on
 * a shared store and the step it records as running both carry it, so pipe runs show names one worker.
 */
let name: string | undefined

export function nameThisProcess(given: string | undefined): void {
  name = given
}

export function processName(): string | undefined {
  return name
}
