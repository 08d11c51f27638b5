/** Keeps secrets out of snapshots, logs and the terminal. */

const SECRET_ENV = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)/i
/**
 * Variables whose names match but whose values are no secret: PIPE_SIGNING_KEY is the path of a
 * key file (the file is secret, its name is not), and masking it would hide which file an error
 * is about and, by its slices, the run's own folder when the key is kept beside it.
 */
const NOT_SECRET_ENV = new Set(['PIPE_SIGNING_KEY'])

/**
 * One registry per process, on globalThis: the CLI's entry (dist/cli/boot.cjs, which redacts stdout
 * and stderr) and its command's group's bundle (dist/cli/GROUP.cjs, where a command learns a secret) each
 * hold a copy of this module, and a secret either copy is told must be redacted by both.
 */
const registry = ((globalThis as Record<symbol, unknown>)[Symbol.for('pipe.secrets')] ??= {known: new Set<string>(), composite: new Set<string>()}) as {
  known: Set<string>
  composite: Set<string>
  /** The environment's secrets while they are read once (fixSecretEnvironment): both copies of this module use them. */
  fixed?: {env: readonly string[]; known: number; composite: number; secrets?: Secrets}
}
/** Values this process was told are secret (webhook URLs and their parts), whatever their variable is named. */
const known = registry.known
/** Known values made of parts (a URL's path, `user:password`): redacted whole, while only the parts that are secret are redacted in slices. */
const composite = registry.composite

/**
 * The forms a secret takes in what a target or a tool echoes back: as it is, base64 (a Basic
 * Authorization header, a token in a config dump; with and without padding, and base64url),
 * URL-encoded (a query value, a redirect), JSON-escaped (a body that quotes it), hex and a change of
 * case. Each form is redacted like the value itself. A value a tool transforms otherwise (split,
 * reversed, hashed) cannot be recognised.
 */
