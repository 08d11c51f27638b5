/** What reads or moves a store's records without running anything: the store and its audit, attestations, the graph. */
import {commandsOf} from '../main.js'

export const {group, execute, describe} = commandsOf('store', {
  attest: () => import('../../commands/attest.js'),
  'attest:verify': () => import('../../commands/attest/verify.js'),
  'audit:verify': () => import('../../commands/audit/verify.js'),
  graph: () => import('../../commands/graph.js'),
  'ledger:list': () => import('../../commands/ledger/list.js'),
  'snapshot:list': () => import('../../commands/snapshot/list.js'),
  'snapshot:show': () => import('../../commands/snapshot/show.js'),
  'spec:diff': () => import('../../commands/spec/diff.js'),
  'spec:list': () => import('../../commands/spec/list.js'),
  'spec:show': () => import('../../commands/spec/show.js'),
  stats: () => import('../../commands/stats.js'),
  'store:archive': () => import('../../commands/store/archive.js'),
  'store:copy': () => import('../../commands/store/copy.js'),
})
