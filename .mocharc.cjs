// Mocha's settings for `npm test`: every test file, run in parallel worker processes.
//
// Each test file is independent (its own temp folders, ports from 0, a PIPE_HOME of its worker's
// own from test/helpers/cli.ts), so files run in parallel, one worker per core by default (mocha's own
// default is cores - 1, which is 1 on a 2-core CI machine). PIPE_TEST_JOBS=1 runs them in one
// process, in order, as before.
//
// Files named on the command line run alone (`npx mocha test/e2e/durable.test.ts`): mocha would
// otherwise add them to the whole suite listed here.
'use strict'
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length
const jobs = Number(process.env.PIPE_TEST_JOBS) || Math.max(2, cores)

// The files that take longest start first, so that no worker is left alone with a long file at the
// end (the reporter prints the slowest files after each run: keep this list in step with it).
const longestFirst = [
  'test/e2e/durable.test.ts',
  'test/e2e/malformed-records.test.ts',
  'test/e2e/cassette.test.ts',
  'test/e2e/agent.test.ts',
  'test/e2e/coding.test.ts',
  'test/e2e/publish.test.ts',
  'test/e2e/audit.test.ts',
  'test/e2e/run.test.ts',
  'test/e2e/view.test.ts',
  'test/cli/test-command.test.ts',
  'test/cli/output.test.ts',
]

function testFiles(dir) {
  return fs
    .readdirSync(dir, {withFileTypes: true})
    .flatMap((entry) => {
      const file = path.posix.join(dir, entry.name)
      if (entry.isDirectory()) return testFiles(file)
      return entry.name.endsWith('.test.ts') ? [file] : []
    })
}

const all = testFiles('test').sort()
const spec = [...longestFirst.filter((f) => all.includes(f)), ...all.filter((f) => !longestFirst.includes(f))]
const named = process.argv.slice(2).some((arg) => /\.test\.[cm]?[jt]s$/.test(arg) && !arg.startsWith('-'))

module.exports = {
  'node-option': ['import=tsx'],
  spec: named ? [] : spec,
  parallel: jobs > 1,
  jobs,
  timeout: 60000,
  slow: 2000,
  reporter: './test/helpers/stats-reporter.cjs',
}
