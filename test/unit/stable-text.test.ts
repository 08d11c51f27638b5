import {expect} from 'chai'
import {mkdtemp, rm, symlink} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {IdAliases, maskTimes, maskTimings, relativeToRoot, stableText} from '../../src/util/stable-text.js'

describe('stable text: no folder, timing or clock in what a model or a golden reads', () => {
  it('masks the timings test runners and build tools print, and nothing else', () => {
    const cases: Array<[string, string]> = [
      ['Ran 5 tests in 0.007s', 'Ran 5 tests in …'],
      ['===== 3 passed in 0.12s =====', '===== 3 passed in … ====='],
      ['Time:        1.234 s', 'Time:        …'],
      ['ok  \texample.com/pkg\t0.012s', 'ok  \texample.com/pkg\t…s'],
      ['test result: ok. 1 passed; finished in 0.00s', 'test result: ok. 1 passed; finished in …'],
      ['✔ adds (1.2345ms)', '✔ adds (… ms)'],
      ['  ✓ works (12 ms)', '  ✓ works (… ms)'],
      ['# duration_ms 31.5', '# duration_ms …'],
      ['  duration_ms: 31.5', '  duration_ms: …'],
      ['done, took 3ms', 'done, took …'],
      ['Duration: 1m 2s', 'Duration: …'],
      // What is not a timing stays.
      ['expected 5, got 3', 'expected 5, got 3'],
      ['median([10, 9, 2]) gave 2', 'median([10, 9, 2]) gave 2'],
      ['version 1.2.3 in use', 'version 1.2.3 in use'],
    ]
    for (const [given, expected] of cases) expect(maskTimings(given), given).to.equal(expected)
  })

  it('masks ISO times, with or without a zone', () => {
    expect(maskTimes('at 2026-11-24T22:08:08.123Z and 2031-07-09 04:05:06+02:00, on 2026-11-24')).to.equal('at <time> and <time>, on 2026-11-24')
  })

  it('names paths below the root relative to it, through a symlink too, and the root itself as .', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pipe stable '))
    try {
      const link = path.join(os.tmpdir(), `pipe-stable-link-${process.pid}`)
      await symlink(dir, link)
      try {
        const text = `at file://${dir}/a.test.js:3:7\n  File "${link}/b.py", line 2\nleaves ${dir}\nnot ${dir}-other/c.js`
        expect(relativeToRoot(text, link)).to.equal(`at a.test.js:3:7\n  File "b.py", line 2\nleaves .\nnot ${dir}-other/c.js`)
      } finally {
        await rm(link, {force: true})
      }
    } finally {
      await rm(dir, {recursive: true, force: true})
    }
  })

  it('stableText does all three', () => {
    expect(stableText('/w/r/x.py failed at 2026-01-01T00:00:00Z in 0.5s', '/w/r')).to.equal('x.py failed at <time> in …')
  })

  it('aliases ids by kind and first mention, the same id always alike', () => {
    const aliases = new IdAliases()
    expect(aliases.replace('R-20261124-0002 S-20261124-0001 R-20261124-0001 R-20261124-0002')).to.equal('R-#1 S-#1 R-#2 R-#1')
    expect(aliases.replace('F-2026-001 E-0042 F-2026-001 and E-12 is no id')).to.equal('F-#1 E-#1 F-#1 and E-12 is no id')
  })
})
