/** Human views of stored records. `--json` prints the records themselves; these are for people. */
import {stringify} from 'yaml'
import {formatDiagnostic, type Diagnostic} from '../config/diagnostics.js'
import type {GateResult} from '../gates/evaluate.js'
import type {RunPlan} from '../app/sessions/plan.js'
import {views} from '../steps/registry.js'
import type {RunSummary, SpecSummary} from '../store/queries.js'
import type {RunEvent, RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import {line as t, visible, visibleLine} from '../util/terminal-text.js'

/** Columns of one-line cells; a cell's text is shown escaped (see terminal-text.ts), and measured so. */
/** Diagnostics, a line each, for the terminal: they quote the files they are about, so shown escaped. */
export function renderDiagnostics(diagnostics: readonly Diagnostic[]): string {
  return visible(diagnostics.map((d) => `${formatDiagnostic(d)}\n`).join(''))
}

export function table(cells: string[][]): string {
  if (cells.length === 0) return ''
  const rows = cells.map((r) => r.map(visibleLine))
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => [...(r[i] ?? '')].length)))
  return `${rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n')}\n`
}

function clip(value: unknown, max = 300): unknown {
  if (typeof value === 'string') return value.length > max ? `${value.slice(0, max)}… (${value.length} chars)` : value
  if (Array.isArray(value)) return value.map((v) => clip(v, max))
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clip(v, max)]))
  return value
}

function indentYaml(value: unknown): string {
  // yaml writes C0 controls as escapes itself, but not DEL, C1 or bidi controls.
  const text = visible(stringify(clip(value), {lineWidth: 110}).trimEnd())
  return text === '{}' || text === '[]' ? '    (none)' : text.replace(/^/gm, '    ')
}

/** A foreach child's item: ` item 2 (fix-login)`, by index and, when the item has one, its key. */
function itemLabel(parent: NonNullable<RunRecord['parent']>): string {
  if (parent.index === undefined) return ''
  return ` item ${parent.index}${parent.key !== undefined ? ` (${parent.key})` : ''}`
}

export function renderRunList(runs: RunSummary[]): string {
  if (runs.length === 0) return 'no runs\n'
  // Child runs are indented under their parent, labelled with the step (and item) that started them.
  const rows = (list: RunSummary[], depth: number): string[][] =>
    list.flatMap((r) => [
      [
        `${'  '.repeat(depth)}${depth > 0 ? '└ ' : ''}${r.run_id}`,
        r.status,
        r.feature_id,
        r.spec_version ?? '-',
        `${r.pipeline}${depth > 0 && r.parent ? ` (${r.parent.step}${r.parent.index !== undefined ? `[${r.parent.index}]` : ''}${r.parent.key !== undefined ? ` ${r.parent.key}` : ''})` : ''}`,
        r.updated_at,
        ...(stepping ? [r.current_step ? `${r.current_step.step} (#${r.current_step.seq})` : ''] : []),
        ...(held ? [r.worker ?? ''] : []),
      ],
      ...rows(r.children ?? [], depth + 1),
    ])
  // The WORKER column is there only when a worker holds some run (a shared store), so a folder store's list is unchanged.
  const anyHeld = (list: RunSummary[]): boolean => list.some((r) => r.worker !== undefined || anyHeld(r.children ?? []))
  const held = anyHeld(runs)
  // Likewise the STEP column: there only when some run is in a step, so a list of ended runs reads as before.
  const anyStep = (list: RunSummary[]): boolean => list.some((r) => r.current_step !== undefined || anyStep(r.children ?? []))
  const stepping = anyStep(runs)
  return table([['RUN', 'STATUS', 'FEATURE', 'SPEC', 'PIPELINE', 'UPDATED', ...(stepping ? ['STEP'] : []), ...(held ? ['WORKER'] : [])], ...rows(runs, 0)])
}

