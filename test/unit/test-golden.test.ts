import {expect} from 'chai'
import {goldenDiff, goldenText} from '../../src/app/testing/golden.js'
import {junitXml} from '../../src/cli/test-report.js'
import type {Snapshot} from '../../src/types/snapshot.js'

describe('pipe test goldens and reports', () => {
  const snapshot = (runId: string, at: string, dir: string): Snapshot =>
    ({
      run_id: runId,
      feature_id: 'F-2031-004',
      spec_version_in: null,
      spec_version_out: `S-${at.slice(0, 10).replace(/-/g, '')}-0002`,
      step: {name: 'x', kind: 'noop', seq: 1, iteration: 1, attempts: 1, started_at: at, ended_at: at, duration_ms: 17},
      inputs: {source_ref: `file://${dir}/examples/a.md`, store: `/tmp/pipe-test-AbC123/store/runs/${runId}`},
      outputs: {sha256: `sha256:${'a'.repeat(64)}`, bare: 'b'.repeat(64), count: 3},
      decisions: [{decision: 'success', reason: `ran at ${at} in ${dir}`}],
      evidence_links: [],
      errors: [],
      meta: {binds: {[`S-${at.slice(0, 10).replace(/-/g, '')}-0002`]: `sha256:${'c'.repeat(64)}`}, field_hashes: {x: 'sha256:1'}},
    }) as unknown as Snapshot

  it('masks what differs from run to run and nothing else, so two runs on different days and checkouts give the same text', () => {
    const one = goldenText([snapshot('R-20310101-0001', '2031-01-01T10:00:00.123Z', '/home/a/repo')], {tmp: '/tmp/pipe-test-AbC123', root: '/home/a/repo'})
    const two = goldenText([snapshot('R-20310202-0001', '2031-02-02T23:59:59.000Z', '/srv/ci/checkout')], {
      tmp: '/tmp/pipe-test-AbC123',
      root: '/srv/ci/checkout',
    })
    expect(one).to.equal(two)
    expect(one).to.contain('"run_id": "R-YYYYMMDD-0001"')
    expect(one).to.contain('"feature_id": "F-YYYY-004"')
    expect(one).to.contain('"spec_version_out": "S-YYYYMMDD-0002"')
    expect(one).to.contain('"S-YYYYMMDD-0002": "<hash>"')
    expect(one).to.contain('"duration_ms": "<ms>"')
    expect(one).to.contain('"source_ref": "file://<root>/examples/a.md"')
    expect(one).to.contain('"store": "<tmp>/store/runs/R-YYYYMMDD-0001"')
    expect(one).to.contain('"reason": "ran at <time> in <root>"')
    expect(one).to.contain('"count": 3')
    expect(one).not.to.contain('field_hashes')
    expect(one).not.to.match(/[0-9a-f]{64}/)
    // A real change shows.
    const changed = goldenText([{...snapshot('R-20310101-0001', '2031-01-01T10:00:00.123Z', '/home/a/repo'), outputs: {count: 4}}], {root: '/home/a/repo'})
    const diff = goldenDiff('g.json', one, changed)
    expect(diff).to.match(/^-\s+"count": 3,?$/m)
    expect(diff).to.match(/^\+\s+"count": 4$/m)
  })

  it('JUnit XML escapes markup and drops characters XML cannot hold', () => {
    const xml = junitXml({
      passed: 0,
      failed: 1,
      total: 1,
      duration_ms: 1500,
      tests: [
        {
          file: 'a&b.pipe-test.yaml',
          name: '<x> "y"',
          status: 'failed',
          duration_ms: 1500,
          failures: [{kind: 'assert', message: "assert ${{ a < b && c > 'd' }}: gave false\u0007"}],
        },
      ],
    })
    expect(xml).to.contain('<testsuite name="a&amp;b.pipe-test.yaml" tests="1" failures="1"')
    expect(xml).to.contain('<testcase name="&lt;x&gt; &quot;y&quot;" classname="a&amp;b.pipe-test.yaml" time="1.500">')
    expect(xml).to.contain('assert ${{ a &lt; b &amp;&amp; c &gt; &apos;d&apos; }}: gave false</failure>')
    expect(xml).not.to.contain('\u0007')
  })
})
