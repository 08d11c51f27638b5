/**
 * What the reply flags (cli/reply-flags.ts) mean for a session. Apart from the flags themselves so
 * that the fast path of `pipe run` (cli/fast-run.ts) uses it without loading oclif.
 */
import path from 'node:path'
import {PipeError} from '../errors.js'
import type {ReplyOptions} from '../engine/sessions/shared.js'

export interface ReplyFlagValues {
  record?: string | undefined
  replay?: string | undefined
  'replay-missing'?: string | undefined
  'record-note'?: string | undefined
  cache?: string | undefined
}

export function replyOptions(flags: ReplyFlagValues, cwd: string): Pick<ReplyOptions, 'cassette' | 'cache'> {
  const cache = flags.cache === undefined ? {} : {cache: flags.cache as 'off' | 'reuse'}
  const missing = flags['replay-missing'] as 'error' | 'live' | undefined
  const note = flags['record-note'] === undefined ? {} : {note: flags['record-note']}
  if (missing !== undefined && flags.replay === undefined) throw new PipeError('E_INVALID_ARGS', '--replay-missing says what --replay does with a request its cassette lacks, but no --replay was given', {hint: 'Add --replay FILE, or leave out --replay-missing.'})
  if (flags['record-note'] !== undefined && flags.record === undefined) throw new PipeError('E_INVALID_ARGS', '--record-note is the note of a cassette being recorded, but no --record was given', {hint: 'Add --record FILE, or leave out --record-note.'})
  if (flags.record !== undefined && flags.replay !== undefined) {
    if (path.resolve(cwd, flags.record) !== path.resolve(cwd, flags.replay)) {
      throw new PipeError('E_INVALID_ARGS', '--record and --replay name different files', {hint: 'Give both the same cassette to replay what it has and record what it lacks (with --replay-missing live), or only one of them.'})
    }
    if (missing !== 'live') throw new PipeError('E_INVALID_ARGS', '--record with --replay of the same cassette records the replies it lacks, which are asked live: add --replay-missing live', {hint: `pipe run ... --replay ${flags.replay} --record ${flags.record} --replay-missing live`})
    return {cassette: {file: flags.replay, mode: 'replay', missing: 'live', append: true, ...note}, ...cache}
  }
  if (flags.record !== undefined) return {cassette: {file: flags.record, mode: 'record', ...note}, ...cache}
  if (flags.replay !== undefined) return {cassette: {file: flags.replay, mode: 'replay', missing: missing ?? 'error'}, ...cache}
  return cache
}
