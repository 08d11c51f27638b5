/**
 * README.md's "Your first pipeline in ten minutes", followed literally: every file it says to save
 * is saved, every `$ ` command of its console blocks is run in order by bash, as a reader would
 * type it (with `pipe` an installed command and a fresh HOME), and what each printed (stdout and
 * stderr together) must be what the README shows under it. Only what differs from reader to reader
 * is masked on both sides: the date in ids and log names, durations, trace ids, and the home folder.
 */
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {repoRoot, tempDir} from '../helpers/cli.js'
import {followTutorial, mask, tutorialItems} from '../helpers/readme-tutorial.js'

describe('README.md, "Your first pipeline in ten minutes", followed literally', function () {
  this.timeout(180000)

  it('saves its files, runs its commands in order, and each prints what the README shows', async () => {
    const items = tutorialItems(await readFile(path.join(repoRoot, 'README.md'), 'utf8'))
    expect(items.filter((i) => i.kind === 'file').map((i) => (i as {name: string}).name)).to.deep.equal([
      'pipeline.yaml',
      'policy.yaml',
      'notes.pipe-test.yaml',
    ])
    expect(items.filter((i) => i.kind === 'command').length).to.be.greaterThan(10)
    const {dir, cleanup} = await tempDir('pipe-tutorial-')
    try {
      const results = await followTutorial(items, dir)
      const shown = results.map(({item}) => `$ ${item.line}\n${mask(item.expected.join('\n'), dir)}`.trimEnd())
      const got = results.map(({item, output}) => `$ ${item.line}\n${mask(output, dir)}`.trimEnd())
      expect(got.join('\n')).to.equal(shown.join('\n'))
      // The report the run wrote, and a test file that passes: what the tutorial promises.
      expect(await readFile(path.join(dir, 'first-pipeline', 'report.md'), 'utf8')).to.equal('2 note(s) in notes\n')
      expect(results.at(-1)!.code, 'pipe test passes').to.equal(0)
    } finally {
      await cleanup()
    }
  })
})
