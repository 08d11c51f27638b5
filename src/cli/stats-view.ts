/** The text form of pipe stats: totals, one line per pipeline, one line per run. */
import type {Metrics, StatsReport} from '../engine/stats.js'
import {line as t_, visibleLine} from '../util/terminal-text.js'

const pct = (rate: number | null): string => (rate === null ? '-' : `${Math.round(rate * 1000) / 10}%`)
const num = (n: number | null, unit = ''): string => (n === null ? '-' : `${n}${unit}`)
const cost = (m: Metrics): string => (m.cost === null ? '-' : `${m.cost}${m.currency ? ` ${m.currency}` : ''}`)
const categories = (m: Metrics): string => Object.entries(m.failure_categories).map(([c, n]) => `${c} ${n}`).join(', ') || '-'

function table(header: string[], cells: string[][]): string {
  // Pipeline names, run ids and failure categories come from records: shown escaped, and measured so.
  const rows = cells.map((r) => r.map(visibleLine))
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

const COLUMNS = ['tasks', 'passed', 'attempts/task', 'patch lines', 'QA ms', 'tokens', 'cost', 'failures']
const cells = (m: Metrics): string[] => [String(m.tasks), pct(m.task_pass_rate), num(m.mean_attempts), num(m.mean_patch_lines), num(m.mean_qa_ms), String(m.total_tokens), cost(m), categories(m)]

export function renderStats(report: StatsReport): string {
  const t = report.totals
  const scope = [report.filter.pipeline ? `pipeline ${report.filter.pipeline}` : 'all pipelines', report.filter.since ? `since ${report.filter.since}` : ''].filter(Boolean).join(', ')
  if (t.runs === 0) return t_`No runs (${scope}).\n`
  const out = [
    t_`${t.runs} run(s), ${scope}`,
    `tasks: ${t.tasks}, passed ${t.tasks_passed} (${pct(t.task_pass_rate)}), mean attempts ${num(t.mean_attempts)}`,
    t_`failure categories: ${categories(t)}`,
    `patches: ${t.patches}, mean ${num(t.mean_patch_lines)} changed line(s); QA runs: ${t.qa_runs}, mean ${num(t.mean_qa_ms, ' ms')}`,
    `model: ${t.model_calls} call(s), ${t.prompt_tokens} prompt + ${t.completion_tokens} completion = ${t.total_tokens} tokens, cost ${cost(t)}`,
    '',
    table(['pipeline', 'runs', ...COLUMNS], report.pipelines.map((p) => [p.pipeline, String(p.runs), ...cells(p)])),
    '',
    table(['run', 'pipeline', 'status', ...COLUMNS], report.runs.map((r) => [r.run_id, r.pipeline, r.status, ...cells(r)])),
  ]
  return `${out.join('\n')}\n`
}
