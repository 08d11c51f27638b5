/** The flags that say where model replies come from (run, resume, replay), and what they mean for a session. */
import path from 'node:path'
import type {InferredFlags} from './flags.js'
import * as Flags from './flags.js'
import {PipeError} from '../errors.js'
import type {ReplyOptions} from '../app/sessions/shared.js'

export const replyFlags = {
  record: Flags.string({
    description: 'Record every model request and its reply to this cassette (JSON Lines; secrets are never written). Needs a model endpoint.',
    helpValue: 'FILE',
  }),
  replay: Flags.string({
    description:
      'Answer model requests from this cassette; no endpoint or key is needed. A request it has no reply for fails its step, showing how it differs from the recorded one.',
    helpValue: 'FILE',
  }),
  'replay-missing': Flags.string({
    description:
      'With --replay: a request the cassette has no reply for fails (error) or asks the live endpoint (live; with --record FILE too, the reply is added to the cassette).',
    options: ['error', 'live'],
  }),
  'record-note': Flags.string({description: "With --record: the cassette header's note, saying what produced the recording.", helpValue: 'TEXT'}),
  cache: Flags.string({
    description:
      "reuse: a request the store's reply cache answered before is answered from it, recorded as a cache hit (default off for run; reuse for replay and for a redriven run).",
    options: ['off', 'reuse'],
  }),
}

/** The reply flags' values as parsed (a command's own flags may add to them). */
export type ReplyFlagValues = Partial<InferredFlags<typeof replyFlags>>

export function replyOptions(flags: ReplyFlagValues, cwd: string): Pick<ReplyOptions, 'cassette' | 'cache'> {
  const cache = flags.cache === undefined ? {} : {cache: flags.cache as 'off' | 'reuse'}
  const missing = flags['replay-missing'] as 'error' | 'live' | undefined
  const note = flags['record-note'] === undefined ? {} : {note: flags['record-note']}
  if (missing !== undefined && flags.replay === undefined)
    throw new PipeError('E_INVALID_ARGS', '--replay-missing says what --replay does with a request its cassette lacks, but no --replay was given', {
      hint: 'Add --replay FILE, or leave out --replay-missing.',
    })
  if (flags['record-note'] !== undefined && flags.record === undefined)
    throw new PipeError('E_INVALID_ARGS', '--record-note is the note of a cassette being recorded, but no --record was given', {
      hint: 'Add --record FILE, or leave out --record-note.',
    })
  if (flags.record !== undefined && flags.replay !== undefined) {
    if (path.resolve(cwd, flags.record) !== path.resolve(cwd, flags.replay)) {
      throw new PipeError('E_INVALID_ARGS', '--record and --replay name different files', {
        hint: 'Give both the same cassette to replay what it has and record what it lacks (with --replay-missing live), or only one of them.',
      })
    }
    if (missing !== 'live')
      throw new PipeError(
        'E_INVALID_ARGS',
        '--record with --replay of the same cassette records the replies it lacks, which are asked live: add --replay-missing live',
        {hint: `pipe run ... --replay ${flags.replay} --record ${flags.record} --replay-missing live`},
      )
    return {cassette: {file: flags.replay, mode: 'replay', missing: 'live', append: true, ...note}, ...cache}
  }
  if (flags.record !== undefined) return {cassette: {file: flags.record, mode: 'record', ...note}, ...cache}
  if (flags.replay !== undefined) return {cassette: {file: flags.replay, mode: 'replay', missing: missing ?? 'error'}, ...cache}
  return cache
}
