/** What pipe test prints: a line per test with its reasons, a summary, and JUnit XML for CI. */
import path from 'node:path'
import type {TestResult} from '../app/testing/run.js'
import {line as t, visible} from '../util/terminal-text.js'

export interface TestReport {
  passed: number
  failed: number
  total: number
  duration_ms: number
  tests: TestResult[]
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`
}

function indent(text: string, by: string): string {
  return text
    .split('\n')
    .map((line) => (line ? `${by}${line}` : line))
    .join('\n')
}

/** One test: `✓ file › name (1.2s)`, and for a failure every reason below it. */
export function renderTestLine(result: TestResult): string {
  const mark = result.status === 'passed' ? '✓' : '✗'
  const golden = result.golden === 'written' ? ' [golden written]' : result.golden === 'updated' ? ' [golden updated]' : ''
  const lines = [t`${mark} ${result.file} › ${result.name} (${seconds(result.duration_ms)})${golden}`]
  if (result.status === 'failed') {
    for (const failure of result.failures) {
      const [first, ...more] = failure.message.split('\n')
      lines.push(`    - ${first ?? ''}`, ...(more.length > 0 ? [indent(more.join('\n'), '      ')] : []))
      if (failure.diff) lines.push(indent(failure.diff.trimEnd(), '      '))
    }
    const run = result.run
    if (run) {
      const error = run.error ? `; ${run.error.step ? `step ${run.error.step} ` : ''}[${run.error.code}] ${run.error.message}` : ''
      lines.push(t`    run ${run.run_id} ${run.status} after ${run.steps_run} step(s)${error}`)
    }
    lines.push(
      result.kept
        ? t`    store: ${path.join(result.kept, 'store')} (workspace: ${path.join(result.kept, 'workspace')})`
        : '    its store was removed; pipe test --keep keeps it',
    )
  }
  // Failure messages and diffs quote what a run printed and wrote: their line breaks and tabs stay, other controls are escaped.
  return visible(`${lines.join('\n')}\n`)
}

export function renderSummary(report: TestReport): string {
  const parts = [`${report.passed} passed`, ...(report.failed > 0 ? [`${report.failed} failed`] : [])]
  return `\nTests: ${parts.join(', ')}, ${report.total} total (${seconds(report.duration_ms)})\n`
}

// XML 1.0 has no way to write most control characters, even escaped: they are dropped.
// eslint-disable-next-line no-control-regex
const NOT_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g

function xml(text: string): string {
  return text.replace(NOT_XML, '').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;')
}

/** JUnit XML as Jenkins, GitLab and GitHub reporters read it: a testsuite per test file, a testcase per test. */
export function junitXml(report: TestReport, now: Date = new Date()): string {
  const files = new Map<string, TestResult[]>()
  for (const t of report.tests) files.set(t.file, [...(files.get(t.file) ?? []), t])
  const lines = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="pipe test" tests="${report.total}" failures="${report.failed}" errors="0" time="${(report.duration_ms / 1000).toFixed(3)}">`,
  ]
  let id = 0
  for (const [file, tests] of files) {
    const failed = tests.filter((t) => t.status === 'failed').length
    const time = tests.reduce((sum, t) => sum + t.duration_ms, 0) / 1000
    lines.push(
      `  <testsuite name="${xml(file)}" tests="${tests.length}" failures="${failed}" errors="0" skipped="0" time="${time.toFixed(3)}" timestamp="${now.toISOString().slice(0, 19)}" hostname="localhost" id="${id++}" package="${xml(file)}">`,
      '    <properties/>',
    )
    for (const t of tests) {
      const open = `    <testcase name="${xml(t.name)}" classname="${xml(file)}" time="${(t.duration_ms / 1000).toFixed(3)}"`
      if (t.status === 'passed') {
        lines.push(`${open}/>`)
        continue
      }
      const text = t.failures.map((f) => (f.diff ? `${f.message}\n${f.diff}` : f.message)).join('\n')
      const run = t.run ? `\nrun ${t.run.run_id} ${t.run.status}${t.run.error ? ` [${t.run.error.code}] ${t.run.error.message}` : ''}` : ''
      const kinds = [...new Set(t.failures.map((f) => f.kind))].join(',')
      lines.push(
        `${open}>`,
        `      <failure message="${xml(t.failures[0]?.message.split('\n')[0] ?? 'failed')}" type="${xml(kinds)}">${xml(text + run)}</failure>`,
        '    </testcase>',
      )
    }
    lines.push('    <system-out/>', '    <system-err/>', '  </testsuite>')
  }
  lines.push('</testsuites>')
  return `${lines.join('\n')}\n`
}