function encodingsOf(value: string): string[] {
  let forms = encodings.get(value)
  if (!forms) {
    const base64 = Buffer.from(value, 'utf8').toString('base64')
    const out = new Set([
      value,
      base64,
      base64.replace(/=+$/, ''),
      Buffer.from(value, 'utf8').toString('base64url'),
      encodeURIComponent(value),
      JSON.stringify(value).slice(1, -1),
      // JSON whose writer escapes slashes too (PHP's json_encode, many servers' echo of a URL).
      JSON.stringify(value).slice(1, -1).replace(/\//g, '\\/'),
      // A tool that prints bytes (xxd -p, od, a digest's input dump) or shouts: hex either case, and the value upper- or lower-cased.
      Buffer.from(value, 'utf8').toString('hex'),
      Buffer.from(value, 'utf8').toString('hex').toUpperCase(),
      value.toUpperCase(),
      value.toLowerCase(),
      // As a page shows it (the view, pipe export --html).
      value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;'),
    ])
    try {
      // A value registered in its URL-encoded form (a URL's password) also appears decoded.
      out.add(decodeURIComponent(value))
    } catch {
      // Not an encoded value.
    }
    forms = [...out].filter((form) => form.length >= 6)
    encodings.set(value, forms)
  }
  return forms
}

const encodings = new Map<string, string[]>()

/** What is redacted: every form of every secret whole, and slices of the secrets as they are (`hideSlices`). */
interface Secrets {
  readonly forms: readonly string[]
  readonly whole: readonly string[]
}

const envSecrets = (): string[] =>
  Object.entries(process.env)
    .filter(([name, value]) => SECRET_ENV.test(name) && !NOT_SECRET_ENV.has(name) && typeof value === 'string' && value.length >= 8)
    .map(([, value]) => value as string)

/**
 * Reads the environment's secrets once, until the returned function is called: a command runs in a
 * process whose environment pipe never changes (cli/router.ts fixes it for every command), and
 * reading process.env costs ~0.3 ms, while a run redacts every record and line it writes (~15 reads
 * a default run, a worker's step several). The secrets are kept with what they gave, and gathered
 * again whenever the registry of known values grows. Called while fixed already, it changes nothing
 * and its release leaves the outer one in place.
 */
export function fixSecretEnvironment(): () => void {
  if (registry.fixed) return () => undefined
  registry.fixed = {env: envSecrets(), known: -1, composite: -1}
  return () => {
    delete registry.fixed
  }
}

function secretValues(): Secrets {
  const fixed = registry.fixed
  if (fixed?.secrets && fixed.known === known.size && fixed.composite === composite.size) return fixed.secrets
  const whole = [...new Set([...(fixed?.env ?? envSecrets()), ...known])]
  // Longest first, so a whole URL is replaced before the token inside it.
  const secrets = {
    forms: [...new Set(whole.flatMap(encodingsOf))].sort((a, b) => b.length - a.length),
    whole: whole.filter((value) => value.length >= SLICED_SECRET && !composite.has(value) && !value.includes('://')),
  }
  if (fixed) Object.assign(fixed, {secrets, known: known.size, composite: composite.size})
  return secrets
}

/**
 * An endpoint that refuses a key often echoes part of it ("Incorrect API key provided: sk-proj-AbCd…"),
 * and a tool may print a prefix of a token: any run of SLICE characters or more of a secret of
 * SLICED_SECRET or more is redacted. Found through blocks of BLOCK characters at fixed offsets of the
 * secret, since a run of 2×BLOCK−1 characters always holds one whole: a few indexOf per secret, not
 * one per offset. A URL, its path and `user:password` are not sliced: their host, path words and
 * user are no secret, and the parts that are (a password, token-like segments, query values) are
 * registered as secrets of their own.
 */
const SLICE = 12
const SLICED_SECRET = 16
const BLOCK = 6

function hideSlices(text: string, secrets: readonly string[], hide: (hidden: number) => string): string {
  let out = text
  for (const secret of secrets) {
    // Every run found first, the text rebuilt once: replacing each run as found copied the whole
    // text per run, and a tool's output echoing a key's prefix on 40,000 lines took minutes.
    const runs: Array<[number, number]> = []
    for (let block = 0; block + BLOCK <= secret.length; block += BLOCK) {
      const needle = secret.slice(block, block + BLOCK)
      for (let at = out.indexOf(needle); at >= 0; at = out.indexOf(needle, at + 1)) {
        let before = 0
        while (at - before > 0 && block - before > 0 && out[at - before - 1] === secret[block - before - 1]) before++
        let after = 0
        while (at + BLOCK + after < out.length && block + BLOCK + after < secret.length && out[at + BLOCK + after] === secret[block + BLOCK + after]) after++
        if (BLOCK + before + after >= SLICE) runs.push([at - before, at + BLOCK + after])
      }
    }
    if (runs.length === 0) continue
    runs.sort((a, b) => a[0] - b[0] || b[1] - a[1])
    const parts: string[] = []
    let kept = 0
    let start = -1
    let end = -1
    for (const [s, e] of runs) {
      // Overlapping or touching runs (one found through two blocks, two echoes side by side) are hidden as one.
      if (s <= end) {
        end = Math.max(end, e)
        continue
      }
      if (start >= 0) parts.push(out.slice(kept, start), hide(end - start))
      kept = start >= 0 ? end : kept
      start = s
      end = e
    }
    parts.push(out.slice(kept, start), hide(end - start), out.slice(end))
    out = parts.join('')
  }
  return out
}

/** Redacts `value` from now on wherever it appears; values shorter than 6 characters would redact ordinary words. */
export function addSecret(value: string | undefined): void {
  if (value && value.length >= 6) known.add(value)
}

function addComposite(value: string): void {
  known.add(value)
  composite.add(value)
}

/**
 * A webhook URL is a credential: the whole URL, its password, its query values and any path
 * segment that looks like a token (8+ characters with a digit, or 20+) are redacted wherever they
 * appear, also one by one, so a target that echoes only its path gives nothing away.
 */
export function addSecretUrl(value: string | undefined): void {
  if (!value) return
  addSecret(value)
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return
  }
  addSecret(url.href)
  if (url.username || url.password) {
    // What a client sends for them: Authorization: Basic base64(user:password), whatever their length.
    const decode = (part: string): string => {
      try {
        return decodeURIComponent(part)
      } catch {
        return part
      }
    }
    addComposite(`${decode(url.username)}:${decode(url.password)}`)
  }
  for (const part of [url.password, url.username]) {
    addSecret(part)
    try {
      addSecret(decodeURIComponent(part))
    } catch {
      // A malformed escape: the raw form is registered already.
    }
  }
  const tokenLike = (s: string): boolean => s.length >= 20 || (s.length >= 8 && /\d/.test(s))
  for (const segment of url.pathname.split('/')) if (tokenLike(segment)) addSecret(segment)
  for (const [, v] of url.searchParams) addSecret(v)
  if (url.pathname.length > 1 && url.pathname.split('/').some(tokenLike)) addComposite(url.pathname)
}

/** Query parameters that carry a credential in a URL that is otherwise no secret. */
const CREDENTIAL_PARAM = /^(?:password|passwd|pass|token|access_token|key|api_key|apikey|sig|signature|secret|client_secret|auth|sslpassword)$/i

