/**
 * Every relative link of README.md, the chapters of docs/, bench/README.md and the examples' READMEs
 * leads somewhere: the file exists, and a `#heading` is a heading of that file (as GitHub makes
 * anchors of headings).
 * Moving text between chapters is how a link breaks silently; this makes it break here instead.
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {repoRoot} from '../helpers/cli.js'

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replaceAll(' ', '-')
}

/** Text outside fenced code blocks (a link or heading inside one is an example, not a link). */
function prose(text: string): string[] {
  const out: string[] = []
  let fenced = false
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced
    else if (!fenced) out.push(line)
  }
  return out
}

function anchors(text: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const line of prose(text)) {
    const heading = /^#{1,6} (.*)$/.exec(line)?.[1]
    if (heading === undefined) continue
    const base = slug(heading)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

describe("the links between README.md, docs/, bench/README.md and the examples' READMEs", () => {
  it('each lead to a file that exists and, with a #heading, to a heading it has', async () => {
    const chapters = (await readdir(path.join(repoRoot, 'docs'))).filter((f) => f.endsWith('.md'))
    const examples = (await readdir(path.join(repoRoot, 'examples'), {withFileTypes: true})).filter(
      (e) => e.isDirectory() && existsSync(path.join(repoRoot, 'examples', e.name, 'README.md')),
    )
    const files = ['README.md', 'bench/README.md', ...chapters.map((f) => `docs/${f}`), ...examples.map((e) => `examples/${e.name}/README.md`)]
    const problems: string[] = []
    let checked = 0
    for (const file of files) {
      const lines = prose(await readFile(path.join(repoRoot, file), 'utf8'))
      for (const line of lines) {
        for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          if (/^[a-z][a-z+.-]*:/i.test(target!)) continue // https:, mailto:
          checked++
          const [rel, anchor] = target!.split('#', 2) as [string, string | undefined]
          const resolved = rel === '' ? path.join(repoRoot, file) : path.resolve(repoRoot, path.dirname(file), rel)
          if (!existsSync(resolved)) {
            problems.push(`${file}: ${target} (no file ${path.relative(repoRoot, resolved)})`)
            continue
          }
          if (anchor !== undefined && resolved.endsWith('.md') && !anchors(await readFile(resolved, 'utf8')).has(anchor)) {
            problems.push(`${file}: ${target} (${path.relative(repoRoot, resolved)} has no heading #${anchor})`)
          }
        }
      }
    }
    expect(checked, 'links found').to.be.greaterThan(80)
    expect(problems).to.deep.equal([])
  })

  it('makes the anchors GitHub makes', () => {
    expect(slug('`pipe spec show|list|diff`')).to.equal('pipe-spec-showlistdiff')
    expect(slug('Writing pipelines (v2)')).to.equal('writing-pipelines-v2')
    expect(slug('policy.yaml')).to.equal('policyyaml')
    expect(slug('`pipe policy check [FILE]`, `pipe policy init` and `pipe policy explain`')).to.equal(
      'pipe-policy-check-file-pipe-policy-init-and-pipe-policy-explain',
    )
  })
})
