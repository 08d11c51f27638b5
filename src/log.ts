/**
 * The error channel's file half (seed 002): every error is appended to a daily log,
 * orchestrator-YYYYMMDD.log, in pipe's own state folder: $PIPE_HOME/logs when PIPE_HOME is set,
 * else $XDG_STATE_HOME/pipe/logs (the XDG base directories' place for logs), else
 * ~/.local/state/pipe/logs.
 */
import {appendFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {makeDirs} from './util/fs.js'
import {redact} from './util/redact.js'
import {visible, visibleLine} from './util/terminal-text.js'

/** The folder that holds the daily logs. */
export function logDir(): string {
  if (process.env.PIPE_HOME) return path.join(process.env.PIPE_HOME, 'logs')
  // XDG says a relative XDG_STATE_HOME is invalid and to be ignored.
  const state =
    process.env.XDG_STATE_HOME && path.isAbsolute(process.env.XDG_STATE_HOME) ? process.env.XDG_STATE_HOME : path.join(os.homedir(), '.local', 'state')
  return path.join(state, 'pipe', 'logs')
}

export function logFilePath(date = new Date()): string {
  const day = date.toISOString().slice(0, 10).replace(/-/g, '')
  return path.join(logDir(), `orchestrator-${day}.log`)
}

/** Appends one entry (with the error's trace id, when it has one); returns the log's path, or null when it cannot be written (never throws). */
export function appendLog(level: 'ERROR' | 'WARN' | 'INFO', message: string, detail?: string, trace?: string): string | null {
  const file = logFilePath()
  try {
    makeDirs(path.dirname(file))
    // Read with cat or tail -f, like stderr: escaped as stderr is (util/terminal-text.ts), the entry in
    // one line so that a message cannot forge an entry of its own, the detail (a stack) indented under it.
    const line = `${new Date().toISOString()} ${level} pid=${process.pid}${trace ? ` trace=${visibleLine(trace)}` : ''} ${visibleLine(redact(message))}\n${detail ? `${visible(redact(detail)).replace(/^/gm, '    ')}\n` : ''}`
    appendFileSync(file, line)
    return file
  } catch {
    return null
  }
}
