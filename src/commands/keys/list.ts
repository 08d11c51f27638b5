import {keysDir, listKeys, type KeyInfo} from '../../app/attest/keys.js'
import {PipeCommand} from '../../cli/base-command.js'
import {line as t} from '../../util/terminal-text.js'

export default class KeysList extends PipeCommand {
  static override summary = "List the signing keys in the user's config folder: name, id and public key (never a private key)."
  static override examples = [
    {description: 'Every key', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'The entries for policy.yaml, as JSON', command: '<%= config.bin %> <%= command.id %> --json'},
  ]

  async run(): Promise<KeyInfo[]> {
    await this.parse(KeysList)
    const {keys, warnings} = await listKeys()
    for (const w of warnings) process.stderr.write(t`warning: ${w}\n`)
    if (!this.jsonEnabled()) {
      if (keys.length === 0) process.stderr.write(t`no keys in ${keysDir()}; make one with pipe keys generate\n`)
      for (const k of keys) process.stdout.write(t`${k.name}  ${k.id}  ${k.public_key}\n`)
    }
    return keys
  }
}
