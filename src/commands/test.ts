import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {existsSync, statSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {PipeCommand} from '../cli/base-command.js'
import {withSignals} from '../cli/signals.js'
import {junitXml, renderSummary, renderTestLine, type TestReport} from '../cli/test-report.js'
import {discoverTestFiles} from '../app/testing/discover.js'
import {loadTests} from '../app/testing/load.js'
import {hermeticEnv, runTests} from '../app/testing/run.js'
import {PipeError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {kindCatalog} from '../steps/registry.js'
import {makeDirs, writeNamedFile} from '../util/fs.js'
import {visible} from '../util/terminal-text.js'

export default class Test extends PipeCommand {
  static override summary = 'Run pipeline tests (*.pipe-test.yaml): each test runs a pipeline offline in a temporary store and checks how it ended.'
  static override description = `A test file names a pipeline and, per test, its input, typed inputs, answers, review decision, policy and cassette of recorded model replies, and what must hold when the run stops: its status, its error code, outcomes of steps, values of outputs, \${{ }} assertions over inputs, steps, spec and run, and a golden file of its normalised snapshots.

Every test file is checked first (YAML, schema, the pipelines and the steps and expressions it names, each error at file:line:col); one bad file and nothing runs (exit code 2). Each test then runs in its own temporary store and workspace, removed afterwards unless --keep; OPENAI_API_KEY and OPENAI_BASE_URL are hidden from the runs, so no test reaches a model over the network (except with --record, which fills cassettes from the endpoint they name).

Exit code 0 when every test passed, 1 when any failed.`
  static override examples = [
    {description: 'Every test file below the working directory', command: '<%= config.bin %> <%= command.id %>'},
    {
      description: 'One file, only the tests whose name contains "review"',
      command: '<%= config.bin %> <%= command.id %> pipelines/default.pipe-test.yaml --filter review',
    },
    {description: 'Write missing golden files and rewrite changed ones', command: '<%= config.bin %> <%= command.id %> --update'},
    {
      description: 'Record what the cassettes lack from a local OpenAI-compatible server',
      command: 'OPENAI_BASE_URL=http://127.0.0.1:8080/v1 <%= config.bin %> <%= command.id %> examples/release-notes --record',
    },
    {
      description: 'For CI: JUnit XML, and the stores of the tests kept for inspection',
      command: '<%= config.bin %> <%= command.id %> --junit reports/pipe.xml --keep',
    },
  ]
  static override strict = false
  static override args = {
    path: Args.string({description: 'Test files, or directories to search for *.pipe-test.yaml (default: the working directory).'}),
  }
  static override flags = {
    jobs: Flags.integer({char: 'j', description: 'Tests to run at once (default: the number of CPUs, at most 4).', min: 1, helpValue: 'N'}),
    filter: Flags.string({char: 'g', description: 'Run only the tests whose name contains TEXT (case-insensitive).', helpValue: 'TEXT'}),
    update: Flags.boolean({char: 'u', description: 'Write missing golden files and rewrite those that differ, instead of failing.'}),
    keep: Flags.boolean({description: "Keep each test's temporary store and workspace, and print where they are."}),
    junit: Flags.string({description: 'Also write the results as JUnit XML to FILE.', helpValue: 'FILE'}),
    bail: Flags.boolean({description: 'Start no further test after the first failure.'}),
    record: Flags.boolean({
      description:
        "Fill the tests' cassettes: replay what each has, ask the live endpoint (OPENAI_API_KEY / OPENAI_BASE_URL) for what it lacks and add it; a missing cassette is created. Delete a cassette first to record it anew.",
    }),
    'record-note': Flags.string({
      description:
        "With --record: the note in a new cassette's header, saying what produced the replies (say so when it is a scripted server, not a real model).",
      helpValue: 'TEXT',
      dependsOn: ['record'],
    }),
  }

  async run(): Promise<TestReport> {
    const {argv, flags} = await this.parse(Test)
    const cwd = process.cwd()
    const display = (file: string): string => {
      const relative = path.relative(cwd, file)
      return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file
    }
    const files = await discoverTestFiles(argv as string[], cwd)
    const tests = await loadTests(files.map(display), flags.filter, {recording: flags.record})
    // A report path that cannot be written is found before the tests run, not after.
    const junit = flags.junit === undefined ? undefined : path.resolve(cwd, flags.junit)
    if (junit !== undefined) {
      try {
        makeDirs(path.dirname(junit))
      } catch (error) {
        const cause = error as NodeJS.ErrnoException
        throw new PipeError('E_INVALID_ARGS', `--junit ${flags.junit}: cannot create its directory ${path.dirname(junit)} (${cause.code ?? cause.message})`, {
          hint: 'Give --junit a file path in a directory that exists or can be created.',
        })
      }
      if (existsSync(junit) && !statSync(junit).isFile())
        throw new PipeError('E_INVALID_ARGS', `--junit ${flags.junit} is not a file`, {hint: 'Give --junit a file path (it is replaced).'})
    }
    const jobs = flags.jobs ?? Math.max(1, Math.min(4, os.availableParallelism()))
    const out = (text: string): void => {
      // With --json stdout holds only the document; the lines go to stderr.
      // Test names, failure messages and diffs quote files and what runs printed.
      if (this.jsonEnabled()) process.stderr.write(visible(text))
      else process.stdout.write(visible(text))
    }
    const started = performance.now()
    let failedOnce = false
    const results = await withSignals(
      (signal) =>
        runTests(tests, {
          jobs,
          update: flags.update,
          keep: flags.keep,
          catalog: kindCatalog,
          display,
          // Recording is the one mode that may reach a model: the endpoint in the environment answers what cassettes lack.
          env: flags.record ? process.env : hermeticEnv(),
          ...(flags.record ? {record: flags['record-note'] !== undefined ? {note: flags['record-note']} : {}} : {}),
          ...(flags.bail ? {shouldStart: () => !failedOnce} : {}),
          onResult: (result) => {
            if (result.status === 'failed') failedOnce = true
            out(renderTestLine(result))
          },
          signal,
        }),
      'stopping: running tests end as interrupted, no further test starts',
    )
    const ran = results
    const report: TestReport = {
      passed: ran.filter((r) => r.status === 'passed').length,
      failed: ran.filter((r) => r.status === 'failed').length,
      total: ran.length,
      duration_ms: Math.round(performance.now() - started),
      tests: ran,
    }
    const notRun = tests.length - ran.length
    out(renderSummary(report).replace(/\n$/, notRun > 0 ? `; ${notRun} not run (--bail)\n` : '\n'))
    if (junit !== undefined) writeNamedFile(junit, junitXml(report))
    if (report.failed > 0) process.exitCode = ExitCode.FAILED
    return report
  }
}
