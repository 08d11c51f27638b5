import {expect} from 'chai'
import {
  addProcessSecrets,
  addSecret,
  addSecretUrl,
  addSecretsNamedIn,
  fixSecretEnvironment,
  redact,
  redactBetween,
  redactDeep,
  redactInPlace,
} from '../../src/util/redact.js'

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
    for (const secret of ['hunter2secret', 'T0000/B0000', 'XXXXXXXXXXXXXXXXXXXXXXXX', '0f1e2d3c-aaaa', 'abc123def', 'k-998877', 'Ym90Omh1bnRlcjI='])
      expect(out).to.not.contain(secret)
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

  it('redacts every encoding of a known secret: plain, base64 (padded or not, base64url), URL-encoded and JSON-escaped', () => {
    const secret = 'rel/ease"tok+9?x=1'
    addSecret(secret)
    const b64 = Buffer.from(secret).toString('base64')
    const forms = [
      secret,
      b64,
      b64.replace(/=+$/, ''),
      Buffer.from(secret).toString('base64url'),
      encodeURIComponent(secret),
      JSON.stringify(secret).slice(1, -1),
    ]
    for (const form of forms) expect(redact(`echo ${form} back`), form).to.equal('echo [REDACTED] back')
    // A JSON text that quotes it, and a record holding it, as a target's answer would.
    expect(redact(JSON.stringify({seen: secret}))).to.not.contain('tok+9')
    expect(JSON.stringify(redactDeep({headers: {Authorization: `Basic ${b64}`}}))).to.not.contain(b64.slice(0, 12))
  })

  it("redacts base64(user:password) of a URL's credentials, however short the password, and an Authorization header quoted as JSON", () => {
    addSecretUrl('http://deploy:pass@127.0.0.1:9/hook')
    const basic = Buffer.from('deploy:pass').toString('base64')
    expect(redact(`{"headers": {"x-echo": "${basic}"}}`)).to.not.contain(basic)
    expect(redact('{"headers": {"Authorization": "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="}}')).to.equal('{"headers": {"Authorization": "Basic [REDACTED]"}}')
  })

  it('redacts token= and the like in free text, not only in a URL query', () => {
    expect(redact('recorded with token=abc123xyz for the admin')).to.equal('recorded with token=[REDACTED] for the admin')
    expect(redact('password=hunter22 api_key=k-1234567')).to.equal('password=[REDACTED] api_key=[REDACTED]')
    expect(redact('pipe run -i key=value')).to.equal('pipe run -i key=value')
  })
})

describe('redact: credentials with a shape of their own', () => {
  it('redacts GitHub, GitLab, AWS, Slack and Google tokens and private key blocks in free text, and leaves look-alike words alone', () => {
    const secrets = {
      github: 'ghp_' + 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8',
      pat: 'github_pat_' + '11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz',
      gitlab: 'glpat-' + 'xY9zW8vU7tS6rQ5pO4nM',
      aws: 'AKIA' + 'IOSFODNN7EXAMPLE',
      slack: 'xoxb-' + '123456789012-abcdefABCDEF',
      google: 'AIza' + 'SyA-1234567890abcdefghijklmnopqrstu',
    }
    const key = ['-----BEGIN OPENSSH PRIVATE KEY-----', 'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ', '-----END OPENSSH PRIVATE KEY-----'].join('\n')
    const text = `${Object.entries(secrets)
      .map(([name, value]) => `${name}: ${value}`)
      .join('\n')}\n${key}\nafter the key`
    const out = redact(text)
    for (const value of Object.values(secrets)) expect(out).to.not.contain(value)
    expect(out).to.not.contain('b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ')
    expect(out).to.contain('github: [REDACTED]').and.contain('-----BEGIN OPENSSH PRIVATE KEY----- [REDACTED]').and.contain('after the key')
    // Words that only look like the start of one stay readable.
    expect(redact('the ghp_ prefix, AKIA alone, xoxb- and a glpat- note')).to.equal('the ghp_ prefix, AKIA alone, xoxb- and a glpat- note')
  })
})

