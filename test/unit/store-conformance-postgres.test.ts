import {PostgresStore} from '../../src/store/postgres/store.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {storeConformance, type TamperTarget} from '../store-conformance.js'

describe('the PostgreSQL store', function () {
  this.timeout(120000)
  let cluster: Cluster
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())

  storeConformance('the PostgreSQL store', async () => {
    const db = await cluster.createDatabase()
    const store = await PostgresStore.connect(cluster.url(db))
    /** The row that holds the record, updated with its append-only trigger off (as a superuser can). */
    const tamper = async (target: TamperTarget, edit: (text: string) => string): Promise<void> => {
      const [table, column, where, values] =
        target.kind === 'run'
          ? ['pipe_runs', 'body', 'run_id = $1', [target.run_id]]
          : target.kind === 'event'
            ? ['pipe_events', 'line', 'run_id = $1 AND n = $2', [target.run_id, target.n]]
            : target.kind === 'snapshot'
              ? ['pipe_snapshots', 'body', 'run_id = $1 AND seq = $2', [target.run_id, target.seq]]
              : target.kind === 'spec'
                ? ['pipe_specs', 'body', 'version = $1', [target.id]]
                : target.kind === 'evidence'
                  ? ['pipe_evidence', 'body', 'id = $1', [target.id]]
                  : ['pipe_ledger', 'body', 'key = $1', [target.key]]
      const [row] = await cluster.sql<{text: string}>(db, `SELECT ${column} AS text FROM ${table} WHERE ${where}`, values)
      const changed = edit(row!.text)
      await cluster.sql(db, `ALTER TABLE ${table} DISABLE TRIGGER USER`)
      try {
        await cluster.sql(db, `UPDATE ${table} SET ${column} = $${values.length + 1} WHERE ${where}`, [...values, changed])
      } finally {
        await cluster.sql(db, `ALTER TABLE ${table} ENABLE TRIGGER USER`)
      }
    }
    return {store, cleanup: () => store.close(), tamper}
  })
})
