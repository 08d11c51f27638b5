'use strict'
// Loaded by .mocharc.cjs (in mocha's own process and in each of its parallel workers) when
// PIPE_TEST_SPAWNS names a file: every child process a test starts, whichever helper starts it
// (spawn, execFile, exec and fork all go through ChildProcess's spawn; the sync forms, used only
// for small set-up tools such as mkfifo and initdb, are not counted), is appended to that file as
// one JSON line {file, pipe, command}: the test file from the stack, whether it is the built CLI,
// and what ran. The reporter (stats-reporter.cjs) adds the counts to its slowest files. Most of the
// suite's CPU is starting processes: this says where.
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
}
