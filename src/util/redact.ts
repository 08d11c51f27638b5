/** Keeps secrets out of snapshots, logs and the terminal. */

const SECRET_ENV = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)/i

function secretValues(): string[] {
  return Object.entries(process.env)
    .filter(([name, value]) => SECRET_ENV.test(name) && typeof value === 'string' && value.length >= 8)
    .map(([, value]) => value as string)
}

export function redact(text: string): string {
  let out = text
  for (const value of secretValues()) out = out.split(value).join('[REDACTED]')
  return out
    .replace(/(authorization\s*[:=]\s*)(bearer\s+)?[^\s"',}]+/gi, '$1$2[REDACTED]')
    .replace(/\bsk-[A-Za-z0-9_-]{16,}\b/g, '[REDACTED]')
}
