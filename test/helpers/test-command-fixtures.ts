/**
 * What the pipe test files (test/cli/test-command.test.ts and test-command-runs) share: the report
 * pipe test --json prints, a pipeline to test, and the files written into each test's own folder.
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

export interface Report {
  passed: number
  failed: number
  total: number
  duration_ms: number
  tests: Array<{
    file: string
    name: string
    status: 'passed' | 'failed'
    duration_ms: number
    failures: Array<{kind: string; message: string; expected?: unknown; actual?: unknown; diff?: string}>
    run?: {run_id: string; status: string; error?: {code: string; message: string; step?: string}}
    kept?: string
    golden?: string
  }>
}

/** The helpers of a test file over its own folder (`dirOf()` reads the file's `dir` as it is now). */
export function testFolder(dirOf: () => string) {
  async function file(name: string, text: string): Promise<string> {
    const full = path.join(dirOf(), name)
    await writeFile(full, text)
    return full
  }

  const home = (): Record<string, string> => ({PIPE_HOME: path.join(dirOf(), 'home')})

  return {file, home}
}

export const FLOW = `version: 1
name: flow
inputs:
  n: {type: integer, default: 1}
steps:
  - id: route
    kind: choice
    choices:
      - {when: "\${{ inputs.n > 5 }}", next: big}
    default: small
  - {id: big, kind: end, status: succeeded, reason: "big \${{ inputs.n }}"}
  - {id: small, kind: end, status: failed, reason: "small \${{ inputs.n }}"}
`