export function renderSnapshotList(snapshots: Snapshot[]): string {
  if (snapshots.length === 0) return 'no snapshots\n'
  return table([
    ['SEQ', 'STEP', 'KIND', 'OUTCOME', 'NEXT', 'SPEC IN', 'SPEC OUT', 'MS', 'ERRORS'],
    ...snapshots.map((s) => {
      const d = s.decisions.at(-1)
      return [
        String(s.step.seq),
        s.step.name,
        s.step.kind,
        d?.decision ?? '-',
        d?.next_step ?? '(end)',
        s.spec_version_in ?? '-',
        s.spec_version_out ?? '-',
        String(s.step.duration_ms ?? ''),
        String(s.errors.length),
      ]
    }),
  ])
}

function renderGate(result: GateResult): string[] {
  const lines: string[] = []
  for (const [name, value] of Object.entries(result)) {
    if (!value || typeof value !== 'object' || Array.isArray(value)) continue
    const gate = value
    lines.push(t`    ${name.padEnd(10)} ${gate.pass ? 'pass' : 'FAIL'}${gate.missing_fields.length ? `  missing: ${gate.missing_fields.join(', ')}` : ''}`)
    for (const failure of gate.failed_rules ?? []) lines.push(t`      rule ${failure.rule}: ${failure.message}`)
  }
  if (result.completeness_score !== undefined) lines.push(t`    completeness ${result.completeness_score} (threshold ${result.completeness_threshold})`)
  lines.push(`    overall    ${result.pass ? 'pass' : 'FAIL'}`)
  return lines
}

/** What a snapshot's context_ref names, on one line: the repository context it read (or gathered) and the run's project context ref. */
function contextLine(ref: NonNullable<Snapshot['inputs']['context_ref']>): string {
  const parts: string[] = []
  if (ref.hash) {
    const where = `step ${ref.step ?? '?'}${ref.seq !== undefined ? ` #${ref.seq}` : ''}`
    parts.push(
      `repository context ${ref.evidence_id ? `${ref.evidence_id} ` : ''}${ref.hash} (${ref.bytes ?? '?'} bytes, ${where})${ref.also?.length ? ` and ${ref.also.length} more` : ''}`,
    )
  }
  if (ref.project) parts.push(`project ${ref.project.project_id}@${ref.project.context_version}`)
  return parts.join('; ')
}

export function renderSnapshot(s: Snapshot): string {
  const lines: string[] = []
  lines.push(t`#${s.step.seq} ${s.step.name} (${s.step.kind})  iteration ${s.step.iteration ?? 1}, ${s.step.attempts ?? 1} attempt(s)`)
  lines.push(t`  run ${s.run_id}  feature ${s.feature_id}  spec ${s.spec_version_in ?? '-'} -> ${s.spec_version_out ?? '-'}`)
  lines.push(t`  started ${s.step.started_at}  ended ${s.step.ended_at}  (${s.step.duration_ms ?? '?'} ms)`)
  lines.push('  inputs:', indentYaml(s.inputs))
  // A gate result has its own view below.
  const gateResult = views.gate.result
  const gate = gateResult.of(s)
  const outputs = Object.fromEntries(Object.entries(s.outputs as Record<string, unknown>).filter(([key]) => key !== gateResult.key))
  lines.push('  outputs:', indentYaml(outputs))
  if (gate) lines.push('  gate results:', ...renderGate(gate))
  lines.push('  decisions:')
  for (const d of s.decisions) {
    const who = d.by ? ` (by ${d.by} at ${d.at}${d.note ? `, note: ${d.note}` : ''})` : ''
    lines.push(t`    ${d.decision} -> ${d.next_step ?? '(end)'}: ${d.reason}${who}`)
  }
  const context = s.inputs.context_ref
  if (context) lines.push(t`  context: ${contextLine(context)}`)
  lines.push(t`  evidence: ${s.evidence_links.length ? s.evidence_links.map((e) => `${e.evidence_id} (${e.type})`).join(', ') : 'none'}`)
  if (s.errors.length === 0) lines.push('  errors: none')
  else {
    lines.push('  errors:')
    // A message may span lines (a list of diagnostics): its line breaks stay, every other control is escaped.
    for (const e of s.errors)
      lines.push(
        `${t`    [${e.code}] attempt ${e.attempt ?? 1}${e.retryable ? ' (retryable)' : ''}: `}${visible(e.message)}`,
        ...(e.hint ? [t`      hint: ${e.hint}`] : []),
        ...(e.trace_id ? [t`      trace: ${e.trace_id}`] : []),
      )
  }
  const m = s.meta
  lines.push(t`  meta: ${m.engine_version}, provider ${m.provider ?? '-'}, model ${m.llm_model ?? '-'}, pipeline ${m.pipeline ?? '-'}`)
  if (m.model_calls && m.model_calls.length > 0) {
    const by = ['live', 'cassette', 'cache']
      .map((source) => [source, m.model_calls!.filter((c) => c.source === source).length] as const)
      .filter(([, n]) => n > 0)
    lines.push(t`        model calls ${m.model_calls.length}: ${by.map(([source, n]) => `${n} ${source}`).join(', ')}`)
  }
  lines.push(t`        policy ${m.policy_version ?? '-'}`)
  lines.push(t`        hash ${m.record_hash ?? '-'} (previous ${m.prev_hash ?? 'none'})`)
  return visible(`${lines.join('\n')}\n`)
}

