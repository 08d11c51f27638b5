import {expect} from 'chai'
import {registry} from '../../src/steps/registry.js'
import type {KindOutputs, StepHandler} from '../../src/steps/types.js'
import {catalogOf} from '../../src/steps/registry.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom} from '../helpers/engine.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-outputs-check-')))
afterEach(async () => cleanup())

const chain = 'version: 1\nname: contract\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop}\n'

/** The outputs a stand-in returns, whatever its type says: a handler built some other way than this compiler checks. */
const loose = (outputs: Record<string, unknown>): never => outputs as never

describe('the engine checks produced outputs against the kind declaration', () => {
  it('an output field the kind does not declare fails the step with E_INTERNAL naming the kind and the field; the run goes no further', async () => {
    let ran = 0
    const noop: StepHandler<'noop'> = {
      ...registry.noop,
      run: async () => (ran++, {type: 'done', outcome: 'success', reason: 'said hello', outputs: loose({msg: 'hello'})}),
    }
    const h = await harness(dir, {noop})
    const out = await h.start(await pipelineFrom(dir, 'undeclared', chain))
    expect(out.status).to.equal('failed')
    expect(out.error?.code).to.equal('E_INTERNAL')
    expect(out.error?.message).to.equal(
      'step a: the noop kind produced outputs its declaration does not allow: outputs.msg is not declared (it declares no fields)',
    )
    expect(ran, 'b never ran').to.equal(1)
    const [snap, ...rest] = await h.store.readSnapshots(out.run_id)
    expect(rest).to.deep.equal([])
    expect(snap!.outputs, 'nothing undeclared reaches the snapshot').to.deep.equal({})
    expect(snap!.errors.map((e) => [e.code, e.retryable])).to.deep.equal([['E_INTERNAL', false]])
    expect(snap!.errors[0]!.hint).to.contain('schemas/kinds/noop.outputs.json')
  })

  it('a declared field of the wrong type fails the step naming the field and the type it must have', async () => {
    const end: StepHandler<'end'> = {
      ...registry.end,
      run: async () => ({
        type: 'done',
        outcome: 'succeeded',
        reason: 'done',
        outputs: loose({status: 'succeeded', reason: 42}),
        end: {status: 'succeeded', reason: 'done'},
      }),
    }
    const h = await harness(dir, {end})
    const out = await h.start(await pipelineFrom(dir, 'typed', 'version: 1\nname: typed\nsteps:\n  - {id: stop, kind: end, status: succeeded}\n'))
    expect(out.status).to.equal('failed')
    expect(out.error?.code).to.equal('E_INTERNAL')
    expect(out.error?.message).to.equal('step stop: the end kind produced outputs its declaration does not allow: outputs.reason must be string')
  })

  it('a stand-in that declares {message} and returns {msg} fails the step against its own declaration', async () => {
    const noop: StepHandler<'noop'> = {
      ...registry.noop,
      outputsSchema: () => ({type: 'object', properties: {message: {type: 'string'}}, additionalProperties: false}),
      run: async () => ({type: 'done', outcome: 'success', reason: 'said hello', outputs: loose({msg: 'hello'})}),
    }
    const h = await harness(dir, {noop})
    const out = await h.start(await pipelineFrom(dir, 'own', chain, catalogOf({...registry, noop})))
    expect(out.status).to.equal('failed')
    expect(out.error?.code).to.equal('E_INTERNAL')
    expect(out.error?.message).to.match(/^step a: the noop kind produced outputs its declaration does not allow: .*msg/)
  })

  it('outputs within the declaration pass: the run goes on', async () => {
    const end: StepHandler<'end'> = {
      ...registry.end,
      run: async () => ({
        type: 'done',
        outcome: 'succeeded',
        reason: 'done',
        outputs: {status: 'succeeded', reason: 'done'},
        end: {status: 'succeeded', reason: 'done'},
      }),
    }
    const h = await harness(dir, {end})
    const out = await h.start(
      await pipelineFrom(dir, 'fine', 'version: 1\nname: fine\nsteps:\n  - {id: a, kind: noop, next: stop}\n  - {id: stop, kind: end, status: succeeded}\n'),
    )
    expect(out.status).to.equal('succeeded')
  })
})

// The compile-time half (npm run typecheck): a handler's outputs are typed by its kind's declaration
// (src/types/step-outputs.ts, generated from schemas/kinds/), and every shipped handler writes its
// outputs as `{...} satisfies KindOutputs<K>`, so an undeclared field or a wrong type fails to
// compile; tsc fails on an unused @ts-expect-error.
export const undeclaredField: StepHandler<'end'> = {
  ...registry.end,
  // @ts-expect-error msg is not declared in schemas/kinds/end.outputs.json
  run: async () => ({type: 'done', outcome: 'succeeded', reason: 'x', outputs: {status: 'succeeded', msg: 'x'} satisfies KindOutputs<'end'>}),
}
export const wrongType: StepHandler<'write'> = {
  ...registry.write,
  // @ts-expect-error bytes is declared an integer
  run: async () => ({type: 'done', outcome: 'success', reason: 'x', outputs: {path: 'a', bytes: '12'}}),
}
