import {expect} from 'chai'
import {
  AUDIT_KEY_ENV,
  changedCreationFacts,
  checkRecord,
  runCreationFacts,
  runCreationHash,
  RunRecordTexts,
  runRecordSealer,
  runStateHash,
  sealOf,
  sealRecord,
  sealSnapshot,
  verifySnapshot,
} from '../../src/store/trail/integrity.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {canonicalJson, canonicalObject, hashJson} from '../../src/util/hash.js'

/** The seal as it was first written: every field hashed, then the whole record put in canonical form again. */
function referenceSeal(snapshot: Snapshot): Snapshot {
  const sealed = structuredClone(snapshot)
  const {field_hashes: _f, record_hash: _r, ...meta} = sealed.meta
  sealed.meta = meta
  const record = sealed as unknown as Record<string, unknown>
  const fieldHashes: Record<string, string> = {}
  for (const key of Object.keys(record).sort()) {
    if (key === 'field_hashes' || key === 'record_hash') continue
    fieldHashes[key] = hashJson(record[key])
  }
  sealed.meta.field_hashes = fieldHashes
  sealed.meta.record_hash = sealOf(sealed)
  return sealed
}

function sample(extra: Partial<Snapshot> = {}): Snapshot {
  return {
    run_id: 'R-20261121-0001',
    feature_id: 'F-2026-001',
    spec_version_in: null,
    spec_version_out: 'S-20261121-0002',
    step: {
      name: 'ask',
      kind: 'noop',
      seq: 3,
      iteration: 1,
      attempts: 2,
      started_at: '2026-11-21T10:00:00.000Z',
      ended_at: '2026-11-21T10:00:01.000Z',
      duration_ms: 1000,
    },
    inputs: {
      canonical_spec_ref: null,
      context_ref: null,
      user_answer_ref: null,
      resolved: {'é key': 'ünïcode ✓', 'a"b': [1, 2.5, -0, 1e21, true, null, {z: 1, a: undefined}]},
    },
    outputs: {text: 'line\nbreak\u2028', nested: {b: [], a: {}}},
    decisions: [{decision: 'success', reason: 'ok', next_step: null}],
    evidence_links: [],
    errors: [],
    meta: {
      engine_version: 'pipe-engine-0.1',
      llm_model: null,
      provider: 'offline',
      endpoint_host: null,
      policy_version: 'p',
      pipeline: 'x',
      pipeline_hash: 'sha256:00',
      prev_hash: null,
      extensions: {},
      field_hashes: {stale: 'x'},
      record_hash: 'stale',
    },
    ...extra,
  }
}

describe('snapshot seal', () => {
  afterEach(() => delete process.env[AUDIT_KEY_ENV])

  it('gives exactly the bytes and hashes of the two-pass seal, keyed and unkeyed', () => {
    for (const key of [undefined, 'k3y']) {
      if (key) process.env[AUDIT_KEY_ENV] = key
      for (const snapshot of [sample(), sample({tool_calls: [{tool: 'x', args: {b: 1, a: [null]}}]} as unknown as Partial<Snapshot>)]) {
        const sealed = sealSnapshot(snapshot)
        expect(JSON.stringify(sealed, null, 2)).to.equal(JSON.stringify(referenceSeal(snapshot), null, 2))
        expect(verifySnapshot(sealed)).to.deep.equal([])
      }
    }
  })

  it('leaves the snapshot it is given as it was (its meta gets no hashes)', () => {
    const snapshot = sample()
    const before = JSON.stringify(snapshot)
    const sealed = sealSnapshot(snapshot)
    expect(JSON.stringify(snapshot)).to.equal(before)
    expect(sealed.meta).to.not.equal(snapshot.meta)
    expect(sealed.meta.record_hash).to.be.a('string')
  })

  it('still names the field that was changed after sealing', () => {
    const sealed = sealSnapshot(sample())
    sealed.outputs = {text: 'edited'}
    expect(verifySnapshot(sealed).map((p) => p.field)).to.deep.equal(['outputs'])
  })

  it('puts members already in canonical form together as canonicalJson would', () => {
    const value = {b: [1, {d: 2, c: 3}], a: 'x', u: undefined, é: null}
    const members = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, v === undefined ? undefined : canonicalJson(v)]))
    expect(canonicalObject(members)).to.equal(canonicalJson(value))
  })
})