/** A worker as pipe runs show names it: its --name, then where it runs. */
export function workerLabel(w: {host: string; pid: number; name?: string}): string {
  return `${w.name ? `worker ${w.name} ` : ''}(host ${w.host}, pid ${w.pid})`
}

export function renderRunShow(record: RunRecord, status: RunRecord['status'], events: RunEvent[], snapshots: Snapshot[], children: RunSummary[] = []): string {
  const lines: string[] = []
  lines.push(t`run ${record.run_id}  ${status}${status !== record.status ? ` (recorded as ${record.status}; its process is gone)` : ''}`)
  lines.push(t`  feature ${record.feature_id}  pipeline ${record.pipeline.name} (${record.pipeline.path})`)
  lines.push(
    t`  input ${record.input.ref}  provider ${record.provider.kind}${record.provider.model ? `/${record.provider.model}` : ''}${replySources(record.provider)}  policy ${record.policy_version.slice(0, 19)}…`,
  )
  lines.push(t`  spec ${record.spec_version ?? '-'}  created ${record.created_at}${record.ended_at ? `  ended ${record.ended_at}` : ''}`)
  if (record.context_ref) lines.push(t`  context ref ${record.context_ref.project_id}@${record.context_ref.context_version}`)
  if (record.replay_of) lines.push(t`  replay of ${record.replay_of.run_id} from #${record.replay_of.seq} ${record.replay_of.step}`)
  if (record.parent) lines.push(t`  child of ${record.parent.run_id} step ${record.parent.step} (#${record.parent.seq})${itemLabel(record.parent)}`)
  const now = record.status === 'running' ? record.current_step : undefined
  if (now) lines.push(t`  ${status === 'running' ? 'running' : 'was running'} step ${now.step} (#${now.seq}) since ${now.since} on ${workerLabel(now.worker)}`)
  if (record.status_reason) lines.push(t`  reason: ${record.status_reason}`)
  if (record.error) lines.push(t`  error: [${record.error.code}] ${record.error.message}${record.error.trace_id ? ` (trace ${record.error.trace_id})` : ''}`)
  if (record.pending) {
    lines.push(t`  waiting for ${record.pending.kind} at step ${record.pending.step} since ${record.pending.since}: ${record.pending.reason}`)
    const deadline = record.pending.deadline
    if (deadline !== undefined && status === 'awaiting_input')
      lines.push(
        deadline < new Date().toISOString()
          ? t`  confirmation deadline passed at ${deadline}; the run stays paused: pipe confirm ${record.run_id} --yes|--no`
          : t`  confirm by ${deadline}`,
      )
    for (const q of record.pending.questions ?? []) lines.push(t`    ${q.id}${q.field ? ` [${q.field}]` : ''} ${q.question}`)
  }
  lines.push('', 'timeline:')
  const rows: Array<{at: string; text: string}> = []
  // A step's start is shown by the running line above and its snapshot's line below, not once more.
  for (const e of events.filter((e) => e.event !== 'step_started'))
    rows.push({
      at: e.at,
      text: t`${e.event}${e.to ? ` (${e.from ? `${e.from} ` : ''}-> ${e.to})` : ''}${e.step ? ` step ${e.step}` : ''}${e.tool ? ` tool ${e.tool}` : ''}${e.by && !e.reason?.includes(`by ${e.by}`) ? ` by ${e.by}` : ''}${e.reason ? `: ${e.reason}` : ''}`,
    })
  for (const s of snapshots) {
    const d = s.decisions.at(-1)
    const who = d?.by ? ` by ${d.by}` : ''
    rows.push({
      at: s.step.ended_at,
      text: t`  #${s.step.seq} ${s.step.name} ${d?.decision ?? '?'}${who} in ${s.step.duration_ms ?? '?'} ms, ${s.step.attempts ?? 1} attempt(s)${s.spec_version_out ? ` -> ${s.spec_version_out}` : ''}${s.errors.length ? `, ${s.errors.length} error(s)` : ''}`,
    })
  }
  rows.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
  for (const row of rows) lines.push(t`  ${row.at}  ${row.text}`)
  const total = snapshots.reduce((n, s) => n + (s.step.duration_ms ?? 0), 0)
  lines.push('', `${snapshots.length} step(s), ${total} ms in steps`)
  if (children.length > 0) {
    lines.push('', 'child runs:')
    const walk = (list: RunSummary[], depth: number): void => {
      for (const c of list) {
        const where = c.parent ? `${c.parent.step} #${c.parent.seq}${itemLabel(c.parent)}` : ''
        lines.push(t`${'  '.repeat(depth + 1)}${c.run_id}  ${c.status}  ${c.pipeline}  ${where}${c.reason ? `: ${c.reason}` : ''}`)
        walk(c.children ?? [], depth + 1)
      }
    }
    walk(children, 0)
  }
  return visible(`${lines.join('\n')}\n`)
}

