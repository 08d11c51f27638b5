// Mocha's spec reporter, plus the counts written as JSON to $PIPE_TEST_STATS when it is set,
// so that CI can print its own summary line from mocha's results.
'use strict'
const fs = require('node:fs')
const Mocha = require('mocha')

class StatsReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options)
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const file = process.env.PIPE_TEST_STATS
      if (!file) return
      const {passes, failures, pending, tests} = this.stats
      fs.writeFileSync(file, JSON.stringify({passes, failures, pending, tests}) + '\n')
    })
  }
}

module.exports = StatsReporter
