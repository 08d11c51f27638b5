/**
 * Signing keys for attestations: Ed25519 key pairs from node:crypto, kept in the user's config folder
 * ($XDG_CONFIG_HOME/pipe/keys, else ~/.config/pipe/keys) as NAME.key (PKCS#8 PEM, mode 0600) and
 * NAME.pub (SPKI PEM). A machine or worker names its key file with PIPE_SIGNING_KEY.
 */
import * as crypto from 'node:crypto'
import {constants} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {keyIdOf, rawPublicKey} from '../../util/dsse.js'
import {makeDirs} from '../../util/fs.js'
import {open, readdir, readFile, stat, unlink} from '../../util/fs-async.js'

export const DEFAULT_KEY_NAME = 'default'
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

export function keysDir(env: NodeJS.ProcessEnv = process.env): string {
  // XDG says a relative XDG_CONFIG_HOME is invalid and to be ignored.
  const xdg = env.XDG_CONFIG_HOME
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.config')
  return path.join(base, 'pipe', 'keys')
}

export interface KeyInfo {
  name: string
  /** sha256 of the raw 32-byte Ed25519 public key, `sha256:HEX`. */
  id: string
  /** The raw 32-byte public key, base64: what policy.yaml's attestation.trusted_keys holds. */
  public_key: string
  private_key_file: string
  public_key_file: string
}

function infoOf(name: string, publicKey: crypto.KeyObject, dir: string): KeyInfo {
  return {
    name,
    id: keyIdOf(publicKey),
    public_key: rawPublicKey(publicKey).toString('base64'),
    private_key_file: path.join(dir, `${name}.key`),
    public_key_file: path.join(dir, `${name}.pub`),
  }
}

export async function generateKey(name: string = DEFAULT_KEY_NAME): Promise<KeyInfo> {
  if (!NAME.test(name))
    throw new PipeError('E_INVALID_ARGS', `--name ${JSON.stringify(name)} is not a key name`, {
      hint: 'A key name is letters, digits, dots, dashes and underscores, starting with a letter or digit (at most 64), e.g. --name ci.',
    })
  const dir = keysDir()
  makeDirs(dir, 0o700)
  const {publicKey, privateKey} = crypto.generateKeyPairSync('ed25519')
  const info = infoOf(name, publicKey, dir)
  // Created exclusively with its mode: the private key is never readable by others, not even for a moment, and an existing key is never replaced.
  const created = await writeExclusive(info.private_key_file, privateKey.export({type: 'pkcs8', format: 'pem'}) as string, 0o600).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST')
        throw new PipeError('E_CONFLICT', `a key named ${name} already exists (${info.private_key_file})`, {
          hint: `Keep it (pipe keys list shows its id), or make another with pipe keys generate --name ${name}-2.`,
        })
      throw new PipeError('E_IO', `cannot write ${info.private_key_file}: ${error.message}`, {
        hint: 'Check that the folder is writable, or set XDG_CONFIG_HOME.',
      })
    },
  )
  try {
    await writeExclusive(info.public_key_file, publicKey.export({type: 'spki', format: 'pem'}) as string, 0o644)
  } catch (error) {
    // Half a key pair would block the name for good: remove the private key this call made.
    await unlink(created)
    throw new PipeError('E_IO', `cannot write ${info.public_key_file}: ${(error as Error).message}`, {
      hint: 'Remove the file that is in the way and run pipe keys generate again.',
    })
  }
  return info
}

async function writeExclusive(file: string, text: string, mode: number): Promise<string> {
  const handle = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode)
  try {
    await handle.writeFile(text)
    await handle.sync()
  } finally {
    await handle.close()
  }
  return file
}

/**
 * The keys of the config folder, and what is wrong with the others there: a .key file pipe cannot
 * sign with was left out without a word (a key that seemed lost), and a private key others may
 * read is one to know about.
 */
