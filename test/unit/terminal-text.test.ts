import {expect} from 'chai'
import {progressPrinter} from '../../src/cli/progress.js'
import {jsonText, line, visible, visibleLine} from '../../src/util/terminal-text.js'

describe('terminal-safe text', () => {
  const hostile = 'a\u001B]52;c;SGk=\u0007b\u001B[2J\rc\u007Fd\u009Be\u202Ef\u2066g\u0000h'

  it('shows every control character escaped, keeping the text around it', () => {
    expect(visible(hostile)).to.equal('a\\x1b]52;c;SGk=\\x07b\\x1b[2J\\rc\\x7fd\\u009be\\u202ef\\u2066g\\x00h')
  })

  it('keeps line breaks and tabs in text of several lines, and escapes them in a one-line field', () => {
    expect(visible('one\n\ttwo')).to.equal('one\n\ttwo')
    expect(visibleLine('one\n\ttwo')).to.equal('one\\n\\ttwo')
    expect(visibleLine(42)).to.equal('42')
  })

  it('changes nothing the second time, and nothing in ordinary text of any script', () => {
    expect(visible(visible(hostile))).to.equal(visible(hostile))
    expect(visibleLine(visibleLine(hostile))).to.equal(visibleLine(hostile))
    const plain = 'Grüße — 日本語 עברית ✓ C:\\path\\x1b'
    expect(visible(plain)).to.equal(plain)
  })

  it('line`` escapes the values it is given, never its own text', () => {
    expect(line`run ${'R-1\n✓ fake'}  ${'ok'}\n`).to.equal('run R-1\\n✓ fake  ok\n')
  })

  it('jsonText is JSON that parses to exactly the same value, with no raw control or bidi character', () => {
    const value = {reply: hostile, list: ['\u2028', '\u2029', '\u0085'], n: 1}
    const text = jsonText(value)
    expect(JSON.parse(text)).to.deep.equal(value)
    // eslint-disable-next-line no-control-regex
    expect(text).to.not.match(/[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]/)
    expect(jsonText({a: 'plain'})).to.equal(JSON.stringify({a: 'plain'}, null, 2))
  })

  it("progress lines keep pipe's own colours while a reason's escape sequences are shown escaped", () => {
    const written: string[] = []
    const stream = {isTTY: true, write: (text: string) => written.push(text)} as unknown as NodeJS.WriteStream
    const saved = process.env.NO_COLOR
    delete process.env.NO_COLOR
    try {
      progressPrinter(stream)({
        type: 'step_end',
        run_id: 'R-1',
        step: 'compile',
        kind: 'compile',
        seq: 2,
        outcome: 'success',
        ok: true,
        failure: false,
        duration_ms: 5,
        reason: 'x\u001B[2J\r  ✓ forged\u202E',
        spec_version_out: null,
      })
    } finally {
      if (saved !== undefined) process.env.NO_COLOR = saved
    }
    const out = written.join('')
    expect(out).to.contain('\u001B[32m✓\u001B[0m')
    expect(out).to.contain('\u001B[2mx\\x1b[2J\\r  ✓ forged\\u202e\u001B[0m')
  })
})
