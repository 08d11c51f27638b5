/**
 * The routing decision on its own: no store, no engine, no clock. One test per rung of the ladder
 * in src/engine/decide.ts, each checking the rung taken and what it records.
 */
import {expect} from 'chai'
import {decide, routeOf, type DecideInput} from '../../src/engine/decide.js'
import {registry} from '../../src/steps/registry.js'
import type {StepDone} from '../../src/steps/types.js'
import type {Snapshot} from '../../src/types/snapshot.js'

/** The command kind declares `failure` a failure outcome (E_BUILD_FAIL). */
const commandFailures = registry.command.failures

function done(outcome: string, extra: Partial<StepDone> = {}): StepDone {
  return {type: 'done', outcome, reason: `it ended ${outcome}`, outputs: {}, ...extra}
}

function input(step: DecideInput['step'], ending: DecideInput['ending'], extra: Partial<DecideInput> = {}): DecideInput {
  return {run_id: 'R-1', step, failures: commandFailures, ending, history: [], registry, ...extra}
}

/** A snapshot as the history holds it: only what routing reads. */
function snapshot(seq: number, name: string, kind: string, decision: Snapshot['decisions'][number], errors: Snapshot['errors'] = []): Snapshot {
  return {run_id: 'R-1', step: {name, kind, seq}, decisions: [decision], errors} as unknown as Snapshot
}

const failedBuild = snapshot(1, 'build', 'command', {decision: 'failure', reason: 'exit 2', next_step: 'rollback'})

