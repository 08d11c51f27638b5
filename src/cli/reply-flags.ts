/** The flags that say where model replies come from (run, resume, replay); cli/reply-options.ts says what they mean for a session. */
import * as Flags from '@oclif/core/flags'

export const replyFlags = {
  record: Flags.string({description: 'Record every model request and its reply to this cassette (JSON Lines; secrets are never written). Needs a model endpoint.', helpValue: 'FILE'}),
  replay: Flags.string({description: 'Answer model requests from this cassette; no endpoint or key is needed. A request it has no reply for fails its step, showing how it differs from the recorded one.', helpValue: 'FILE'}),
  'replay-missing': Flags.string({description: 'With --replay: a request the cassette has no reply for fails (error) or asks the live endpoint (live; with --record FILE too, the reply is added to the cassette).', options: ['error', 'live']}),
  'record-note': Flags.string({description: "With --record: the cassette header's note, saying what produced the recording.", helpValue: 'TEXT'}),
  cache: Flags.string({description: "reuse: a request the store's reply cache answered before is answered from it, recorded as a cache hit (default off for run; reuse for replay and for a redriven run).", options: ['off', 'reuse']}),
}
