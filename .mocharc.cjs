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
// end: the first ones by their time in the CI runs of 2026-11-29 (the reporter's slowest files: the
// four that took 150-190 s, then the parts of the files split since, each after the first), the
// rest by CPU time (user + sys of the file run alone, its processes included), as measured
// file by file in bench/README.md ("Issue 36: the suite, file by file (2026-11-28)"). A PostgreSQL
// server's CPU is not the test's, so the PostgreSQL files whose time is mostly waiting on workers and
// the server (postgres-worker, -faults, -team) stand higher than their CPU alone would put them. Keep
// it in step when a file grows or shrinks (the reporter prints the slowest files after each run;
// PIPE_TEST_SPAWNS adds their processes and clusters).
const longestFirst = [
  'test/e2e/postgres-foreach.test.ts',
  'test/e2e/postgres-faults.test.ts',
  'test/e2e/malformed-records.test.ts',
  'test/faults/crash-matrix.test.ts',
  'test/e2e/durable.test.ts',
  'test/e2e/durable-crashes.test.ts',
  'test/e2e/audit-trail.test.ts',
  'test/e2e/people-in-the-loop.test.ts',
  'test/e2e/coding.test.ts',
  'test/e2e/coding-blocked.test.ts',
  'test/e2e/cassette.test.ts',
  'test/e2e/reply-cache.test.ts',
  'test/e2e/cassette-replay.test.ts',
  'test/e2e/cassette-files.test.ts',
  'test/e2e/budgets.test.ts',
  'test/e2e/budgets-foreach.test.ts',
  'test/e2e/agent.test.ts',
  'test/e2e/agent-confirm.test.ts',
  'test/e2e/view-attack.test.ts',
  'test/e2e/attest.test.ts',
  'test/e2e/view-decide.test.ts',
  'test/e2e/cancel-snapshot.test.ts',
  'test/e2e/coding-records.test.ts',
  'test/e2e/postgres-worker.test.ts',
  'test/e2e/postgres-team.test.ts',
  'test/e2e/hostile-yaml.test.ts',
  'test/e2e/publish.test.ts',
  'test/e2e/publish-safety.test.ts',
  'test/cli/test-command.test.ts',
  'test/cli/test-command-runs.test.ts',
  'test/e2e/archive.test.ts',
  'test/e2e/signed-decisions.test.ts',
  'test/e2e/postgres-store.test.ts',
  'test/e2e/signals-busy.test.ts',
  'test/cli/output.test.ts',
  'test/e2e/run.test.ts',
  'test/e2e/foreach-deps.test.ts',
  'test/e2e/postgres-handback.test.ts',
  'test/e2e/write.test.ts',
  'test/e2e/redrive.test.ts',
  'test/e2e/audit.test.ts',
  'test/e2e/audit-keyed.test.ts',
  'test/e2e/postgres-writers.test.ts',
  'test/e2e/policy-defaults.test.ts',
]

function testFiles(dir) {
  return fs.readdirSync(dir, {withFileTypes: true}).flatMap((entry) => {
    const file = path.posix.join(dir, entry.name)
    if (entry.isDirectory()) return testFiles(file)
    return entry.name.endsWith('.test.ts') ? [file] : []
  })
}

/**
 * Tests that run a system tool are skipped without it (helpers/tools.ts; failed under CI): said here
 * once, at the start, rather than by each file. Keep the checks in step with helpers/tools.ts.
 */
function sayMissingTools() {
  if (process.env.PIPE_TEST_TOOLS_SAID) return
  // mocha re-executes itself to pass node options: the second load of this file must not say it again.
  process.env.PIPE_TEST_TOOLS_SAID = '1'
  const onPath = (name) => (process.env.PATH ?? '').split(path.delimiter).some((d) => d && fs.existsSync(path.join(d, name)))
  const postgres = () =>
    fs.existsSync('/usr/lib/postgresql') &&
    fs.readdirSync('/usr/lib/postgresql').some((v) => fs.existsSync(path.join('/usr/lib/postgresql', v, 'bin', 'initdb')))
  const ci = !['', '0', 'false'].includes((process.env.CI ?? '').toLowerCase())
  const tools = [
    [
      process.env.PIPE_BWRAP !== undefined ? process.env.PIPE_BWRAP !== '' && fs.existsSync(process.env.PIPE_BWRAP) : onPath('bwrap'),
      'bubblewrap',
      'the sandbox and containment tests',
      'sudo apt-get install bubblewrap',
      true,
    ],
    [
      [
        '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
        '/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1',
        '/usr/local/lib/faketime/libfaketimeMT.so.1',
      ].some((f) => fs.existsSync(f)),
      'faketime',
      'the reproducibility tests',
      'sudo apt-get install faketime',
      true,
    ],
    [postgres(), 'postgresql', 'the PostgreSQL store tests', 'sudo apt-get install postgresql', true],
    [onPath('zsh') && onPath('script'), 'zsh', 'the zsh completion test', 'sudo apt-get install zsh', true],
    [
      ['/usr/bin/chromium-headless-shell', '/usr/lib/chromium/chrome-headless-shell'].some((f) => fs.existsSync(f)),
      'chromium-headless-shell',
      'the browser tests of the web view',
      'sudo apt-get install chromium-headless-shell',
      false,
    ],
    [onPath('yaml-language-server'), 'yaml-language-server', 'the editor completion tests', 'npm install -g yaml-language-server@1', false],
  ]
  for (const [present, tool, tests, install, failsInCi] of tools) {
    if (present) continue
    const what = ci && failsInCi ? 'fail (CI is set)' : 'are skipped'
    process.stderr.write(`${tool} is not installed: ${tests} ${what}. Install it: ${install}\n`)
  }
}

if (!process.argv.includes('--list-files')) sayMissingTools()

// Node parses every certificate of NODE_EXTRA_CA_CERTS as it starts, TLS or not: ~100 ms of CPU for
// each process with a system bundle, and the suite starts thousands (mocha's own, its workers, every
// `pipe` a test spawns, test/helpers/cli.ts or not). No test speaks TLS to anything but a server it
// started itself; one that needs the variable sets it for its child.
delete process.env.NODE_EXTRA_CA_CERTS

const all = testFiles('test').sort()
const spec = [...longestFirst.filter((f) => all.includes(f)), ...all.filter((f) => !longestFirst.includes(f))]
const named = process.argv.slice(2).some((arg) => /\.test\.[cm]?[jt]s$/.test(arg) && !arg.startsWith('-'))

module.exports = {
  'node-option': ['import=tsx'],
  // PIPE_TEST_SPAWNS=FILE: count the processes each test file starts (test/helpers/count-spawns.cjs).
  // (Only when set: an empty list makes mocha try to load a module named "".)
  ...(process.env.PIPE_TEST_SPAWNS ? {require: ['./test/helpers/count-spawns.cjs']} : {}),
  spec: named ? [] : spec,
  parallel: jobs > 1,
  jobs,
  timeout: 60000,
  slow: 2000,
  reporter: './test/helpers/stats-reporter.cjs',
}