describe('decide: where a run goes after a step', () => {
  it('an end step that says failed fails the run with its own code, hint and reason, naming itself', () => {
    const result = done('ended', {end: {status: 'failed', reason: 'nothing to do', code: 'E_GATE_FAIL', hint: 'Add items.'}})
    const at = input({id: 'stop', next: 'later'}, {type: 'done', result})
    expect(routeOf(at).type).to.equal('ended_failed')
    expect(decide(at)).to.deep.equal({
      decision: {decision: 'ended', reason: 'nothing to do', next_step: null, run_status: 'failed'},
      error: {code: 'E_GATE_FAIL', message: 'nothing to do', hint: 'Add items.', details: {ended_by: 'stop'}},
    })
  })

  it('an end step that says failed with no code or hint fails the run with E_ENDED and a hint naming the step', () => {
    const at = input({id: 'stop'}, {type: 'done', result: done('ended', {end: {status: 'failed', reason: 'no'}})})
    expect(decide(at).error).to.deep.equal({code: 'E_ENDED', message: 'no', hint: 'The pipeline ended the run at step stop.', details: {ended_by: 'stop'}})
  })

  it('an end step that says blocked stops the run at itself, to run again on resume', () => {
    const at = input({id: 'wait'}, {type: 'done', result: done('ended', {end: {status: 'blocked', reason: 'needs a person'}})})
    expect(routeOf(at).type).to.equal('ended_blocked')
    expect(decide(at)).to.deep.equal({
      decision: {decision: 'ended', reason: 'needs a person', next_step: 'wait', run_status: 'blocked'},
      error: {code: 'E_ENDED', message: 'needs a person'},
    })
  })

  it('an end step that says succeeded ends the run succeeded, even after an unrecovered failure', () => {
    const at = input({id: 'done'}, {type: 'done', result: done('ended', {end: {status: 'succeeded', reason: 'all good'}})}, {history: [failedBuild]})
    expect(routeOf(at).type).to.equal('ended_succeeded')
    expect(decide(at)).to.deep.equal({decision: {decision: 'ended', reason: 'all good', next_step: null, run_status: 'succeeded'}})
  })

  it('a hold waits again at the step', () => {
    const at = input({id: 'review', next: 'publish'}, {type: 'done', result: done('hold', {hold: {reason: 'later'}})})
    expect(routeOf(at).type).to.equal('held')
    expect(decide(at)).to.deep.equal({decision: {decision: 'hold', reason: 'it ended hold', next_step: 'review', run_status: 'awaiting_input'}})
  })

  it('a cancel ends the run cancelled', () => {
    const at = input({id: 'review', next: 'publish'}, {type: 'done', result: done('drop', {cancel: {reason: 'dropped'}})})
    expect(routeOf(at).type).to.equal('cancelled')
    expect(decide(at)).to.deep.equal({decision: {decision: 'drop', reason: 'it ended drop', next_step: null, run_status: 'cancelled'}})
  })

  it("a failure outcome with no on: entry fails the run with its kind's code, even when next: is set", () => {
    const at = input({id: 'build', next: 'deploy'}, {type: 'done', result: done('failure')})
    expect(routeOf(at).type).to.equal('unrouted_failure')
    const decided = decide(at)
    expect(decided.decision).to.deep.equal({
      decision: 'failure',
      reason: 'it ended failure; no route for the failure outcome "failure", so the run fails',
      next_step: null,
      run_status: 'failed',
    })
    expect(decided.error).to.deep.include({code: 'E_BUILD_FAIL', message: 'step build ended with the failure outcome "failure": it ended failure'})
    expect(decided.error!.hint).to.contain('pipe snapshot show R-1 --step build')
  })

  it('a failure outcome its on: entry routes goes there', () => {
    const at = input({id: 'build', on: {failure: 'rollback'}}, {type: 'done', result: done('failure')})
    expect(routeOf(at).type).to.equal('routed')
    expect(decide(at)).to.deep.equal({decision: {decision: 'failure', reason: 'it ended failure', next_step: 'rollback'}})
  })

  it('the run ending while an earlier failure was only handled fails it, naming the failed step', () => {
    const rollback = snapshot(2, 'rollback', 'noop', {decision: 'success', reason: 'rolled back', next_step: 'notify'})
    const at = input({id: 'notify'}, {type: 'done', result: done('success')}, {history: [failedBuild, rollback]})
    expect(routeOf(at).type).to.equal('carried_failure')
    const decided = decide(at)
    expect(decided.decision).to.deep.equal({
      decision: 'success',
      reason: 'it ended success; the run ends on the unrecovered failure of step build (seq 1), so it fails',
      next_step: null,
      run_status: 'failed',
    })
    expect(decided.error).to.deep.include({
      code: 'E_BUILD_FAIL',
      message: 'step build ended "failure" (seq 1: exit 2) and no later step recovered it; the run ended at notify',
      details: {failed_step: 'build', failed_seq: 1},
    })
  })

  it("an earlier failure that a person's decision came after is not carried", () => {
    const review = snapshot(2, 'review', 'manual_review', {decision: 'go', reason: 'accepted', next_step: 'notify', by: 'ann', at: '2024-01-01T00:00:00.000Z'})
    const at = input({id: 'notify'}, {type: 'done', result: done('success')}, {history: [failedBuild, review]})
    expect(routeOf(at).type).to.equal('routed')
    expect(decide(at).decision).to.deep.equal({decision: 'success', reason: 'it ended success', next_step: null})
  })

  it('an outcome no on: entry names, with no next:, ends the run and says so', () => {
    const at = input({id: 'check', on: {yes: 'a'}}, {type: 'done', result: done('maybe')})
    expect(routeOf(at).type).to.equal('unrouted')
    expect(decide(at)).to.deep.equal({
      decision: {decision: 'maybe', reason: 'it ended maybe; no transition for outcome "maybe", so the run ends', next_step: null},
    })
  })

  it("the step's own choice wins over on: and next:", () => {
    const at = input({id: 'route', on: {success: 'a'}, next: 'b'}, {type: 'done', result: done('success', {next: 'c'})})
    expect(decide(at).decision).to.deep.equal({decision: 'success', reason: 'it ended success', next_step: 'c'})
  })

  it('a non-failure outcome goes to next:, or ends the run when there is none', () => {
    expect(decide(input({id: 'a', next: 'b'}, {type: 'done', result: done('success')})).decision).to.deep.equal({
      decision: 'success',
      reason: 'it ended success',
      next_step: 'b',
    })
    expect(decide(input({id: 'a'}, {type: 'done', result: done('success')})).decision).to.deep.equal({
      decision: 'success',
      reason: 'it ended success',
      next_step: null,
    })
  })

  it("a person's decision in the step is recorded with the route", () => {
    const at = input({id: 'review', next: 'publish'}, {type: 'done', result: done('go', {person: {by: 'ann', at: '2024-01-01T00:00:00.000Z', note: 'fine'}})})
    expect(decide(at).decision).to.deep.equal({
      decision: 'go',
      reason: 'it ended go',
      next_step: 'publish',
      by: 'ann',
      at: '2024-01-01T00:00:00.000Z',
      note: 'fine',
    })
  })

  it('a step that threw an error needing a person blocks the run at itself', () => {
    const at = input({id: 'edit', on: {error: 'fix'}}, {type: 'error', error: {code: 'E_CONFLICT', message: 'stale'}, attempts: 1, blocked: true})
    expect(routeOf(at).type).to.equal('error_blocked')
    expect(decide(at)).to.deep.equal({decision: {decision: 'error', reason: 'E_CONFLICT: stale', next_step: 'edit', run_status: 'blocked'}})
  })

  it('a step that threw goes to its on.error route, counting its attempts in the reason', () => {
    const at = input({id: 'fetch', on: {error: 'fallback'}}, {type: 'error', error: {code: 'E_TOOL_TIMEOUT', message: 'slow'}, attempts: 3, blocked: false})
    expect(routeOf(at).type).to.equal('error_routed')
    expect(decide(at)).to.deep.equal({decision: {decision: 'error', reason: 'E_TOOL_TIMEOUT: slow (after 3 attempts)', next_step: 'fallback'}})
  })

  it('a step that threw with no on.error fails the run, whatever its next: says', () => {
    const at = input({id: 'fetch', next: 'b'}, {type: 'error', error: {code: 'E_IO', message: 'gone'}, attempts: 1, blocked: false})
    expect(routeOf(at).type).to.equal('error_failed')
    expect(decide(at)).to.deep.equal({decision: {decision: 'error', reason: 'E_IO: gone', next_step: null, run_status: 'failed'}})
  })
})
