/**
 * The layers docs/development.md documents are the ones eslint enforces (eslint.config.js LAYERS):
 * every folder of src/ is in both, and each folder is forbidden every folder on a line above it.
 */
import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {repoRoot} from '../helpers/cli.js'

/** The documented layers, top first: each line of the fenced block after "Dependencies point one way", as folder names ('.' for src/*.ts). */
async function documentedLayers(): Promise<string[][]> {
  const text = await readFile(path.join(repoRoot, 'docs', 'development.md'), 'utf8')
  const block = /Dependencies point one way[^\n]*\n+```text\n([\s\S]*?)```/.exec(text)?.[1]
  if (!block) throw new Error('docs/development.md has no layer block after "Dependencies point one way"')
  return block
    .trim()
    .split('\n')
    .map((line) => [...line.matchAll(/src\/(\*\.ts|[a-z-]+\/)/g)].map((m) => (m[1] === '*.ts' ? '.' : m[1]!.slice(0, -1))))
}

describe('layers: docs/development.md and eslint.config.js agree', () => {
  it('name every folder of src/, and forbid each folder every folder on a line above it', async () => {
    const {LAYERS} = (await import(path.join(repoRoot, 'eslint.config.js'))) as {LAYERS: Record<string, string[]>}
    const folders = (await readdir(path.join(repoRoot, 'src'), {withFileTypes: true})).filter((e) => e.isDirectory()).map((e) => e.name)
    const layers = await documentedLayers()
    const documented = layers.flat()
    expect([...documented].sort(), 'the documented folders are the ones eslint has rules for').to.deep.equal(Object.keys(LAYERS).sort())
    expect(
      Object.keys(LAYERS)
        .filter((f) => f !== '.')
        .sort(),
      'eslint has rules for every folder of src/',
    ).to.deep.equal([...folders].sort())
    const wrong: string[] = []
    layers.forEach((line, i) => {
      const above = layers.slice(0, i).flat()
      for (const folder of line) {
        const allowed = above.filter((up) => !LAYERS[folder]!.includes(up))
        if (allowed.length > 0) wrong.push(`${folder} may import ${allowed.join(', ')}, documented above it`)
      }
    })
    expect(wrong).to.deep.equal([])
  })

  it('point the lint messages at docs/development.md, a file the project has', async () => {
    const config = await readFile(path.join(repoRoot, 'eslint.config.js'), 'utf8')
    expect(config).not.to.match(/DESIGN\.md/)
    expect(config).to.include('docs/development.md')
  })
})