export function renderSpecList(specs: SpecSummary[]): string {
  if (specs.length === 0) return 'no spec versions\n'
  return table([
    ['VERSION', 'FEATURE', 'STATUS', 'PARENT', 'RUN', 'STEP', 'CREATED'],
    ...specs.map((s) => [
      s.spec_version,
      s.feature_id ?? '?',
      s.problem ? 'DAMAGED' : s.status,
      s.parent_version ?? '-',
      s.run_id ?? '?',
      s.created_by_step ?? '?',
      s.created_at ?? '?',
    ]),
  ])
}

/** Where a run's model replies come from besides the endpoint: its cassette and the reply cache. */
function replySources(provider: RunRecord['provider']): string {
  const c = provider.cassette
  const cassette = c
    ? c.mode === 'record'
      ? ` (recording to ${c.file})`
      : ` (replaying ${c.file}${c.missing === 'live' ? `, missing replies asked live${c.append ? ' and recorded' : ''}` : ''})`
    : ''
  return `${cassette}${provider.cache === 'reuse' ? ' (reusing cached replies)' : ''}`
}

/** What a person gives the run: said only for a pipeline with a step that takes it, or when given to one without. */
function people(plan: RunPlan): string[] {
  const at = (what: RunPlan['waits'][number]['for']): string[] => plan.waits.filter((w) => w.for === what).map((w) => w.step)
  const answers = at('answers')
  const reviews = at('review')
  const parts = [
    answers.length > 0
      ? `answers ${plan.answers.length ? plan.answers.join(', ') : `none given (the run will pause at ${answers.join(', ')} if questions remain)`}`
      : plan.answers.length > 0
        ? `answers ${plan.answers.join(', ')} (no step of this pipeline takes answers)`
        : '',
    reviews.length > 0
      ? `review decision ${plan.decision ?? `none given (the run will pause at ${reviews.join(', ')})`}`
      : plan.decision
        ? `review decision ${plan.decision} (no step of this pipeline takes one)`
        : '',
  ].filter(Boolean)
  const confirms = plan.waits.filter((w) => w.for === 'confirm' && w.because !== undefined)
  return [
    ...(parts.length > 0 ? [t`  ${parts.join('; ')}`] : []),
    ...confirms.map((w) => t`  the run will pause before ${w.step} for pipe confirm (${w.because ?? ''})`),
  ]
}

