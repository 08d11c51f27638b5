/** The text form of pipe stats: totals, one line per pipeline, one line per run. */
import {budgetText} from '../app/budget-stats.js'
import type {Metrics, RunStats, StatsReport} from '../app/stats.js'
import {line as t_, visibleLine} from '../util/terminal-text.js'

const pct = (rate: number | null): string => (rate === null ? '-' : `${Math.round(rate * 1000) / 10}%`)
const num = (n: number | null, unit = ''): string => (n === null ? '-' : `${n}${unit}`)
const cost = (m: Metrics): string => (m.cost === null ? '-' : `${m.cost}${m.currency ? ` ${m.currency}` : ''}`)
const categories = (m: Metrics): string =>
  Object.entries(m.failure_categories)
    .map(([c, n]) => `${c} ${n}`)
    .join(', ') || '-'

function table(header: string[], cells: string[][]): string {
  // Pipeline names, run ids and failure categories come from records: shown escaped, and measured so.
  const rows = cells.map((r) => r.map(visibleLine))
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

const RUN_COLUMNS = ['steps', 'failed steps', 'tokens', 'cost']
const runCells = (m: Metrics): string[] => [String(m.steps), String(m.failed_steps), String(m.total_tokens), cost(m)]
const TASK_COLUMNS = ['tasks', 'passed', 'attempts/task', 'patch lines', 'QA ms', 'failures']
const taskCells = (m: Metrics): string[] => [
  String(m.tasks),
  pct(m.task_pass_rate),
  num(m.mean_attempts),
  num(m.mean_patch_lines),
  num(m.mean_qa_ms),
  categories(m),
]

const runBudgetCell = (r: RunStats): string => {
  if (!r.budget) return '-'
  const steps = Object.entries(r.budget.steps).map(([id, b]) => `${id} ${budgetText(b)}`)
  return [...(r.budget.pipeline ? [budgetText(r.budget.pipeline)] : []), ...steps].join('; ')
}

export function renderStats(report: StatsReport): string {
  const t = report.totals
  const scope = [report.filter.pipeline ? `pipeline ${report.filter.pipeline}` : 'all pipelines', report.filter.since ? `since ${report.filter.since}` : '']
    .filter(Boolean)
    .join(', ')
  if (t.runs === 0) return t_`No runs (${scope}).\n`
  // Tasks, attempts and QA are coding work's words: a store whose runs did none speaks of runs and steps.
  const coding = t.tasks > 0 || t.patches > 0 || t.qa_runs > 0
  const columns = coding ? [...RUN_COLUMNS, ...TASK_COLUMNS] : RUN_COLUMNS
  const cells = (m: Metrics): string[] => (coding ? [...runCells(m), ...taskCells(m)] : runCells(m))
  const out = [
    t_`${t.runs} run(s), ${scope}`,
    `steps: ${t.steps}, ${t.failed_steps} failed`,
    ...(coding
      ? [
          `tasks: ${t.tasks}, passed ${t.tasks_passed} (${pct(t.task_pass_rate)})${t.tasks_fixed_by_person > 0 ? `, fixed by a person ${t.tasks_fixed_by_person}` : ''}, mean attempts ${num(t.mean_attempts)}`,
          t_`failure categories: ${categories(t)}`,
          `patches: ${t.patches}, mean ${num(t.mean_patch_lines)} changed line(s); QA runs: ${t.qa_runs}, mean ${num(t.mean_qa_ms, ' ms')}`,
        ]
      : []),
    `model: ${t.model_calls} call(s), ${t.prompt_tokens} prompt + ${t.completion_tokens} completion = ${t.total_tokens} tokens, cost ${cost(t)}`,
    '',
    table(
      ['pipeline', 'runs', ...columns],
      report.pipelines.map((p) => [p.pipeline, String(p.runs), ...cells(p)]),
    ),
    '',
    // Budgets get a column only in a store where some run had one.
    report.runs.some((r) => r.budget)
      ? table(
          ['run', 'pipeline', 'status', ...columns, 'budget (spent/limit)'],
          report.runs.map((r) => [r.run_id, r.pipeline, r.status, ...cells(r), runBudgetCell(r)]),
        )
      : table(
          ['run', 'pipeline', 'status', ...columns],
          report.runs.map((r) => [r.run_id, r.pipeline, r.status, ...cells(r)]),
        ),
  ]
  return `${out.join('\n')}\n`
}