export async function listKeys(): Promise<{keys: KeyInfo[]; warnings: string[]}> {
  const dir = keysDir()
  const names = await readdir(dir).catch(() => [] as string[])
  const keys: KeyInfo[] = []
  const warnings: string[] = []
  for (const file of names.filter((n) => n.endsWith('.key')).sort()) {
    const name = file.slice(0, -'.key'.length)
    const full = path.join(dir, file)
    const key = await readPrivateKey(full).catch((error: unknown) => {
      warnings.push(`${full} is not listed: it is not an Ed25519 private key pipe attest can sign with (${(error as Error).message.split('\n')[0]})`)
      return null
    })
    if (!key) continue
    keys.push(infoOf(name, crypto.createPublicKey(key), dir))
    const mode = (await stat(full)).mode & 0o777
    if ((mode & 0o077) !== 0) warnings.push(`${full} can be read by others (mode 0${mode.toString(8)}): a private key is for its owner only; chmod 600 ${full}`)
  }
  return {keys, warnings}
}

async function readPrivateKey(file: string): Promise<crypto.KeyObject> {
  const key = crypto.createPrivateKey(await readFile(file))
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`is a ${key.asymmetricKeyType} key, not Ed25519`)
  return key
}

/** The signing key: --key, else PIPE_SIGNING_KEY, else the default key of the config folder. */
export async function loadSigningKey(flag: string | undefined): Promise<{key: crypto.KeyObject; id: string; file: string}> {
  const file = flag ?? process.env.PIPE_SIGNING_KEY ?? path.join(keysDir(), `${DEFAULT_KEY_NAME}.key`)
  const from = flag !== undefined ? '--key' : process.env.PIPE_SIGNING_KEY !== undefined ? 'PIPE_SIGNING_KEY' : 'the default key'
  let key: crypto.KeyObject
  try {
    key = await readPrivateKey(file)
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT'
    throw new PipeError(
      missing ? 'E_NOT_FOUND' : 'E_INVALID_ARGS',
      missing ? `no signing key at ${file} (${from})` : `${file} (${from}) is not an Ed25519 private key: ${(error as Error).message}`,
      {
        hint: missing
          ? 'Make one with pipe keys generate (it prints the entry to add to policy.yaml so others trust it), or point --key or PIPE_SIGNING_KEY at a key file.'
          : 'Give the NAME.key file pipe keys generate wrote (PKCS#8 PEM), not its .pub.',
      },
    )
  }
  return {key, id: keyIdOf(crypto.createPublicKey(key)), file}
}

export interface DecisionKey {
  key: crypto.KeyObject
  id: string
  file: string
}

/**
 * The key a person's decisions are signed with: PIPE_SIGNING_KEY, else the default key when
 * `pipe keys generate` made one; null when there is none (the decision is recorded unsigned). A key
 * named but unreadable or not Ed25519 stops the decision before anything is recorded: a decision
 * meant to be signed is never recorded unsigned.
 */
export async function decisionKey(env: NodeJS.ProcessEnv = process.env): Promise<DecisionKey | null> {
  const named = env.PIPE_SIGNING_KEY
  const file = named ?? path.join(keysDir(env), `${DEFAULT_KEY_NAME}.key`)
  let text: Buffer
  try {
    text = await readFile(file)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (named === undefined && code === 'ENOENT') return null
    throw new PipeError(
      'E_IO',
      `cannot read the signing key ${file} (${named !== undefined ? 'PIPE_SIGNING_KEY' : 'the default key'}): ${(error as Error).message}`,
      {
        hint:
          named !== undefined
            ? 'Point PIPE_SIGNING_KEY at the NAME.key file pipe keys generate wrote, or unset it; nothing was recorded.'
            : 'Make the file readable by you (chmod 600), or move it away to decide unsigned; nothing was recorded.',
      },
    )
  }
  let key: crypto.KeyObject
  try {
    key = crypto.createPrivateKey(text)
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`it is a ${key.asymmetricKeyType} key, not Ed25519`)
  } catch (error) {
    throw new PipeError('E_CONFIG', `the signing key ${file} is not an Ed25519 private key: ${(error as Error).message}`, {
      hint: 'Give the NAME.key file pipe keys generate wrote (PKCS#8 PEM), not its .pub; nothing was recorded.',
    })
  }
  return {key, id: keyIdOf(crypto.createPublicKey(key)), file}
}