function decoded(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

/**
 * A URL that names a place and may carry a credential (a store's postgres://user:PASSWORD@host/db, a
 * collector's https://user:PASSWORD@host, an OpenAI-compatible base URL): only the credential is
 * secret, its password (for HTTP also as `user:password`, what a client sends as Basic) and the values of
 * credential parameters (`?password=`), so the host, the user and the database stay readable.
 */
export function addSecretCredentials(value: string | undefined): void {
  if (!value || !value.includes('://')) return
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return
  }
  if (url.password) {
    addSecret(url.password)
    addSecret(decoded(url.password))
    // What an HTTP client sends for them (Basic); a database URL's user stays readable.
    if (/^https?:$/.test(url.protocol)) addComposite(`${decoded(url.username)}:${decoded(url.password)}`)
  }
  for (const [name, v] of url.searchParams) if (CREDENTIAL_PARAM.test(name)) addSecret(v)
}

/** OTLP headers (`Authorization=Bearer TOKEN,api-key=KEY`, URL-encoded values): every value is a credential. */
export function addSecretHeaders(value: string | undefined): void {
  if (!value) return
  for (const pair of value.split(',')) {
    const at = pair.indexOf('=')
    if (at < 0) continue
    const v = decoded(pair.slice(at + 1).trim())
    addSecret(v)
    // The token alone, as a tool that prints it without its scheme would show it.
    const scheme = /^(?:bearer|basic|token)\s+(.+)$/i.exec(v)
    if (scheme) addSecret(scheme[1])
  }
}

/** Environment variables whose URL may carry a credential, and those that hold credentials whatever their name. */
const CREDENTIAL_URL_ENV = ['PIPE_STORE', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OPENAI_BASE_URL']
const HEADERS_ENV = ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS']

/**
 * Registers what a process is given that is a credential, at its start, before anything is printed
 * or written: the passwords in the URLs of its environment (the store, the collector, the model
 * endpoint), the OTLP headers, PGPASSWORD, and a password in any URL of its arguments
 * (`--store postgres://user:PASSWORD@host/db`).
 */
export function addProcessSecrets(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): void {
  for (const name of CREDENTIAL_URL_ENV) addSecretCredentials(env[name])
  for (const name of HEADERS_ENV) addSecretHeaders(env[name])
  addSecret(env.PGPASSWORD)
  for (const arg of argv) if (arg.includes('://')) addSecretCredentials(arg.startsWith('--') ? arg.slice(arg.indexOf('=') + 1) : arg)
}

/**
 * Registers the values of the environment variables a config names in fields ending in `_env`
 * (a webhook's `url_env`, its `secret_env`): those values are secrets by construction, whatever the
 * variables are called.
 */
export function addSecretsNamedIn(config: unknown, env: NodeJS.ProcessEnv = process.env): void {
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit)
    else if (node && typeof node === 'object') {
      for (const [key, value] of Object.entries(node)) {
        if (key.endsWith('_env') && typeof value === 'string') addSecretUrl(env[value])
        else visit(value)
      }
    }
  }
  visit(config)
}

