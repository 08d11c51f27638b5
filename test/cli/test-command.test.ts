/**
 * pipe test, run as a user runs it (the built CLI as a process): test files found and checked,
 * every kind of expectation passing and failing with its reason, bad test files refused at
 * file:line:col before anything runs, goldens written, compared and updated, --filter, --json and
 * --junit (validated against a JUnit XSD with libxml2's xmllint, as WebAssembly: xmllint-wasm).
 * How the tests run (at once in separate stores, setup commands, workspaces, cassettes) is
 * test-command-runs.test.ts's.
 *
 * Each test's first `pipe test` is a process, as a user runs it; the commands after it (the golden
 * rewritten and compared again, validate and the good file after a refusal, the further cases of a
 * matrix) run in this process (test/helpers/pipe-here.ts: the same command, output and exit code).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {validateXML} from 'xmllint-wasm'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {FLOW, testFolder, type Report} from '../helpers/test-command-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-testcmd-'))
})
afterEach(async () => (process.env.KEEP_TMP ? undefined : cleanup()))

const {file, home} = testFolder(() => dir)

describe('pipe test (CLI)', function () {
  this.timeout(180000)

  // The whole shipped suite, from a copy of the checkout elsewhere, runs once, in 2031, in
  // e2e/reproducible.test.ts. From the repository root itself, discovery walks the whole checkout
  // (src/, test/, node_modules, ...) and one shipped test runs.
  it('finds a shipped test from the repository root and passes it, leaving nothing in the checkout', async () => {
    const atRoot = await pipe(['test', '--filter', 'one sentence without answers'], {cwd: repoRoot, env: home(), timeoutMs: 120000})
    expect(atRoot.code, atRoot.stdout + atRoot.stderr).to.equal(0)
    expect(atRoot.stdout).to.match(/^✓ pipelines\/default\.pipe-test\.yaml › one sentence without answers stops, waiting for them/m)
    expect(atRoot.stdout).to.match(/^Tests: 1 passed, 1 total \(\d+\.\ds\)$/m)
    expect(existsSync(path.join(repoRoot, 'published', 'store'))).to.equal(false)
  })

  it('reports each kind of expectation that fails, with expected and actual, and exits 1', async () => {
    await file('flow.yaml', FLOW)
    await file(
      'flow.pipe-test.yaml',
      `# yaml-language-server: $schema=${path.join(repoRoot, 'schemas', 'pipe-test.schema.json')}
version: 1
pipeline: flow.yaml
tests:
  - name: holds
    inputs: {n: 7}
    expect:
      status: succeeded
      outcomes: {route: big, small: ~}
      outputs: {route.chosen: big, big.reason: big 7}
      assert: ["\${{ steps.big.outputs.reason == 'big 7' && inputs.n == 7 }}"]
  - name: wrong status
    expect: {status: succeeded}
  - name: wrong code
    expect: {status: failed, code: E_BUILD_FAIL}
  - name: wrong outcome
    expect: {outcomes: {route: big, big: succeeded}}
  - name: wrong output
    inputs: {n: 9}
    expect: {outputs: {route.chosen: small, big.reason: big 8}}
  - name: false assertion
    expect: {assert: ["\${{ inputs.n > 100 }}"]}
  - name: refused, as expected
    inputs: {n: seven}
    expect: {code: E_INPUT}
  - name: refused, unexpectedly
    inputs: {n: seven}
    expect: {status: succeeded}
`,
    )
    const r = await pipe(['test', '--jobs', '2'], {cwd: dir, env: home()})
    expect(r.code, r.stdout + r.stderr).to.equal(1)
    expect(r.stdout).to.match(/^✓ flow\.pipe-test\.yaml › holds/m)
    expect(r.stdout).to.match(/^✗ flow\.pipe-test\.yaml › wrong status \(/m)
    expect(r.stdout).to.contain('status: expected succeeded, got failed (step small: [E_ENDED] small 1)')
    expect(r.stdout).to.contain('code: expected E_BUILD_FAIL, got E_ENDED')
    expect(r.stdout).to.contain('outcome of route: expected big, got small')
    expect(r.stdout).to.contain('outcome of big: expected succeeded, got not run')
    expect(r.stdout).to.contain('outputs route.chosen: expected "small", got "big"')
    expect(r.stdout).to.contain('outputs big.reason: expected "big 8", got "big 9"')
    expect(r.stdout).to.contain('assert ${{ inputs.n > 100 }}: gave false')
    // The failing step and where to look.
    expect(r.stdout).to.match(/run R-\d{8}-0001 failed after 2 step\(s\); step small \[E_ENDED\] small 1/)
    expect(r.stdout).to.contain('its store was removed; pipe test --keep keeps it')
    expect(r.stdout).to.match(/^✓ flow\.pipe-test\.yaml › refused, as expected/m)
    expect(r.stdout).to.match(
      /^✗ flow\.pipe-test\.yaml › refused, unexpectedly[^\n]*\n {4}- the run did not start: \[E_INPUT\] the inputs of pipeline flow have 1 problem/m,
    )
    expect(r.stdout).to.match(/^Tests: 2 passed, 6 failed, 8 total/m)
  })

  it('refuses bad test files at file:line:col and runs nothing: schema, unknown key, expression, missing pipeline, unknown step', async () => {
    const marker = path.join(dir, 'ran')
    await file(
      'touch.yaml',
      `version: 1\nname: touch\nsteps:\n  - {id: touch, kind: command, run: [node, -e, "require('fs').writeFileSync('${marker}', '')"]}\n`,
    )
    await file(
      'policy.yaml',
      `version: 1\nallowed_commands:\n  - [node, "..."]\nsandbox: off\nforbidden_paths: []\nmax_patch_lines: 10\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 60000}\n`,
    )
    await file('flow.yaml', FLOW)
    // A valid file beside the bad ones: it must not run either.
    await file('good.pipe-test.yaml', 'version: 1\npipeline: touch.yaml\npolicy: policy.yaml\ntests:\n  - name: touches\n    expect: {status: succeeded}\n')
    await file(
      'bad.pipe-test.yaml',
      [
        'version: 1',
        'pipeline: flow.yaml',
        'tests:',
        '  - name: typo',
        '    expekt: {status: succeeded}',
        '  - name: bad status',
        '    expect: {status: done}',
        '',
      ].join('\n'),
    )
    await file(
      'worse.pipe-test.yaml',
      [
        'version: 1',
        'tests:',
        '  - name: bad expression',
        '    pipeline: flow.yaml',
        '    expect:',
        '      assert: ["${{ inputs.m > 1 }}"]',
        '  - name: missing pipeline',
        '    pipeline: nowhere.yaml',
        '    expect: {status: succeeded}',
        '  - name: unknown step',
        '    pipeline: flow.yaml',
        '    expect: {outcomes: {rout: big, big: nope}}',
        '',
      ].join('\n'),
    )
    const r = await pipe(['test'], {cwd: dir, env: home()})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    expect(r.stderr).to.contain('Error [E_CONFIG]: invalid test file(s), nothing was run')
    expect(r.stderr).to.match(/^bad\.pipe-test\.yaml:5:5 {2}tests\[0\]\.expekt {2}unknown key "expekt" in tests\[0\] — did you mean "expect"\?$/m)
    expect(r.stderr).to.match(/^bad\.pipe-test\.yaml:4:5 {2}tests\[0\] {2}missing required key "expect"$/m)
    expect(r.stderr).to.match(/^bad\.pipe-test\.yaml:7:22 {2}tests\[1\]\.expect\.status {2}"done" is not allowed; expected one of: succeeded/m)
    // Column of `m` inside the expression: the scalar starts at col 16, "${{ " is 4 more, inputs. 7 more.
    expect(r.stderr).to.match(/^worse\.pipe-test\.yaml:6:28 {2}tests\[0\]\.expect\.assert\[0\] {2}unknown input "m" \(declared: n\) — did you mean "n"\?$/m)
    expect(r.stderr).to.match(/^worse\.pipe-test\.yaml:8:15 {2}tests\[1\]\.pipeline {2}pipeline nowhere\.yaml not found/m)
    expect(r.stderr).to.match(
      /^worse\.pipe-test\.yaml:12:25 {2}tests\[2\]\.expect\.outcomes\.rout {2}pipeline flow has no step "rout" — did you mean "route"\?$/m,
    )
    expect(r.stderr).to.match(
      /^worse\.pipe-test\.yaml:12:41 {2}tests\[2\]\.expect\.outcomes\.big {2}step "big" \(end\) never has the outcome "nope"; its outcomes: succeeded/m,
    )
    expect(r.stdout).not.to.match(/[✓✗]/)
    expect(existsSync(marker), 'a test ran').to.equal(false)

    // pipe validate tells a test file by its name and checks it the same way.
    const validated = await pipeHere(['validate', 'worse.pipe-test.yaml', 'good.pipe-test.yaml'], {cwd: dir, env: home()})
    expect(validated.code).to.equal(2)
    expect(validated.stdout).to.match(/^worse\.pipe-test\.yaml:12:25 {2}tests\[2\]\.expect\.outcomes\.rout {2}pipeline flow has no step "rout"/m)
    expect(validated.stderr).to.contain('ok  good.pipe-test.yaml (test)')
    expect(existsSync(marker), 'validate ran a test').to.equal(false)

    // The same files one at a time: the good one runs (the marker proves the check above could fail).
    const good = await pipeHere(['test', 'good.pipe-test.yaml'], {cwd: dir, env: home()})
    expect(good.code, good.stdout + good.stderr).to.equal(0)
    expect(existsSync(marker)).to.equal(true)
  })

  it('writes a missing golden with --update, shows a unified diff when the run changes, and --update rewrites it', async () => {
    const pipeline = await file('flow.yaml', FLOW)
    await file(
      'flow.pipe-test.yaml',
      'version: 1\npipeline: flow.yaml\ntests:\n  - name: golden\n    inputs: {n: 7}\n    expect:\n      status: succeeded\n      golden: goldens/flow.json\n',
    )
    const golden = path.join(dir, 'goldens', 'flow.json')

    const missing = await pipe(['test'], {cwd: dir, env: home()})
    expect(missing.code, missing.stdout).to.equal(1)
    expect(missing.stdout).to.contain('golden goldens/flow.json does not exist; pipe test --update writes it')

    const written = await pipeHere(['test', '--update'], {cwd: dir, env: home()})
    expect(written.code, written.stdout + written.stderr).to.equal(0)
    expect(written.stdout).to.match(/✓ flow\.pipe-test\.yaml › golden \(.*\) \[golden written\]/)
    const first = await readFile(golden, 'utf8')
    // Masked: nothing that differs from one run to the next, nothing of the temporary directories.
    expect(first).to.contain('"run_id": "R-YYYYMMDD-0001"')
    expect(first).to.contain('"started_at": "<time>"')
    expect(first).to.contain('"duration_ms": "<ms>"')
    expect(first).to.contain('"pipeline_hash": "<hash>"')
    expect(first).not.to.match(/\d{4}-\d{2}-\d{2}T|sha256:[0-9a-f]|pipe-test-/)

    const again = await pipeHere(['test'], {cwd: dir, env: home()})
    expect(again.code, again.stdout).to.equal(0)

    await writeFile(pipeline, FLOW.replace('reason: "big ${{ inputs.n }}"', 'reason: "large ${{ inputs.n }}"'))
    const changed = await pipeHere(['test'], {cwd: dir, env: home()})
    expect(changed.code).to.equal(1)
    expect(changed.stdout).to.contain("golden goldens/flow.json differs from this run's snapshots (pipe test --update rewrites it)")
    expect(changed.stdout).to.contain('--- goldens/flow.json (golden)')
    expect(changed.stdout).to.contain('+++ goldens/flow.json (this run)')
    expect(changed.stdout).to.match(/^ +-\s+"reason": "big 7"/m)
    expect(changed.stdout).to.match(/^ +\+\s+"reason": "large 7"/m)
    expect(await readFile(golden, 'utf8')).to.equal(first)

    const updated = await pipeHere(['test', '-u'], {cwd: dir, env: home()})
    expect(updated.code).to.equal(0)
    expect(updated.stdout).to.contain('[golden updated]')
    expect(await readFile(golden, 'utf8')).to.contain('"reason": "large 7"')
    expect((await pipeHere(['test'], {cwd: dir, env: home()})).code).to.equal(0)
  })

  it("refuses a golden (and, with --record, a cassette) outside the test file's repository: --update writes nothing there", async () => {
    await mkdir(path.join(dir, 'sub'))
    await file('sub/flow.yaml', FLOW)
    const outside = path.join(dir, 'abs.golden.json')
    await file(
      'sub/out.pipe-test.yaml',
      `version: 1\npipeline: flow.yaml\ntests:\n  - name: up\n    inputs: {n: 7}\n    expect: {status: succeeded, golden: ../up.golden.json}\n  - name: absolute\n    inputs: {n: 7}\n    expect: {status: succeeded, golden: ${outside}}\n  - name: inside\n    inputs: {n: 7}\n    expect: {status: succeeded, golden: goldens/ok.json}\n`,
    )
    const r = await pipe(['test', 'sub/out.pipe-test.yaml', '--update'], {cwd: dir, env: home()})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    expect(r.stderr).to.match(/out\.pipe-test\.yaml:6:\d+ .*golden \.\.\/up\.golden\.json is outside/)
    expect(r.stderr).to.match(/out\.pipe-test\.yaml:9:\d+ .*golden .*abs\.golden\.json is outside/)
    expect(existsSync(path.join(dir, 'up.golden.json'))).to.equal(false)
    expect(existsSync(outside)).to.equal(false)
    await file(
      'sub/cas.pipe-test.yaml',
      'version: 1\npipeline: flow.yaml\ncassette: ../c.jsonl\ntests:\n  - {name: c, inputs: {n: 7}, expect: {status: succeeded}}\n',
    )
    const recorded = await pipeHere(['test', 'sub/cas.pipe-test.yaml', '--record'], {cwd: dir, env: home()})
    expect(recorded.code, recorded.stdout + recorded.stderr).to.equal(2)
    expect(recorded.stderr).to.contain('cassette ../c.jsonl is outside')
    expect(existsSync(path.join(dir, 'c.jsonl'))).to.equal(false)
  })

  it('--junit to a path that cannot be written is a usage error before any test runs', async () => {
    await file('flow.yaml', FLOW)
    await file('flow.pipe-test.yaml', 'version: 1\npipeline: flow.yaml\ntests:\n  - {name: big, inputs: {n: 7}, expect: {status: succeeded}}\n')
    await file('plain.txt', 'a file\n')
    await mkdir(path.join(dir, 'reports'))
    for (const [index, [target, message]] of [
      ['plain.txt/report.xml', 'cannot create its directory'],
      ['reports', 'is not a file'],
      // A parent that exists but refuses new entries: Node's recursive mkdir retried there for ever.
      ...(existsSync('/proc/1') ? ([['/proc/1/x/report.xml', 'cannot create its directory']] as const) : []),
    ].entries()) {
      // The first case is a process, the others run in this one.
      const r = await (index === 0 ? pipe : pipeHere)(['test', 'flow.pipe-test.yaml', '--junit', target], {cwd: dir, env: home()})
      expect(r.code, r.stdout + r.stderr).to.equal(2)
      expect(r.stderr).to.contain(message)
      expect(r.stdout, 'no test ran').not.to.contain('big')
    }
  })

  it('reports a bad file-level pipeline once, not once per test using it', async () => {
    await file('broken.yaml', 'version: 1\nname: broken\nsteps:\n  - {id: a, kind: end, status: succeeded}\n  - {id: b, kind: end, status: succeeded}\n')
    await file(
      'two.pipe-test.yaml',
      'version: 1\npipeline: broken.yaml\ntests:\n  - {name: one, expect: {status: succeeded}}\n  - {name: two, expect: {status: succeeded}}\n',
    )
    const r = await pipe(['test', 'two.pipe-test.yaml'], {cwd: dir, env: home()})
    expect(r.code, r.stderr).to.equal(2)
    expect(r.stderr.match(/pipeline broken\.yaml is not valid/g)).to.have.length(1)
    expect(r.stderr).to.contain('unreachable')
  })

  it('--json prints one document with each test, its status, duration and failures; --junit writes XML that validates against the JUnit XSD', async () => {
    await file('flow.yaml', FLOW)
    await file(
      'flow.pipe-test.yaml',
      'version: 1\npipeline: flow.yaml\ntests:\n  - name: passes <&>\n    inputs: {n: 6}\n    expect: {status: succeeded}\n  - name: fails "quoted"\n    expect: {status: succeeded, assert: ["${{ inputs.n < 0 }}"]}\n',
    )
    const junit = path.join(dir, 'reports', 'junit.xml')
    const r = await pipe(['test', '--json', '--junit', 'reports/junit.xml', '--keep'], {cwd: dir, env: home()})
    expect(r.code, r.stderr).to.equal(1)
    const body = json<Report>(r)
    expect(body).to.include({passed: 1, failed: 1, total: 2})
    expect(body.duration_ms).to.be.a('number')
    expect(body.tests.map((t) => [t.file, t.name, t.status])).to.deep.equal([
      ['flow.pipe-test.yaml', 'passes <&>', 'passed'],
      ['flow.pipe-test.yaml', 'fails "quoted"', 'failed'],
    ])
    const failed = body.tests[1]!
    expect(failed.failures.map((f) => f.kind)).to.deep.equal(['status', 'assert'])
    expect(failed.failures[0]).to.include({expected: 'succeeded', actual: 'failed'})
    expect(failed.run).to.deep.include({status: 'failed', error: {code: 'E_ENDED', message: 'small 1', step: 'small'}})
    // --keep: the store is there to inspect with the ordinary commands.
    const store = path.join(failed.kept!, 'store')
    const shown = await pipeHere(['runs', 'show', failed.run!.run_id, '--store', store, '--json'], {cwd: dir, env: home()})
    expect(shown.code, shown.stderr).to.equal(0)
    for (const t of body.tests) await rm(t.kept!, {recursive: true, force: true})
    // The lines go to stderr with --json.
    expect(r.stderr).to.match(/^✗ flow\.pipe-test\.yaml › fails "quoted"/m)

    const xml = await readFile(junit, 'utf8')
    const lint = await junitSchemaErrors(xml)
    expect(lint).to.deep.equal([])
    expect(xml).to.contain('<testsuites name="pipe test" tests="2" failures="1" errors="0"')
    expect(xml).to.contain('<testsuite name="flow.pipe-test.yaml" tests="2" failures="1"')
    expect(xml).to.match(/<testcase name="passes &lt;&amp;&gt;" classname="flow\.pipe-test\.yaml" time="\d+\.\d{3}"\/>/)
    expect(xml).to.contain('<testcase name="fails &quot;quoted&quot;"')
    expect(xml).to.match(/<failure message="status: expected succeeded, got failed[^"]*" type="status,assert">/)
    expect(xml).to.contain('assert ${{ inputs.n &lt; 0 }}: gave false')
  })

  it('a broken JUnit file fails the same XSD check (the check can fail)', async () => {
    const bad = await file('bad.xml', '<?xml version="1.0"?>\n<testsuites><testsuite name="x"><testcase/></testsuite></testsuites>\n')
    expect(await junitSchemaErrors(await readFile(bad, 'utf8'))).to.not.deep.equal([])
  })

  it('--filter runs only the tests whose name matches; a directory argument is searched; no test files is a usage error', async () => {
    await file('flow.yaml', FLOW)
    await import('node:fs/promises').then((fs) => fs.mkdir(path.join(dir, 'sub')))
    await file(
      'sub/flow.pipe-test.yaml',
      'version: 1\npipeline: ../flow.yaml\ntests:\n  - name: small one\n    expect: {status: succeeded}\n  - name: Big one\n    inputs: {n: 7}\n    expect: {status: succeeded}\n',
    )
    const filtered = await pipe(['test', 'sub', '-g', 'big'], {cwd: dir, env: home()})
    expect(filtered.code, filtered.stdout + filtered.stderr).to.equal(0)
    expect(filtered.stdout).to.contain('✓ sub/flow.pipe-test.yaml › Big one')
    expect(filtered.stdout).not.to.contain('small one')
    const all = await pipeHere(['test', 'sub', '--bail', '--jobs', '1'], {cwd: dir, env: home()})
    expect(all.code).to.equal(1)
    expect(all.stdout).to.contain('✗ sub/flow.pipe-test.yaml › small one')
    expect(all.stdout).not.to.contain('Big one')
    expect(all.stdout).to.match(/^Tests: 0 passed, 1 failed, 1 total .*; 1 not run \(--bail\)$/m)

    const empty = path.join(dir, 'empty')
    await import('node:fs/promises').then((fs) => fs.mkdir(empty))
    const none = await pipeHere(['test'], {cwd: empty, env: home()})
    expect(none.code).to.equal(2)
    expect(none.stderr).to.match(/Error \[E_NOT_FOUND\]: no test files \(\*\.pipe-test\.yaml\) found under/)
    const nothing = await pipeHere(['test', 'sub', '--filter', 'zzz'], {cwd: dir, env: home()})
    expect(nothing.code).to.equal(2)
    expect(nothing.stderr).to.contain('no test name contains "zzz"')
  })
})

/** What libxml2 (xmllint, built to WebAssembly: no system package needed) finds wrong with `xml` against the JUnit XSD. */
async function junitSchemaErrors(xml: string): Promise<string[]> {
  const schema = await readFile(path.join(repoRoot, 'test', 'fixtures', 'junit.xsd'), 'utf8')
  const result = await validateXML({xml: [{fileName: 'report.xml', contents: xml}], schema: [{fileName: 'junit.xsd', contents: schema}]})
  return result.valid ? [] : result.errors.map((e) => e.rawMessage)
}
