'use strict'
// Preloaded into the built CLI (node -r THIS bin/run.js ...) by test/cli/startup.test.ts: at exit,
// writes to the file PIPE_TEST_LOADS names the Node modules the process loaded, the files it read
// through fs's readFile calls, and the files it opened with fs.openSync (how pipe reads its bundle,
// util/fs.ts readWhole).
const fs = require('node:fs')
const promises = require('node:fs/promises')

const read = []
const opened = []
const open = fs.openSync
fs.openSync = function (file, ...rest) {
  opened.push(String(file))
  return open.call(this, file, ...rest)
}
const sync = fs.readFileSync
fs.readFileSync = function (file, ...rest) {
  read.push(String(file))
  return sync.call(this, file, ...rest)
}
const async = promises.readFile
promises.readFile = function (file, ...rest) {
  read.push(String(file))
  return async.call(this, file, ...rest)
}
process.on('exit', () => {
  const modules = process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length))
  fs.writeFileSync(process.env.PIPE_TEST_LOADS, JSON.stringify({modules, read, opened}))
})
