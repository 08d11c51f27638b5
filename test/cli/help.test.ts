/**
 * Help from the built CLI's command manifest (src/cli/help.ts, src/cli/router.ts): a topic lists
 * its commands, a command shows the sections the docs quote, and every way of asking gives the same
 * text. test/unit/cli-parser.test.ts checks the layout in-process.
 */
import {expect} from 'chai'
import {pipe} from '../helpers/cli.js'

describe('help (built CLI)', function () {
  this.timeout(120000)

  it('a topic lists its commands, the same for pipe runs, pipe runs --help and pipe help runs', async () => {
    const forms = await Promise.all([['runs'], ['runs', '--help'], ['help', 'runs']].map((args) => pipe(args)))
    for (const r of forms) expect(r.code, r.stderr).to.equal(0)
    expect(forms[0]!.stdout).to.match(
      /^List runs and show one run's timeline\.\n\nUSAGE\n {2}\$ pipe runs COMMAND\n\nCOMMANDS\n {2}runs list {2}List runs, newest first\.\n {2}runs show /,
    )
    expect(forms[1]!.stdout).to.equal(forms[0]!.stdout)
    expect(forms[2]!.stdout).to.equal(forms[0]!.stdout)
  })

  it("a command shows oclif's sections, its flags with their values and options, and its examples", async () => {
    const [help, short, viaHelp] = await Promise.all([pipe(['spec', 'diff', '--help']), pipe(['spec', 'diff', '-h']), pipe(['help', 'spec', 'diff'])])
    expect(help.code, help.stderr).to.equal(0)
    const sections = help.stdout.split('\n').filter((line) => /^[A-Z][A-Z ]+$/.test(line))
    expect(sections).to.deep.equal(['USAGE', 'ARGUMENTS', 'FLAGS', 'GLOBAL FLAGS', 'DESCRIPTION', 'EXAMPLES'])
    expect(help.stdout).to.contain('  $ pipe spec diff FROM TO [--json] [--meta] [--store DIR|URL]\n')
    expect(help.stdout).to.contain('  --[no-]meta').and.contain('  --store=DIR|URL').and.contain('  --json  Format output as json.')
    expect(help.stdout).to.contain('    $ pipe spec diff S-20261121-0004 S-20261121-0008 --no-meta')
    expect(short.stdout).to.equal(help.stdout)
    expect(viaHelp.stdout).to.equal(help.stdout)
    const run = await pipe(['run', '--help'])
    expect(run.stdout).to.contain('  --provider=<option>\n').and.contain('      <options: auto|offline|openai>\n')
  })
})
