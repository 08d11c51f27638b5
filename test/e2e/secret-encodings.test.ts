/**
 * A command step whose tool prints a secret as bytes (hex, as xxd -p or od would), in another
 * case, or JSON-escaped with its slashes escaped too (PHP's json_encode, many web servers' echo of a
 * URL): the sealed snapshot, stdout and stderr hold none of those forms.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pipe, tempDir} from '../helpers/cli.js'

const CANARY = 'https://hooks.example.com/canary-7d1e5b-Secret'

const PIPELINE = `version: 1
name: encodings
secrets: [HOOK_URL]
steps:
  - id: show
    kind: command
    run: [node, -e, "const s = process.argv[1]; console.log(Buffer.from(s).toString('hex')); console.log(Buffer.from(s).toString('hex').toUpperCase()); console.log(s.toUpperCase()); console.error(s.toLowerCase()); console.log(JSON.stringify({url: s}).split('/').join(String.fromCharCode(92) + '/'))", "\${{ secrets.HOOK_URL }}"]
`

describe('a secret printed as hex or in another case is redacted like the value', function () {
  this.timeout(60000)
  let dir: string
  let cleanup: () => Promise<void>
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-encodings-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
  })
  afterEach(async () => cleanup())

  it('is found neither in the store nor on stdout/stderr', async () => {
    await writeFile(path.join(dir, 'p.yaml'), PIPELINE)
    await writeFile(path.join(dir, 'policy.yaml'), 'version: 1\nallowed_commands:\n  - [node, -e, "..."]\n')
    const env = {HOOK_URL: CANARY, PIPE_HOME: path.join(dir, 'home')}
    const run = await pipe(['run', 'p.yaml', '--text', 'x'], {cwd: dir, env})
    expect(run.code, run.stderr).to.equal(0)
    const hex = Buffer.from(CANARY).toString('hex')
    const forms = [CANARY, hex, hex.toUpperCase(), CANARY.toUpperCase(), CANARY.toLowerCase(), CANARY.replace(/\//g, '\\/')]
    const shown = await pipe(['snapshot', 'show', 'R-' + /R-(\d{8}-\d{4})/.exec(run.stdout)![1]!, '--json'], {cwd: dir, env})
    expect(shown.stdout, 'the step recorded what its tool printed').to.contain('[REDACTED]')
    const files = (await readdir(path.join(dir, '.pipe'), {recursive: true, withFileTypes: true})).filter((e) => e.isFile())
    const texts: Array<[string, string]> = [
      ['stdout', run.stdout + shown.stdout],
      ['stderr', run.stderr + shown.stderr],
      ...(await Promise.all(files.map(async (e): Promise<[string, string]> => [e.name, await readFile(path.join(e.parentPath, e.name), 'utf8')]))),
    ]
    // A record holds a form as JSON text: its backslashes doubled.
    const inJson = (form: string): string => JSON.stringify(form).slice(1, -1)
    const found = texts.flatMap(([where, text]) =>
      forms.filter((form) => text.includes(form) || text.includes(inJson(form))).map((form) => `${where}: ${form}`),
    )
    expect(found).to.deep.equal([])
  })
})
