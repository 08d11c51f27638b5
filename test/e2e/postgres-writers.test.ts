/**
 * Many processes writing one PostgreSQL store at once: 8 processes × 40 run creations. Ids stay
 * gapless and none is handed out twice, the run index chain stays linear, and pipe audit verify
 * passes over the lot. (250 each made this one test a minute of the suite's CPU; 8 writers all
 * creating at once collide on every id either way, which is what it is about.)
 */
import {expect} from 'chai'
import path from 'node:path'
import {bundled} from '../helpers/bundled.js'
import {json, node, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {formatId} from '../../src/store/file/ids.js'

const WRITERS = 8
const EACH = 40

describe('many writers on one PostgreSQL store', function () {
  this.timeout(300000)
  let cluster: Cluster
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())

  it(`${WRITERS} processes × ${EACH} run creations: ids gapless and never twice, the run index linear, audit verify passes`, async () => {
    const db = await cluster.createDatabase()
    const url = cluster.url(db)
    // Bundled, run by plain node: through tsx each writer spent ~0.65 s of CPU starting (helpers/bundled.ts).
    const script = bundled(path.join(repoRoot, 'test', 'fixtures', 'postgres', 'create-runs.ts'))
    const started = Date.now()
    const results = await Promise.all(Array.from({length: WRITERS}, () => node([script, url, String(EACH)], {timeoutMs: 280000})))
    for (const r of results) expect(r.code, r.stderr).to.equal(0)
    // For the report, never asserted: what the creations cost on this machine.
    console.log(`      ${WRITERS * EACH} runs created by ${WRITERS} processes in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    const ids = results.flatMap((r) => r.stdout.split('\n').filter(Boolean))
    expect(ids).to.have.length(WRITERS * EACH)
    // Each writer got its own ids, and together they are 1..800 of the day, no gap, none twice.
    expect([...ids].sort()).to.deep.equal(Array.from({length: WRITERS * EACH}, (_, i) => formatId('R', '20261121', i + 1)))
    const index = await cluster.sql<{pos: string; run_id: string; line: string}>(db, 'SELECT pos, run_id, line FROM pipe_run_index ORDER BY pos')
    expect(index.map((r) => Number(r.pos))).to.deep.equal(Array.from({length: WRITERS * EACH}, (_, i) => i + 1))
    const lines = index.map((r) => JSON.parse(r.line) as {prev: string | null; hash: string})
    lines.forEach((line, i) => expect(line.prev, `run index line ${i + 1}`).to.equal(i === 0 ? null : lines[i - 1]!.hash))
    const {dir, cleanup} = await tempDir('pipe-pg-writers-')
    try {
      const audit = await pipe(['audit', 'verify', '--json', '--store', url], {cwd: dir, timeoutMs: 120000})
      const report = json<{ok: boolean; runs: number; problems: unknown[]}>(audit)
      expect(report.problems.slice(0, 5)).to.deep.equal([])
      expect(report).to.include({ok: true, runs: WRITERS * EACH})
    } finally {
      await cleanup()
    }
  })
})
