import {PostgresStore} from '../../src/store/postgres/store.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {storeConformance} from '../store-conformance.js'

describe('the PostgreSQL store', function () {
  this.timeout(120000)
  let cluster: Cluster
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())

  storeConformance('the PostgreSQL store', async () => {
    const store = await PostgresStore.connect(cluster.url(await cluster.createDatabase()))
    return {store, cleanup: () => store.close()}
  })
})
