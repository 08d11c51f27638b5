/**
 * The error channel's file half (seed 002): every error is appended to a daily log,
 * $PIPE_HOME/logs/orchestrator-YYYYMMDD.log (PIPE_HOME defaults to ~/.canonical).
 */
import {appendFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {makeDirs} from './util/fs.js'
import {redact} from './util/redact.js'
import {visible, visibleLine} from './util/terminal-text.js'

export function pipeHome(): string {
  return process.env.PIPE_HOME || path.join(os.homedir(), '.canonical')
}

export function logFilePath(date = new Date()): string {
  const day = date.toISOString().slice(0, 10).replace(/-/g, '')
  return path.join(pipeHome(), 'logs', `orchestrator-${day}.log`)
}

/** Appends one entry; returns the log's path, or null when it cannot be written (never throws). */
export function appendLog(level: 'ERROR' | 'WARN' | 'INFO', message: string, detail?: string): string | null {
  const file = logFilePath()
  try {
    makeDirs(path.dirname(file))
    // Read with cat or tail -f, like stderr: escaped as stderr is (util/terminal-text.ts), the entry in
    // one line so that a message cannot forge an entry of its own, the detail (a stack) indented under it.
    const line = `${new Date().toISOString()} ${level} pid=${process.pid} ${visibleLine(redact(message))}\n${detail ? `${visible(redact(detail)).replace(/^/gm, '    ')}\n` : ''}`
    appendFileSync(file, line)
    return file
  } catch {
    return null
  }
}
