/** Renders a spec version as Markdown, for publishing and for people reading it in a terminal. */
import type {CanonicalSpec} from '../types/spec.js'

function list<T>(items: T[], line: (item: T) => string): string {
  return items.length === 0 ? '_None._\n' : `${items.map((item) => `- ${line(item)}`).join('\n')}\n`
}

export function specToMarkdown(spec: CanonicalSpec): string {
  const m = spec.meta
  const out: string[] = []
  out.push(`# ${m.title ?? m.feature_id}\n`)
  out.push(
    `| field | value |\n|---|---|\n| feature | ${m.feature_id} |\n| version | ${m.spec_version} |\n| status | ${m.status} |\n| parent | ${m.parent_version ?? '-'} |\n| run | ${m.run_id} |\n| content hash | \`${m.content_hash}\` |\n`,
  )
  out.push(`## Goal\n\n${spec.goal || '_Not stated._'}\n`)
  out.push(
    `## Features\n\n${list(spec.features, (f) => `**${f.id}** [${f.priority}] ${f.title}${f.description && f.description !== f.title ? ` — ${f.description}` : ''}`)}`,
  )
  out.push(`## Constraints\n\n${list(spec.constraints, (c) => `**${c.id}** ${c.text}`)}`)
  out.push(`## Non-functional requirements\n\n${list(spec.non_functional, (n) => `**${n.id}** (${n.category}) ${n.text}`)}`)
  out.push(`## Acceptance criteria\n\n${list(spec.acceptance_criteria, (a) => `**${a.id}** ${a.text}`)}`)
  if (spec.open_questions.length > 0) {
    out.push(
      `## Questions\n\n${list(spec.open_questions, (q) => `**${q.id}** (${q.status}) ${q.question}${q.answer ? `\n  - Answer: ${q.answer.replace(/\n+/g, ' / ')}` : ''}`)}`,
    )
  }
  out.push(
    `## Tasks\n\n${list(spec.tasks, (t) => {
      const dod = t.acceptance_tests.expected_signals.map((s) => `    - ${s}`).join('\n')
      const deps = t.depends_on && t.depends_on.length > 0 ? ` (after ${t.depends_on.join(', ')})` : ''
      return `**${t.id}** [${t.type}${t.priority ? `, ${t.priority}` : ''}] ${t.title}${deps}\n  - Done when:\n${dod}`
    })}`,
  )
  out.push(
    `## Verification and validation\n\n${list(spec.vv, (v) => `**${v.id}** ${v.kind}/${v.method}: ${v.description}${v.acceptance_criteria.length ? ` (${v.acceptance_criteria.join(', ')})` : ''}`)}`,
  )
  // Sections written by model steps (spec_path): their shape is the pipeline's own, so they are shown as JSON.
  for (const [name, value] of Object.entries(spec.sections ?? {})) out.push(`## ${name}\n\n\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\`\n`)
  return out.join('\n')
}
