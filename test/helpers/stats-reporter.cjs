// Mocha's spec reporter, plus:
// - the counts written as JSON to $PIPE_TEST_STATS when it is set, so that CI can print its own
//   summary line from mocha's results (in parallel mode too: the workers' events reach this
//   reporter in the main process);
// - the slowest test files (time spent in their tests and hooks), to see where the suite's time goes,
//   with the processes each started (all, and how many were the built CLI) and the PostgreSQL
//   clusters it initdb'd, when PIPE_TEST_SPAWNS names the file test/helpers/count-spawns.cjs (and
//   test/helpers/postgres.ts, for clusters) write them to.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const Mocha = require('mocha')

const {EVENT_TEST_PASS, EVENT_TEST_FAIL, EVENT_HOOK_END, EVENT_RUN_END} = Mocha.Runner.constants
const SHOWN = 40

class StatsReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options)
    /** Milliseconds per test file: its tests' and hooks' durations, as mocha measured them. */
    const perFile = new Map()
    const add = (runnable) => {
      if (!runnable.file || typeof runnable.duration !== 'number') return
      perFile.set(runnable.file, (perFile.get(runnable.file) ?? 0) + runnable.duration)
    }
    runner.on(EVENT_TEST_PASS, add)
    runner.on(EVENT_TEST_FAIL, (test) => test.type === 'test' && add(test))
    runner.on(EVENT_HOOK_END, add)
    runner.once(EVENT_RUN_END, () => {
      const files = [...perFile.entries()].sort((a, b) => b[1] - a[1]).map(([file, ms]) => ({file: path.relative(process.cwd(), file), ms}))
      const spawns = spawnsPerFile()
      for (const entry of files) Object.assign(entry, spawns.get(entry.file))
      if (files.length > 1 || spawns.size > 0) {
        const counted = spawns.size > 0 ? ', processes started (pipe)' : ''
        Mocha.reporters.Base.consoleLog(`  slowest test files (time in their tests and hooks${counted}):`)
        for (const {file, ms, processes, pipe, clusters, cpu} of files.slice(0, SHOWN)) {
          const count =
            processes === undefined
              ? ''
              : `  ${String(processes).padStart(4)} (${pipe})${clusters ? `, ${clusters} PostgreSQL cluster(s)` : ''}${cpu !== undefined ? `, ${(cpu / 1000).toFixed(1)} s CPU` : ''}`
          Mocha.reporters.Base.consoleLog(`  ${(ms / 1000).toFixed(1).padStart(7)} s${count}  ${file}`)
        }
        Mocha.reporters.Base.consoleLog()
        const costly = costliestTests()
        if (costly.length > 0) {
          Mocha.reporters.Base.consoleLog('  costliest tests (CPU of the worker and the processes it waited for):')
          for (const {title, cpu} of costly) Mocha.reporters.Base.consoleLog(`  ${(cpu / 1000).toFixed(1).padStart(7)} s  ${title.slice(0, 160)}`)
          Mocha.reporters.Base.consoleLog()
        }
      }
      const file = process.env.PIPE_TEST_STATS
      if (!file) return
      const {passes, failures, pending, tests} = this.stats
      fs.writeFileSync(file, JSON.stringify({passes, failures, pending, tests, files}) + '\n')
    })
  }
}

/** Processes started per test file, as test/helpers/count-spawns.cjs wrote them (none without PIPE_TEST_SPAWNS). */
function spawnsPerFile() {
  const counts = new Map()
  const file = process.env.PIPE_TEST_SPAWNS
  if (!file || !fs.existsSync(file)) return counts
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue
    const {file: test, pipe, cluster, cpu} = JSON.parse(line)
    if (cpu !== undefined) {
      const entry = counts.get(test) ?? {processes: 0, pipe: 0, clusters: 0}
      entry.cpu = (entry.cpu ?? 0) + cpu
      counts.set(test, entry)
      continue
    }
    const entry = counts.get(test) ?? {processes: 0, pipe: 0, clusters: 0}
    if (cluster) entry.clusters += 1
    else entry.processes += 1
    if (pipe) entry.pipe += 1
    counts.set(test, entry)
  }
  return counts
}

/** The tests (and set-ups) that cost the most CPU, as test/helpers/count-spawns.cjs wrote them. */
function costliestTests() {
  const file = process.env.PIPE_TEST_SPAWNS
  if (!file || !fs.existsSync(file)) return []
  const tests = []
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue
    const entry = JSON.parse(line)
    if (entry.cpu !== undefined) tests.push(entry)
  }
  return tests.sort((a, b) => b.cpu - a.cpu).slice(0, SHOWN)
}

module.exports = StatsReporter
