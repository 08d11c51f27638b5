import {expect} from 'chai'
import {addSecretUrl, addSecretsNamedIn, redact} from '../../src/util/redact.js'

describe('redact: webhook URLs are credentials', () => {
  it('redacts user:password in any URL, Slack and Feishu hook paths, and token query values', () => {
    const text = [
      'POST https://bot:hunter2secret@example.com/hook',
      'https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX failed',
      'https://open.feishu.cn/open-apis/bot/v2/hook/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab said no',
      'https://api.example.com/notify?channel=ops&access_token=abc123def&key=k-998877',
      'Authorization: Basic Ym90Omh1bnRlcjI=',
    ].join('\n')
    const out = redact(text)
    for (const secret of ['hunter2secret', 'T0000/B0000', 'XXXXXXXXXXXXXXXXXXXXXXXX', '0f1e2d3c-aaaa', 'abc123def', 'k-998877', 'Ym90Omh1bnRlcjI=']) expect(out).to.not.contain(secret)
    expect(out).to.contain('https://[REDACTED]@example.com/hook').and.contain('hooks.slack.com/services/[REDACTED]').and.contain('channel=ops')
  })

  it('redacts a configured URL and its parts wherever they appear, whatever its variable is called', () => {
    const url = 'http://user:pa55word-x@127.0.0.1:9/hooks/tok-55aa66bb77/notify?sig=zz99yy88'
    addSecretsNamedIn({steps: [{targets: [{url_env: 'SOME_HOOK_FOR_TEST'}]}]}, {SOME_HOOK_FOR_TEST: url})
    expect(redact(`echo: ${url}`)).to.equal('echo: [REDACTED]')
    expect(redact('no such hook /hooks/tok-55aa66bb77/notify')).to.not.contain('tok-55aa66bb77')
    expect(redact('password pa55word-x was wrong')).to.not.contain('pa55word-x')
    // Ordinary path words stay readable.
    addSecretUrl('https://example.org/webhooks/services/abcdef0123456789')
    expect(redact('see /webhooks/services for help')).to.equal('see /webhooks/services for help')
  })
})
