import {expect} from 'chai'
import {diffLines} from '../../src/edit/workspace.js'

describe('diffLines: the lines a unified diff changes (what max_patch_lines counts over a task)', () => {
  it('counts added and removed lines inside hunks, "++x" and "--x" too, and never the file headers', () => {
    const patch = [
      'diff --git a/a.sql b/a.sql',
      '--- a/a.sql',
      '+++ b/a.sql',
      '@@ -1,2 +1,2 @@',
      '--- a comment',
      '+++i;',
      ' kept',
      'diff --git a/b.txt b/b.txt',
      'new file mode 100644',
      '--- /dev/null',
      '+++ b/b.txt',
      '@@ -0,0 +1,2 @@',
      '+++counter;',
      '+plain',
      '',
    ].join('\n')
    expect(diffLines(patch)).to.equal(4)
    expect(diffLines('')).to.equal(0)
  })
})
