/** Loads every test file before any test runs: one bad file stops pipe test with all the errors of all files, each at file:line:col. */
import {formatDiagnostic, type Diagnostic} from '../../config/diagnostics.js'
import {loadTestFile, type LoadTestOptions, type TestCase} from '../../config/test-file.js'
import {PipeError} from '../../errors.js'
import {kindCatalog} from '../../steps/registry.js'

export async function loadTests(files: readonly string[], filter?: string, options: LoadTestOptions = {}): Promise<TestCase[]> {
  const diagnostics: Diagnostic[] = []
  const tests: TestCase[] = []
  for (const file of files) {
    const result = await loadTestFile(file, kindCatalog, options)
    if (result.ok) tests.push(...result.tests)
    else diagnostics.push(...result.diagnostics)
  }
  if (diagnostics.length > 0) {
    throw new PipeError('E_CONFIG', `invalid test file(s), nothing was run:\n${diagnostics.map(formatDiagnostic).join('\n')}`, {
      hint: 'Fix the errors above; each names its file, line and column (the test file format: schemas/pipe-test.schema.json).',
      details: {diagnostics},
    })
  }
  if (filter === undefined) return tests
  const needle = filter.toLowerCase()
  const chosen = tests.filter((t) => t.name.toLowerCase().includes(needle))
  if (chosen.length === 0) {
    throw new PipeError('E_NOT_FOUND', `no test name contains "${filter}" (of ${tests.length} test(s))`, {
      hint: `The tests: ${tests
        .map((t) => t.name)
        .slice(0, 10)
        .join('; ')}${tests.length > 10 ? '; …' : ''}`,
    })
  }
  return chosen
}
