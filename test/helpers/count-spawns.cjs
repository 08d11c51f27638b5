'use strict'
// Loaded by .mocharc.cjs (in mocha's own process and in each of its parallel workers) when
// PIPE_TEST_SPAWNS names a file: every child process a test starts, whichever helper starts it
// (spawn, execFile, exec and fork all go through ChildProcess's spawn; the sync forms, used only
// for small set-up tools such as mkfifo and initdb, are not counted), is appended to that file as
// one JSON line {file, pipe, command}: the test file from the stack, whether it is the built CLI,
// and what ran. The reporter (stats-reporter.cjs) adds the counts to its slowest files. Most of the
// suite's CPU is starting processes: this says where.
//
// Each test's CPU is written too, as {file, title, cpu}: the milliseconds of user + system time the
// worker and the children it waited for (every process a test starts and sees end) spent between the
// test's start and its end, from /proc/self/stat. A PostgreSQL server or a daemon the test left
// running is not a waited child and is not counted. The reporter lists the tests that cost most.
const fs = require('node:fs')
const path = require('node:path')
const childProcess = require('node:child_process')

const out = process.env.PIPE_TEST_SPAWNS
if (out) {
  const repo = path.resolve(__dirname, '..', '..')
  const bin = path.join(repo, 'bin', 'run.js')
  /** The test file on the stack (the innermost frame in test/ that is a test file), or a helper's. */
  const testFile = () => {
    const stack = (new Error().stack ?? '')
      .split('\n')
      .filter((frame) => !frame.includes('count-spawns.cjs'))
      .join('\n')
    const match = /(test\/(?:unit|cli|e2e)\/[^:)\s]+\.test\.ts)/.exec(stack) ?? /(test\/helpers\/[^:)\s]+)/.exec(stack)
    return match ? match[1] : 'unknown'
  }
  const record = (file, args) => {
    const list = Array.isArray(args) ? args.map(String) : []
    const isPipe = list.includes(bin) || list.some((a) => a.endsWith(path.join('bin', 'run.js')))
    const command = [path.basename(String(file)), ...list.slice(isPipe ? list.findIndex((a) => a.endsWith('run.js')) + 1 : 1, isPipe ? undefined : 3)]
    fs.appendFileSync(out, JSON.stringify({file: testFile(), pipe: isPipe, command: command.slice(0, 4).join(' ')}) + '\n')
  }
  const spawn = childProcess.ChildProcess.prototype.spawn
  childProcess.ChildProcess.prototype.spawn = function (options) {
    record(options.file, options.args)
    return spawn.call(this, options)
  }

  /** User + system milliseconds of this process and of the children it has waited for (Linux only; 0 elsewhere). */
  // Linux counts these times in clock ticks of 1/100 s (USER_HZ, what getconf CLK_TCK says) on every architecture Node runs on.
  const ticksPerMs = 100 / 1000
  const cpuNow = () => {
    try {
      const stat = fs.readFileSync('/proc/self/stat', 'latin1')
      // The fields after the command's name (which may hold spaces, in parentheses): utime is the 12th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) / ticksPerMs
    } catch {
      return 0
    }
  }
  let started = 0
  let ended = cpuNow()
  exports.mochaHooks = {
    beforeEach() {
      started = cpuNow()
      // What ran since the last test ended (a file's before hooks, the last one's after hooks): set-up, said apart.
      const test = this.currentTest
      if (test && started - ended >= 50)
        fs.appendFileSync(out, JSON.stringify({file: test.file ? path.relative(repo, test.file) : 'unknown', title: `(hooks before) ${test.fullTitle()}`, cpu: Math.round(started - ended)}) + '\n')
    },
    afterEach() {
      const test = this.currentTest
      if (!test) return
      const file = test.file ? path.relative(repo, test.file) : 'unknown'
      ended = cpuNow()
      fs.appendFileSync(out, JSON.stringify({file, title: test.fullTitle(), cpu: Math.round(ended - started)}) + '\n')
    },
  }
}
