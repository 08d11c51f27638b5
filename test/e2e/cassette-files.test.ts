/**
 * The cassette files a run refuses before it starts, and the ones it reads: corrupt, truncated,
 * foreign, wrong-version or missing cassettes, a FIFO or a folder in a cassette's place, a line
 * nested too deeply, and a cassette saved with a BOM and CRLF (the built CLI, and the door every
 * session opens a cassette by, in-process).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {PipeError} from '../../src/errors.js'
import {json, tempDir} from '../helpers/cli.js'
import {cassetteCommands} from '../helpers/cassette-fixtures.js'

let dir: string
let cleanup: () => Promise<void>

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-cassette-'))
})
afterEach(async () => {
  await cleanup()
})

// No test here starts a model server.
const {fixture, runIn, runHere} = cassetteCommands(() => ({dir, server: undefined}))

/** The error opening a cassette gives, through the door every session opens one by (`replySources`), in-process. */
async function openedCassette(flag: '--replay' | '--record', file: string): Promise<PipeError> {
  const {replySources} = await import('../../src/app/sessions/shared.js')
  const cassette = flag === '--replay' ? ({file, mode: 'replay', missing: 'error'} as const) : ({file, mode: 'record'} as const)
  const error = await replySources({cwd: dir, store: '.pipe', cassette}).then(
    () => undefined,
    (e: unknown) => e,
  )
  // By its shape: the module a dynamic import loads may be another instance of the PipeError class.
  if (!(error instanceof Error) || typeof (error as PipeError).code !== 'string') throw new Error(`${flag} ${file}: expected a PipeError, got ${String(error)}`)
  return error as PipeError
}

describe('cassettes and the reply cache (model step fixture, server on 127.0.0.1)', function () {
  this.timeout(180000)

  it('refuses a corrupt, truncated, foreign, wrong-version or missing cassette with E_CONFIG at its line, before a run exists', async () => {
    const file = await fixture()
    const cases: Array<[string, string, RegExp]> = [
      ['foreign.jsonl', '{"name":"something else"}\n', /foreign\.jsonl:1: the first line is not a cassette header/],
      ['version.jsonl', '{"type":"header","format":"pipe-cassette/9"}\n', /version\.jsonl:1: cassette format pipe-cassette\/9 is not one this pipe reads/],
      ['truncated.jsonl', '{"type":"header","format":"pipe-cassette/1"}\n{"type":"interaction","key":"sha256:ab\n', /truncated\.jsonl:2: not a JSON line/],
      [
        'schema.jsonl',
        '{"type":"header","format":"pipe-cassette/1"}\n{"type":"interaction","key":"sha256:' +
          'a'.repeat(64) +
          '","step":"draft","request":{"model":"m","messages":[]}}\n',
        /schema\.jsonl:2: does not match the cassette schema.*reply/,
      ],
      ['empty.jsonl', '', /empty\.jsonl:1: the cassette is empty/],
      ['yaml.jsonl', 'type: header\n', /yaml\.jsonl:1: not a JSON line/],
    ]
    // Every case through the one door a run, a resume and a replay open a cassette by; the first
    // also as a process: that such an error exits 2 with it as JSON, no stack, before a run exists.
    for (const [index, [name, text, pattern]] of cases.entries()) {
      await writeFile(path.join(dir, name), text)
      const error = await openedCassette('--replay', path.join(dir, name))
      expect(error.code, name).to.equal('E_CONFIG')
      expect(error.message, name).to.match(pattern)
      expect(error.hint, name).to.contain('--record')
      if (index > 0) continue
      const result = await runIn(file, ['--replay', path.join(dir, name)])
      expect(result.code, `${name}: ${result.stderr}`).to.equal(2)
      const shown = json<{error: {code: string; message: string; hint?: string}}>(result).error
      expect(shown).to.deep.include({code: error.code, message: error.message, hint: error.hint})
      expect(result.stderr, name).to.not.match(/\n\s+at .+\.js:\d+/)
    }
    // A missing cassette through the same door (the first case above showed such an error exits 2 as a process).
    const missing = await openedCassette('--replay', path.join(dir, 'nope.jsonl'))
    expect(missing.code).to.equal('E_CONFIG')
    expect(missing.message).to.contain('nope.jsonl does not exist')
    // In this process (the first case above is the refusal as a process).
    const mixed = await runHere(file, ['--replay', path.join(dir, 'a.jsonl'), '--record', path.join(dir, 'b.jsonl'), '--replay-missing', 'live'])
    expect(mixed.code).to.equal(2)
    // Nothing was started.
    expect(await readdir(path.join(dir, '.pipe', 'runs')).catch(() => [])).to.deep.equal([])
  })

  it('refuses a cassette path that is a FIFO or a directory, and a line nested too deeply, without hanging or crashing; reads one saved with a BOM or CRLF', async () => {
    const file = await fixture()
    const fifo = path.join(dir, 'fifo.jsonl')
    execFileSync('mkfifo', [fifo])
    await mkdir(path.join(dir, 'folder.jsonl'))
    const deep = path.join(dir, 'deep.jsonl')
    const nested = `${'['.repeat(100000)}${']'.repeat(100000)}`
    await writeFile(
      deep,
      `{"type":"header","format":"pipe-cassette/1"}\n{"type":"interaction","key":"sha256:${'a'.repeat(64)}","step":"draft","request":{"model":"m","messages":[],"response_format":{"type":"json_object","x":${nested}}},"reply":{"model":"m","finish_reason":"stop","message":{"role":"assistant","content":"{}"}}}\n`,
    )
    const refused = [
      ['--replay', fifo, /fifo\.jsonl is not a regular file \(it is a FIFO/],
      ['--record', fifo, /fifo\.jsonl is not a regular file \(it is a FIFO/],
      ['--replay', path.join(dir, 'folder.jsonl'), /folder\.jsonl is not a regular file \(it is a directory\)/],
      ['--replay', deep, /deep\.jsonl:2: the line is nested too deeply/],
    ] as const
    for (const [flag, given, pattern] of refused) {
      const error = await openedCassette(flag, given)
      expect(error.code, `${flag} ${given}`).to.equal('E_CONFIG')
      expect(error.message, `${flag} ${given}`).to.match(pattern)
    }
    // The FIFO and the too-deep line as processes too: the CLI neither hangs on the one nor crashes on the other.
    for (const [flag, given, pattern] of [refused[0], refused[3]]) {
      const result = await runIn(file, [flag, given])
      expect(result.code, `${flag} ${given}: ${result.stderr}`).to.equal(2)
      expect(json<{error: {code: string; message: string}}>(result).error.message).to.match(pattern)
    }
    // A cassette an editor saved with a byte order mark and CRLF line ends still reads.
    const bom = path.join(dir, 'bom.jsonl')
    await writeFile(bom, '\uFEFF{"type":"header","format":"pipe-cassette/1"}\r\n')
    // Opened through the door every run, resume and replay opens a cassette by (what the run of a
    // pipeline that asks no model would do with it): read, not refused.
    const {replySources} = await import('../../src/app/sessions/shared.js')
    const opened = await replySources({cwd: dir, store: '.pipe', cassette: {file: bom, mode: 'replay', missing: 'error'}})
    expect(opened.cassette, 'the cassette saved with a BOM and CRLF is opened').to.not.equal(undefined)
  })
})
