import path from 'node:path'
import {Store} from '../../src/store/store.js'
import {tempDir} from '../helpers/cli.js'
import {storeConformance} from '../store-conformance.js'

storeConformance('the file store', async () => {
  const {dir, cleanup} = await tempDir('pipe-conformance-')
  return {store: await Store.open(path.join(dir, '.pipe')), cleanup}
})