describe('redact: the credentials a process is given (issue 35)', () => {
  it("masks a store URL's password (in the URL, ?password=, PGPASSWORD) and keeps its user, host and database readable", () => {
    addProcessSecrets(['run', 'p.yaml', '--store', 'postgres://pipe:st0re-pw-4411@db.example:5432/pipe'], {
      PIPE_STORE: 'postgresql://pipe@db.example/pipe?sslmode=require&password=qu3ry-pw-2299',
      PGPASSWORD: 'pg-env-pw-7788',
    })
    expect(redact('pipe resume R-20260101-0001 --store postgres://pipe:st0re-pw-4411@db.example:5432/pipe')).to.equal(
      'pipe resume R-20260101-0001 --store postgres://pipe:[REDACTED]@db.example:5432/pipe',
    )
    expect(redact('password qu3ry-pw-2299, then pg-env-pw-7788, then st0re-pw-4411')).to.equal('password [REDACTED], then [REDACTED], then [REDACTED]')
    // A user alone is a role's name in a database URL, and a credential in any other (https://TOKEN@host).
    expect(redact('postgres://pipe@db.example/pipe and https://tok3n-as-user@git.example/x')).to.equal(
      'postgres://pipe@db.example/pipe and https://[REDACTED]@git.example/x',
    )
  })

  it('masks the collector and model endpoint passwords and the OTLP header values', () => {
    addProcessSecrets([], {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:c0llect-pw-1234@127.0.0.1:4318/v1/traces',
      OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Bearer%20hdr-t0ken-5566,x-api-key=hdr-key-9900',
      OPENAI_BASE_URL: 'http://proxy:m0del-pw-3344@127.0.0.1:8080/v1',
    })
    const out = redact('c0llect-pw-1234 hdr-t0ken-5566 hdr-key-9900 m0del-pw-3344')
    expect(out).to.equal('[REDACTED] [REDACTED] [REDACTED] [REDACTED]')
  })

  it('redactDeep copies nothing that holds no secret; redactInPlace redacts the fields of a record a callback changed', () => {
    addSecret('in-place-s3cret')
    const clean = {a: ['x', {b: 'y'}], n: 1}
    expect(redactDeep(clean)).to.equal(clean)
    const record: Record<string, unknown> = {id: 'R-1', reason: 'waits: in-place-s3cret', nested: {list: ['in-place-s3cret']}}
    redactInPlace(record)
    expect(record).to.deep.equal({id: 'R-1', reason: 'waits: [REDACTED]', nested: {list: ['[REDACTED]']}})
  })

  it('keeps a --json document valid: a value ends at a backslash, which starts an escape', () => {
    const doc = JSON.stringify({note: 'run with password=abc\\"quoted\\"'})
    expect((): unknown => JSON.parse(redact(doc)) as unknown).to.not.throw()
  })
})

describe('redact: the pre-check that spares strings with no shape', () => {
  it('redacts every shape when it is the only one in its string, whatever its case', () => {
    // Each string alone: one shape in a text does not open the patterns for another.
    const shaped: Array<[string, string]> = [
      ['postgres://app:pgs3cretpw@db.example/app', 'pgs3cretpw'],
      ['POSTGRESQL://:pgs3cretpw@db/app', 'pgs3cretpw'],
      ['git clone https://ghtok3nvalue@example.com/repo.git', 'ghtok3nvalue'],
      ['ssh+git://deploy:k3yp4ss@host/x', 'k3yp4ss'],
      ['GET /x?Sig=s1gvalue99 HTTP/1.1', 's1gvalue99'],
      ['see ?signature=s1gnvalue', 's1gnvalue'],
      ['a&AUTH=authvalue1', 'authvalue1'],
      ['?api_key=apik3yvalue', 'apik3yvalue'],
      ['run with client_secret=cl13ntsecret', 'cl13ntsecret'],
      ['(ACCESS_TOKEN=acc3sstoken', 'acc3sstoken'],
      ['"passwd=pwval123', 'pwval123'],
      ['PASSWORD=pw0rdvalue', 'pw0rdvalue'],
      ['Authorization: Bearer b34rertoken', 'b34rertoken'],
      ['https://hooks.slack.com/services/T1/B2/slackhookpath', 'slackhookpath'],
      ['https://discord.com/api/webhooks/1/discordhookpath', 'discordhookpath'],
    ]
    for (const [text, secret] of shaped) expect(redact(text), text).to.not.contain(secret)
  })

  it('leaves a file:// reference, a URL without a user and an expression with == as they are', () => {
    for (const text of ['file:///work/examples/full-prd.md', 'https://example.com/a/b@c', "${{ steps.review.outputs.decision == 'go' }}", 'a = b', 'monkey=1'])
      expect(redact(text)).to.equal(text)
  })
})

