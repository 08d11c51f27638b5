import * as Flags from '../../cli/flags.js'
import {DEFAULT_KEY_NAME, generateKey, type KeyInfo} from '../../app/attest/keys.js'
import {PipeCommand} from '../../cli/base-command.js'
import {line as t} from '../../util/terminal-text.js'

export default class KeysGenerate extends PipeCommand {
  static override summary = "Make an Ed25519 signing key pair for pipe attest in the user's config folder; the private key is never printed."
  static override description = `Writes NAME.key (the private key, PKCS#8 PEM, mode 0600) and NAME.pub (the public key, PEM) to $XDG_CONFIG_HOME/pipe/keys (default ~/.config/pipe/keys), and prints the key's id (sha256 of the raw 32-byte public key) and the entry to add to policy.yaml's attestation.trusted_keys so that others trust it. An existing key of that name is never replaced. The default key (or PIPE_SIGNING_KEY) also signs each decision its owner makes with pipe review, answer, confirm, budget and pipe view.

pipe attest signs with --key FILE, else PIPE_SIGNING_KEY (a path), else the key named ${DEFAULT_KEY_NAME}.`
  static override examples = [
    {description: 'The default key', command: '<%= config.bin %> <%= command.id %>'},
    {description: "A CI machine's key, as JSON", command: '<%= config.bin %> <%= command.id %> --name ci --json'},
  ]
  static override flags = {
    name: Flags.string({description: `The key's name: its files are NAME.key and NAME.pub.`, default: DEFAULT_KEY_NAME, helpValue: 'NAME'}),
  }

  async run(): Promise<KeyInfo> {
    const {flags} = await this.parse(KeysGenerate)
    const info = await generateKey(flags.name)
    if (!this.jsonEnabled()) {
      process.stdout.write(t`key ${info.name}  ${info.id}\n  private ${info.private_key_file} (mode 0600: keep it secret)\n  public  ${info.public_key_file}\n`)
      process.stdout.write(
        t`Trust it in policy.yaml:\nattestation:\n  trusted_keys:\n    - id: ${info.id}\n      name: ${info.name}\n      public_key: ${info.public_key}\n`,
      )
    }
    return info
  }
}