export function renderPlan(plan: RunPlan): string {
  const lines = [
    t`plan for pipeline ${plan.pipeline.name} (${plan.pipeline.file})`,
    t`  pipeline hash ${plan.pipeline.hash}`,
    t`  policy ${plan.policy.file ?? '(built-in default)'} ${plan.policy.version}`,
    t`  provider ${plan.provider.kind}${plan.provider.model ? ` / ${plan.provider.model}` : ''}${plan.provider.endpoint_host ? ` at ${plan.provider.endpoint_host}` : ''}${replySources(plan.provider)}`,
    t`  input ${plan.input.ref} (${plan.input.kind}, ${plan.input.bytes} bytes)`,
    ...(Object.keys(plan.inputs).length > 0
      ? [
          t`  inputs ${Object.entries(plan.inputs)
            .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
            .join(' ')}`,
        ]
      : []),
    ...people(plan),
    t`  store ${plan.store}`,
    '',
  ]
  const rows = [['STEP', 'KIND', 'THEN', 'BOUND', 'TIMEOUT', 'RETRIES', 'VERSION']]
  for (const s of plan.steps) {
    const effects = {failed: 'FAILS THE RUN', awaiting_input: 'waits', cancelled: 'cancels', ends: '(end)'} as const
    // An unrouted error fails every step the same way; the column shows what is particular to this one.
    const unrouted = Object.entries(s.unrouted).filter(([outcome]) => outcome !== 'error')
    const ends = unrouted.filter(([, effect]) => effect === 'ends').map(([o]) => o)
    const then =
      [
        ...Object.entries(s.transitions).map(([k, v]) => (k === '*' || k === v ? v : `${k}: ${v}`)),
        ...unrouted.filter(([, effect]) => effect !== 'ends').map(([o, effect]) => `${o}: ${effects[effect]}`),
        ...(ends.length > 0 && Object.keys(s.transitions).length > 0 ? [`${ends.join('/')}: (end)`] : []),
      ].join(', ') || '(end)'
    const bound = s.max_iterations !== undefined ? `max ${s.max_iterations}${s.on_exhausted ? ` -> ${s.on_exhausted}` : ''}` : '-'
    rows.push([
      `${s.id === plan.pipeline.start ? '> ' : '  '}${s.id}`,
      s.kind,
      then,
      bound,
      s.timeout_ms === null ? '-' : `${s.timeout_ms} ms`,
      String(s.retries),
      s.changes_spec ? 'writes' : '-',
    ])
  }
  const problems = renderDiagnostics([...plan.denied, ...plan.warnings])
  const resolved = plan.steps
    .flatMap((s) => Object.entries(s.resolved ?? {}).map(([field, value]) => `  ${s.id}.${field} = ${JSON.stringify(value)}\n`))
    .join('')
  const values = resolved ? `\nexpression values known before the run (the rest resolve as it goes):\n${resolved}` : ''
  const secrets =
    plan.secrets_unset.length > 0
      ? t`\nsecret${plan.secrets_unset.length > 1 ? 's' : ''} not set here: ${plan.secrets_unset.join(', ')}; a run needs ${plan.secrets_unset.length > 1 ? 'them' : 'it'}: export ${plan.secrets_unset.map((n) => `${n}=…`).join(' ')} first\n`
      : ''
  // Values come from the pipeline file.
  return `${lines.join('\n')}${table(rows)}${visible(values)}${secrets}${problems ? `\n${problems}` : ''}nothing was run; drop --dry-run to run it\n`
}