/** `token=...` and the like in free text (a note, a command line), not only in a URL's query. */
// A backslash ends a value too: in JSON text (a --json document on stdout) it starts an escape, which must be kept.
const WORD_SECRET = /((?:^|[\s"'(,;])(?:access_token|token|api_key|apikey|client_secret|secret|password|passwd)=)[^&#\s"'<>\\]+/gi

const QUERY_SECRET = /([?&;](?:access_token|token|key|api_key|apikey|sig|signature|secret|password|auth)=)[^&#\s"'<>\\]+/gi

/**
 * Whether a text could hold any of the shapes `redact` replaces: one pass over it, so that the many
 * strings of a record that hold none (ids, names, times, hashes) skip the dozen patterns below. Each
 * pattern has a part here: a URL's patterns need a user (`://` then `@` before any `/`), the query
 * and word patterns a credential's name just before `=`. Looser (any `://`, any `=`), a default
 * run's `file:///` refs and `==` expressions ran all the patterns (bench/README.md, "Issue 38: the
 * run path").
 */
const MAYBE_SHAPED =
  /authorization|sk-|gh[pousr]_|github_pat_|glpat-|AKIA|ASIA|xox[abprs]-|AIza|PRIVATE KEY|:\/\/[^\s/@"'<>]+@|hooks\.slack\.com|open\.(?:feishu|lark)|discord|(?:token|key|sig|signature|secret|passwd|password|auth)=/i

/** `redact` applied to every string inside a JSON-like value (safer than redacting its JSON text). */
export function redactDeep<T>(value: T): T {
  // The secrets are gathered once per call: reading process.env per string cost more than the redacting.
  return redactWith(value, secretValues())
}

/** The value itself when nothing in it changed (most records hold no secret): nothing is copied then. */
function redactWith<T>(value: T, secrets: Secrets): T {
  if (typeof value === 'string') return redact(value, secrets) as T
  if (Array.isArray(value)) {
    let out: unknown[] | undefined
    value.forEach((v: unknown, i) => {
      const r = redactWith(v, secrets)
      if (r !== v) (out ??= [...(value as unknown[])])[i] = r
    })
    return (out ?? value) as T
  }
  if (value && typeof value === 'object' && (value.constructor === Object || Object.getPrototypeOf(value) === null)) {
    let out: Record<string, unknown> | undefined
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const r = redactWith(v, secrets)
      if (r !== v) (out ??= {...(value as Record<string, unknown>)})[k] = r
    }
    return (out ?? value) as T
  }
  return value
}

/**
 * Redacts the fields of `record` in place: for a record a store changes through a callback
 * (RunStore.updateRun) and then seals as it is.
 */
export function redactInPlace(record: Record<string, unknown>): void {
  const secrets = secretValues()
  for (const [key, value] of Object.entries(record)) {
    const r = redactWith(value, secrets)
    if (r !== value) record[key] = r
  }
}

export function redact(text: string, secrets: Secrets = secretValues()): string {
  return redactAs(text, secrets, () => '[REDACTED]')
}

/** What masks a secret while positions must hold (redactBetween): a noncharacter, one per character hidden. */
const MASK = '\uffff'

/**
 * `text` redacted as the part of `before + text + after` it is: what was cut off on either side (a
 * command's output kept as its head and its tail) is in view, so a secret across either edge is
 * redacted too, however little of it lies inside.
 */
export function redactBetween(before: string, text: string, after: string): string {
  const masked = redactAs(before + text + after, secretValues(), (n) => MASK.repeat(Math.max(0, n)))
  return masked.slice(before.length, before.length + text.length).replace(/\uffff+/g, '[REDACTED]')
}

/** `hide(n)` stands for each n characters hidden: '[REDACTED]', or as many masks (redactBetween). */
function redactAs(text: string, secrets: Secrets, hide: (hidden: number) => string): string {
  let out = text
  for (const value of secrets.forms) if (out.includes(value)) out = out.split(value).join(hide(value.length))
  out = hideSlices(out, secrets.whole, hide)
  if (!MAYBE_SHAPED.test(out)) return out
  const whole = (m: string): string => hide(m.length)
  const after = (m: string, kept: string): string => kept + hide(m.length - kept.length)
  return (
    out
      // Also as JSON or a quoted header dump: "Authorization": "Basic ...".
      .replace(/(authorization["']?\s*[:=]\s*["']?)(bearer\s+|basic\s+)?[^\s"',}\\]+/gi, (m, a: string, b: string | undefined) => after(m, a + (b ?? '')))
      .replace(/\bsk-[A-Za-z0-9_-]{16,}\b/g, whole)
      // Credentials with a shape of their own, wherever they appear (a file shown to a model, a commit
      // message, a command's output): GitHub, GitLab, AWS access key ids, Slack, Google API keys, and a
      // private key block whole.
      .replace(/\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,})\b/g, whole)
      .replace(/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, whole)
      .replace(/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, whole)
      .replace(/\bAIza[0-9A-Za-z_-]{35}\b/g, whole)
      .replace(/-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g, (m, kind: string) => {
        const begin = `-----BEGIN ${kind}PRIVATE KEY-----`
        return `${begin} ${hide(m.length - begin.length - 1)}`
      })
      // A database URL's user names a role, not a secret: only its password is masked.
      .replace(/\b(postgres(?:ql)?:\/\/[^\s/@"'<>:]*):[^\s/@"'<>]+@/gi, (m, a: string) => `${a}:${hide(m.length - a.length - 2)}@`)
      // user:password@ in any other URL, and a user alone (a token given as the user: https://TOKEN@host).
      .replace(/\b(?!postgres(?:ql)?:\/\/)([a-z][a-z0-9+.-]*:\/\/)[^\s/@"'<>]+@/gi, (m, a: string) => `${a}${hide(m.length - a.length - 1)}@`)
      // Webhook URLs whose path is the credential.
      .replace(/(hooks\.slack\.com\/(?:services|workflows|triggers)\/)[^\s"'<>?#]+/gi, after)
      .replace(/(open\.(?:feishu\.cn|larksuite\.com|larkoffice\.com)\/open-apis\/bot\/v2\/hook\/)[^\s"'<>?#]+/gi, after)
      .replace(/(discord(?:app)?\.com\/api\/webhooks\/)[^\s"'<>?#]+/gi, after)
      .replace(QUERY_SECRET, after)
      .replace(WORD_SECRET, after)
  )
}
