/**
 * A PostgreSQL store URL checked before pg sees it: pg parses it with WHATWG URL and
 * decodeURIComponent, whose errors ("Invalid URL", "URI malformed") say neither which part is
 * wrong nor that it is the user's to fix. Messages never quote the URL: it may hold a password.
 */
import {PipeError} from '../../errors.js'

const SHAPE = 'A store URL is postgres:// followed by USER@HOST:PORT/DATABASE (a password as USER:PASSWORD@, or in ~/.pgpass).'

const bad = (what: string, fix: string): PipeError => new PipeError('E_CONFIG', `the store URL ${what}`, {hint: `${fix} ${SHAPE}`})

/** Throws E_CONFIG naming what is wrong with a postgres:// URL, or returns. */
export function checkStoreUrl(url: string): void {
  // The authority (between :// and the next /, ? or #); userinfo ends at its last @.
  const authority = /^[a-z]+:\/\/([^/?#]*)/i.exec(url)?.[1] ?? ''
  const hostPort = authority.slice(authority.lastIndexOf('@') + 1)
  if (hostPort.startsWith('[') && !hostPort.includes(']'))
    throw bad('has an IPv6 host without its closing ] and is not a valid URL', 'Write an IPv6 host in brackets with the port after them: [::1]:5432.')
  const port = /^(?:\[[^\]]*\]|[^:]*):(.*)$/.exec(hostPort)?.[1]
  if (port !== undefined && port !== '' && !(/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535))
    throw bad(`names port ${/^\d{1,12}$/.test(port) ? port : '(not a number)'}, which is not one (1-65535)`, 'Correct the port.')
  // pg escapes a % that starts no escape itself, except at the very end, where decoding then fails.
  let text = url
  if (/ |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(text)) text = encodeURI(text).replace(/%25(\d\d)/g, '%$1')
  let parsed: URL
  try {
    parsed = new URL(text.replace('@/', '@localhost/'))
  } catch {
    throw bad('is not a valid URL', 'Check its punctuation; characters such as @ : / ? # in a password are written %40 %3A %2F %3F %23.')
  }
  for (const part of [parsed.username, parsed.password, parsed.hostname, parsed.pathname]) {
    try {
      decodeURIComponent(part)
    } catch {
      throw bad('holds a % that is not followed by two hex digits, or an escape that is not UTF-8', 'Write a % in a password or a name as %25.')
    }
  }
}

/**
 * node-postgres 8 treats sslmode prefer, require and verify-ca as verify-full (the server's
 * certificate and name are checked) and warns on stderr at every connection that version 9 will
 * not. pipe keeps today's stronger meaning and says so in docs/team.md: the URL given to the client
 * names it, so the warning (a note to the library's programmers) is not printed to pipe's users.
 * `uselibpqcompat=true` asks for libpq's meanings and is left as it is.
 */
export function verifiedSsl(url: string): string {
  if (/[?&]uselibpqcompat=true(?:&|$)/.test(url)) return url
  return url.replace(/([?&]sslmode=)(?:prefer|require|verify-ca)(?=&|$)/, '$1verify-full')
}
