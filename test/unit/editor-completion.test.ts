import {expect} from 'chai'
import path from 'node:path'
import {loadSchema} from '../../src/schema/registry.js'
import {repoRoot} from '../helpers/cli.js'
import {YamlLs, yamlLanguageServer} from '../helpers/yaml-ls.js'

let probes = 0

/** The completion an editor offers at the `|` of `text` (the modeline is added as line 0); each probe is a new document. */
async function completeAt(server: YamlLs, schema: string, text: string): Promise<string[]> {
  const withModeline = `# yaml-language-server: $schema=${path.join(repoRoot, 'schemas', schema)}\n${text}`
  const before = withModeline.slice(0, withModeline.indexOf('|')).split('\n')
  return server.completion(path.join(repoRoot, `completion-probe-${++probes}.yaml`), withModeline.replace('|', ''), before.length - 1, before.at(-1)!.length)
}

describe('editors complete pipelines from the schema (the real yaml-language-server over LSP)', function () {
  const command = yamlLanguageServer()
  let server: YamlLs
  before(async function () {
    if (!command) {
      // Skipped, not failed: .mocharc.cjs has said so once at the start, with the command that installs it.
      this.skip()
    }
    server = new YamlLs(command)
    await server.start()
  })
  after(() => server?.stop())

  it('kind: lists every step kind, not only those whose required fields happen to be present', async () => {
    const schema = loadSchema('pipeline') as {definitions: Record<string, {properties?: {kind?: {const?: string}}}>}
    const kinds = Object.values(schema.definitions).flatMap((d) => (typeof d.properties?.kind?.const === 'string' ? [d.properties.kind.const] : []))
    expect(kinds.length).to.be.greaterThan(15)
    const labels = await completeAt(server, 'pipeline.schema.json', 'version: 1\nname: x\nsteps:\n  - id: a\n    kind: |\n')
    expect([...labels].sort()).to.deep.equal([...kinds].sort())
  })

  it("a step's keys list the common fields and the kind's own", async () => {
    const labels = await completeAt(server, 'pipeline.schema.json', 'version: 1\nname: x\nsteps:\n  - id: a\n    kind: command\n    |\n')
    expect(labels).to.include.members(['next', 'on', 'when', 'retry', 'timeout_ms', 'run', 'parse', 'env'])
    expect(labels).not.to.include.members(['prompt', 'items'])
  })

  it('policy.yaml keys still complete', async () => {
    const labels = await completeAt(server, 'policy.schema.json', 'version: 1\n|\n')
    expect(labels).to.include.members(['allowed_commands', 'forbidden_paths', 'resource_limits', 'sandbox'])
  })
})