describe('run record seal', () => {
  afterEach(() => delete process.env[AUDIT_KEY_ENV])

  it('gives the state hash of runStateHash and the seal of sealRecord, keyed and unkeyed', () => {
    const state = {
      run_id: 'R-20261121-0001',
      status: 'running',
      input: {kind: 'text', text: 'é "quoted"\n', ref: null},
      inputs: {b: [1, {d: 2}], a: undefined},
      owner: {pid: 1, host: 'h'},
      head: {events: 9},
      seal: 'old',
    }
    for (const key of [undefined, 'k3y']) {
      if (key) process.env[AUDIT_KEY_ENV] = key
      const head = {events: 2, event_hash: 'sha256:x', seq: 0, snapshot_hash: null}
      const sealer = runRecordSealer(state)
      expect(sealer.stateHash).to.equal(runStateHash(state))
      const {head: _h, seal: _s, ...body} = state
      expect(sealer.seal(head)).to.equal(sealRecord({...body, head}).seal)
      const stored = {...body, head, seal: sealer.seal(head)}
      expect(checkRecord(stored)).to.equal('ok')
    }
  })
})

describe('a stored run record, each field put in canonical form once (audit verify)', () => {
  afterEach(() => delete process.env[AUDIT_KEY_ENV])

  const record = (extra: Record<string, unknown> = {}): Record<string, unknown> =>
    JSON.parse(
      JSON.stringify({
        run_id: 'R-20261121-0001',
        status: 'succeeded',
        pipeline: {path: 'p.yaml', sha256: 'sha256:aa'},
        policy_version: 'v2',
        policy_path: 'policy.yaml',
        input: {kind: 'text', text: 'é "quoted"\n', ref: null},
        inputs: {b: [1, {d: 2}], a: null},
        created_at: '2026-11-21T10:00:00.000Z',
        head: {events: 2, seq: 1},
        ...extra,
      }),
    ) as Record<string, unknown>

  it('gives the seal check, state hash, creation hash and changed facts of the functions that define them', () => {
    const shapes = [
      record(),
      // A run moved to another policy by pipe resume --policy: its creation facts keep the first policy.
      record({redrives: [{at: 'x'}, {previous_policy_version: 'v1', previous_policy_path: 'old.yaml'}, {previous_policy_version: 'v0'}]}),
      record({redrives: [{previous_policy_version: 'v1'}], parent: null, workspace: {id: 'w', root: '/r', sub: null}}),
      // A field JSON.parse keeps as an own property, which an object literal would take as its prototype.
      JSON.parse('{"run_id":"R-20261121-0002","__proto__":{"x":1},"status":"failed","head":{"events":1,"seq":0}}') as Record<string, unknown>,
    ]
    for (const key of [undefined, 'k3y']) {
      if (key) process.env[AUDIT_KEY_ENV] = key
      for (const shape of shapes) {
        const {seal: _s, ...body} = shape
        for (const stored of [sealRecord(body) as Record<string, unknown>, {...body, seal: 'sha256:0'}, body]) {
          const texts = new RunRecordTexts(stored)
          expect(texts.checkSeal(key)).to.equal(checkRecord(stored, key))
          expect(texts.stateHash()).to.equal(runStateHash(stored))
          expect(texts.creationHash()).to.equal(runCreationHash(stored))
          const bound = {...runCreationFacts(stored), policy_version: hashJson('v9'), unknown_fact: hashJson(null)}
          expect(texts.changedCreationFacts(bound)).to.deep.equal(changedCreationFacts(bound, stored))
        }
      }
    }
  })
})
