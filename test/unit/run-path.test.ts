import {expect} from 'chai'
import {renderGraph} from '../../src/config/graph-render.js'
import {pathOf} from '../../src/app/run-path.js'
import type {Pipeline} from '../../src/types/pipeline.js'
import type {RunEvent, RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'

const at = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString()
const snap = (seq: number, name: string, decision: string, next: string | null, runStatus?: string) =>
  ({
    step: {name, seq, started_at: at(seq * 2), ended_at: at(seq * 2 + 1)},
    decisions: [{decision, reason: '', next_step: next, ...(runStatus ? {run_status: runStatus} : {})}],
  }) as unknown as Snapshot
const record = (status: string) => ({run_id: 'R-20260101-0001', status}) as unknown as RunRecord

describe('the path a run took (pathOf)', () => {
  const pipeline = {
    version: 1,
    name: 'loop',
    steps: [
      {id: 'a', kind: 'noop', next: 'b'},
      {id: 'b', kind: 'noop', next: 'a', max_iterations: 2, on_exhausted: 'out'},
      {id: 'out', kind: 'noop'},
    ],
  } as unknown as Pipeline

  it('counts a loop and adds the loop bound to on_exhausted from the loop_exhausted event', () => {
    const snapshots = [
      snap(1, 'a', 'success', 'b'),
      snap(2, 'b', 'success', 'a'),
      snap(3, 'a', 'success', 'b'),
      snap(4, 'b', 'success', 'a'),
      snap(5, 'a', 'success', 'b'),
      snap(7, 'out', 'success', null),
    ]
    const events = [{at: at(12), event: 'loop_exhausted', step: 'b'}] as RunEvent[]
    const taken = pathOf(pipeline, record('succeeded'), snapshots, events)
    expect(taken.steps).to.deep.equal({a: 3, b: 2, out: 1})
    expect(taken.taken).to.deep.equal([
      {from: '__start__', to: 'a', label: 'start', count: 1},
      {from: 'a', to: 'b', label: 'success', count: 3},
      {from: 'b', to: 'a', label: 'success', count: 2},
      {from: 'b', to: 'out', label: 'exhausted', count: 1},
      {from: 'out', to: '__end__', label: 'success', count: 1},
    ])
    const mermaid = renderGraph(pipeline, 'mermaid', {}, taken)
    expect(mermaid).to.contain('  a -->|"3×"| b\n').and.contain('  b -.->|"exhausted"| out\n')
    expect(mermaid).to.match(/linkStyle 0,1,2,3,4 stroke/)
  })

  it('sends a loop bound with no on_exhausted to failed, drawn as an extra dotted edge', () => {
    const bare = {
      ...pipeline,
      steps: pipeline.steps.map((s) => (s.id === 'b' ? {id: 'b', kind: 'noop', next: 'a', max_iterations: 1} : s)),
    } as unknown as Pipeline
    const taken = pathOf(bare, record('failed'), [snap(1, 'a', 'success', 'b'), snap(2, 'b', 'success', 'a'), snap(3, 'a', 'success', 'b')], [
      {at: at(8), event: 'loop_exhausted', step: 'b'},
    ] as RunEvent[])
    expect(taken.taken.at(-1)).to.deep.equal({from: 'b', to: '__failed__', label: 'exhausted', count: 1})
    const dot = renderGraph(bare, 'dot', {}, taken)
    expect(dot).to.contain('"__failed__" [shape=doublecircle, label="failed"];')
    expect(dot).to.contain('"b" -> "__failed__" [label="exhausted", style=dotted, color="#2e7d32", penwidth=3];')
    // Without a path nothing is coloured and the drawing is as before.
    expect(renderGraph(bare, 'dot', {}))
      .to.not.contain('penwidth')
      .and.not.contain('__failed__')
  })
})
