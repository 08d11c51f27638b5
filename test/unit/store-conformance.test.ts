import {readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {MemoryStore} from '../../src/store/memory/store.js'
import {Store} from '../../src/store/file/store.js'
import {tempDir} from '../helpers/cli.js'
import {storeConformance, type TamperTarget} from '../store-conformance.js'

storeConformance('the in-memory store', async () => {
  const store = new MemoryStore()
  const table = {run: 'runs', event: 'events', snapshot: 'snapshots', spec: 'specs', evidence: 'evidence', ledger: 'ledger'} as const
  const key = (t: TamperTarget): string =>
    t.kind === 'run'
      ? t.run_id
      : t.kind === 'event'
        ? `${t.run_id}#${t.n}`
        : t.kind === 'snapshot'
          ? `${t.run_id}#${t.seq}`
          : t.kind === 'ledger'
            ? t.key
            : t.id
  return {store, cleanup: async () => undefined, tamper: async (target, edit) => store.tamper(table[target.kind], key(target), edit)}
})

storeConformance('the file store', async () => {
  const {dir, cleanup} = await tempDir('pipe-conformance-')
  const store = await Store.open(path.join(dir, '.pipe'))
  /** The file that holds the record: edited in place, as by hand. */
  const tamper = async (target: TamperTarget, edit: (text: string) => string): Promise<void> => {
    if (target.kind === 'event') {
      const file = path.join(store.runDir(target.run_id), 'events.jsonl')
      const lines = readFileSync(file, 'utf8').split('\n')
      lines[target.n - 1] = edit(lines[target.n - 1]!)
      writeFileSync(file, lines.join('\n'))
      return
    }
    const file =
      target.kind === 'run'
        ? path.join(store.runDir(target.run_id), 'run.json')
        : target.kind === 'snapshot'
          ? store.snapshotFile(target.run_id, target.seq)
          : target.kind === 'spec'
            ? store.specFile(target.id)
            : target.kind === 'evidence'
              ? store.evidenceFile(target.id)
              : path.join(store.root, 'ledger', `${target.key}.json`)
    writeFileSync(file, edit(readFileSync(file, 'utf8')))
  }
  return {store, cleanup, tamper}
})