describe('redact: a slice of a secret', () => {
  const key = 'proj-7Hq2Lm9Xw4Rt8Zk1Vb6Nc3Jd5Fg0Ys'

  it('redacts any run of 12 or more characters of a known secret: the head an endpoint echoes, a middle, a tail', () => {
    addSecret(key)
    for (const slice of [key.slice(0, 12), key.slice(0, 20), key.slice(7, 30), key.slice(-13), key.slice(5, 17)]) {
      const out = redact(`Incorrect API key provided: ${slice}. You can find your key at …`)
      expect(out, slice).to.equal('Incorrect API key provided: [REDACTED]. You can find your key at …')
    }
    // The run is redacted whole, with what borders it left as it was.
    expect(redact(`x${key.slice(3, 25)}y and ${key.slice(10, 24)}!`)).to.equal('x[REDACTED]y and [REDACTED]!')
  })

  it('leaves runs shorter than 12 characters, and a short secret, alone', () => {
    addSecret(key)
    expect(redact(`prefix ${key.slice(0, 11)} only`)).to.equal(`prefix ${key.slice(0, 11)} only`)
    addSecret('short-pw-12')
    expect(redact('short-pw-1 and short-pw-12')).to.equal('short-pw-1 and [REDACTED]')
  })

  it('redacts a slice across the edge of a kept head (redactBetween) and in records (redactDeep)', () => {
    addSecret(key)
    expect(redactBetween(`tail of ${key.slice(0, 6)}`, `${key.slice(6, 20)} rest`, '')).to.equal('[REDACTED] rest')
    expect(JSON.stringify(redactDeep({error: {message: `bad key ${key.slice(2, 22)}`}}))).to.not.contain(key.slice(2, 14))
  })

  it("redacts every one of many echoes (a tool printing the key's head on each line), and runs side by side as one", () => {
    addSecret(key)
    const lines = Array.from({length: 5000}, (_, i) => `line ${i} key=${key.slice(0, 14)} ok`)
    const out = redact(lines.join('\n'))
    expect(out.split('\n')).to.deep.equal(lines.map((_, i) => `line ${i} key=[REDACTED] ok`))
    expect(redact(`<${key.slice(0, 12)}${key.slice(0, 12)}>`)).to.equal('<[REDACTED]>')
    expect(redactBetween('', `a ${key.slice(4, 18)} b ${key.slice(0, 30)}`, '')).to.equal('a [REDACTED] b [REDACTED]')
  })
})

describe('redact: the environment read once while a worker serves', () => {
  it('still redacts the environment it read and every value registered since, and reads the environment again once released', () => {
    process.env.FIXED_TEST_API_KEY = 'env-secret-1a2b3c4d'
    const release = fixSecretEnvironment()
    try {
      expect(redactDeep({said: 'key env-secret-1a2b3c4d'}).said).to.not.contain('env-secret-1a2b3c4d')
      // Registered after the environment was read: the secrets are gathered again.
      addSecret('registered-later-9f8e7d6c')
      expect(redactDeep({said: 'registered-later-9f8e7d6c'}).said).to.not.contain('registered-later-9f8e7d6c')
      // A variable set while fixed is what a worker never does: it is read only once released.
      process.env.FIXED_TEST_OTHER_TOKEN = 'env-secret-5e6f7a8b'
      expect(redactDeep({said: 'env-secret-5e6f7a8b'}).said).to.contain('env-secret-5e6f7a8b')
    } finally {
      release()
    }
    try {
      expect(redactDeep({said: 'env-secret-5e6f7a8b'}).said).to.not.contain('env-secret-5e6f7a8b')
    } finally {
      delete process.env.FIXED_TEST_API_KEY
      delete process.env.FIXED_TEST_OTHER_TOKEN
    }
  })
})
