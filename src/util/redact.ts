/** Keeps secrets out of snapshots, logs and the terminal. */

const SECRET_ENV = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)/i

/** Values this process was told are secret (webhook URLs and their parts), whatever their variable is named. */
const known = new Set<string>()

/**
 * The forms a secret takes in what a target or a tool echoes back: as it is, base64 (a Basic
 * Authorization header, a token in a config dump; with and without padding, and base64url),
 * URL-encoded (a query value, a redirect) and JSON-escaped (a body that quotes it). Each form is
 * redacted like the value itself.
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

function secretValues(): string[] {
  const fromEnv = Object.entries(process.env)
    .filter(([name, value]) => SECRET_ENV.test(name) && typeof value === 'string' && value.length >= 8)
    .map(([, value]) => value as string)
  // Longest first, so a whole URL is replaced before the token inside it.
  return [...new Set([...fromEnv, ...known].flatMap(encodingsOf))].sort((a, b) => b.length - a.length)
}

/** Redacts `value` from now on wherever it appears; values shorter than 6 characters would redact ordinary words. */
export function addSecret(value: string | undefined): void {
  if (value && value.length >= 6) known.add(value)
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
    known.add(`${decode(url.username)}:${decode(url.password)}`)
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
  if (url.pathname.length > 1 && url.pathname.split('/').some(tokenLike)) addSecret(url.pathname)
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
const WORD_SECRET = /((?:^|[\s"'(,;])(?:access_token|token|api_key|apikey|client_secret|secret|password|passwd)=)[^&#\s"'<>]+/gi

const QUERY_SECRET = /([?&;](?:access_token|token|key|api_key|apikey|sig|signature|secret|password|auth)=)[^&#\s"'<>]+/gi

/** `redact` applied to every string inside a JSON-like value (safer than redacting its JSON text). */
export function redactDeep<T>(value: T): T {
  // The secrets are gathered once per call: reading process.env per string cost more than the redacting.
  return redactWith(value, secretValues())
}

function redactWith<T>(value: T, secrets: readonly string[]): T {
  if (typeof value === 'string') return redact(value, secrets) as T
  if (Array.isArray(value)) return (value as unknown[]).map((v) => redactWith(v, secrets)) as T
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactWith(v, secrets)])) as T
  return value
}

export function redact(text: string, secrets: readonly string[] = secretValues()): string {
  let out = text
  for (const value of secrets) if (out.includes(value)) out = out.split(value).join('[REDACTED]')
  return (
    out
      // Also as JSON or a quoted header dump: "Authorization": "Basic ...".
      .replace(/(authorization["']?\s*[:=]\s*["']?)(bearer\s+|basic\s+)?[^\s"',}]+/gi, '$1$2[REDACTED]')
      .replace(/\bsk-[A-Za-z0-9_-]{16,}\b/g, '[REDACTED]')
      // Credentials with a shape of their own, wherever they appear (a file shown to a model, a commit
      // message, a command's output): GitHub, GitLab, AWS access key ids, Slack, Google API keys, and a
      // private key block whole.
      .replace(/\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,})\b/g, '[REDACTED]')
      .replace(/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, '[REDACTED]')
      .replace(/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, '[REDACTED]')
      .replace(/\bAIza[0-9A-Za-z_-]{35}\b/g, '[REDACTED]')
      .replace(/-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g, '-----BEGIN $1PRIVATE KEY----- [REDACTED]')
      // user:password@ in any URL.
      .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@"'<>]+@/gi, '$1[REDACTED]@')
      // Webhook URLs whose path is the credential.
      .replace(/(hooks\.slack\.com\/(?:services|workflows|triggers)\/)[^\s"'<>?#]+/gi, '$1[REDACTED]')
      .replace(/(open\.(?:feishu\.cn|larksuite\.com|larkoffice\.com)\/open-apis\/bot\/v2\/hook\/)[^\s"'<>?#]+/gi, '$1[REDACTED]')
      .replace(/(discord(?:app)?\.com\/api\/webhooks\/)[^\s"'<>?#]+/gi, '$1[REDACTED]')
      .replace(QUERY_SECRET, '$1[REDACTED]')
      .replace(WORD_SECRET, '$1[REDACTED]')
  )
}
