// In-process half of bench section `audit` (bench/audit.mjs): `audit verify` of a whole store timed
// inside one process, without Node's start-up or pipe's, so the figure is the audit walk itself and
// steadier than whole processes on a loaded machine. Loads pipe's sources through tsx (the built
// bundle exposes no store entry): the same code esbuild bundles, with the schemas' validators
// compiled at first use instead of loaded from dist/ (the first, untimed audit pays that).
//   node --import tsx bench/audit-inprocess.mjs --store DIR|URL [--memory] [--rounds 5]
// --memory: the file store's records loaded into the in-memory store (as `pipe store copy` reads
// them) and audited there. --floor: no audit, only listing, reading and hashing the store's files (the
// floor of any audit of them on this machine). Prints one JSON line: {runs, head, cpu_ms: [...per round], per_run_ms: [...]}.
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const {values} = parseArgs({
  options: {
    store: {type: 'string'},
    memory: {type: 'boolean', default: false},
    floor: {type: 'boolean', default: false},
    rounds: {type: 'string', default: '5'},
  },
})
if (!values.store) throw new Error('--store DIR|URL is required')
const src = (p) => path.join(root, 'src', p)
const {openStore} = await import(src('store/open.ts'))
const {deliveredKeys} = await import(src('steps/registry.ts'))

async function memoryStoreOf(dir) {
  const {MemoryStore} = await import(src('store/memory/store.ts'))
  const {readFileDump} = await import(src('store/copy.ts'))
  const {FileLayout} = await import(src('store/file/files.ts'))
  const dump = readFileDump(new FileLayout(dir))
  const store = new MemoryStore()
  // Its tables filled directly with the texts (the store has no bulk load; copy.ts writes files and databases).
  for (const r of dump.runs) {
    store.runs.set(r.run_id, {
      body: r.body,
      events: r.events,
      snapshots: new Map(r.snapshots.map((s) => [s.seq, {body: s.body, commit_hash: ''}])),
      states: new Map(r.states.map((s) => [`${s.seq}-${s.step}`, s.body])),
      holder: null,
    })
    const parent = JSON.parse(r.body).parent?.run_id
    if (parent) store.children.set(parent, [...(store.children.get(parent) ?? []), r.run_id])
  }
  store.runIndex.push(...dump.runIndex)
  for (const s of dump.specs) store.specs.set(s.id, s.body)
  for (const e of dump.evidence) store.evidence.set(e.id, e.body)
  for (const f of dump.features) store.features.set(f.id, f.body)
  for (const l of dump.ledger) store.ledgerEntries.set(l.key, l.body)
  store.ledgerLog.push(...dump.ledgerLog)
  return store
}

if (values.floor) {
  // What any audit of these files must do at least: list the folders, read every file and hash its
  // bytes (a commit log only its last 16 KB, as the audit reads an intact run's), and nothing else.
  const {readdirSync, openSync, readSync, closeSync, fstatSync} = await import('node:fs')
  const {createHash} = await import('node:crypto')
  const scratch = Buffer.allocUnsafe(1 << 16)
  const walk = (dir) => {
    let files = 0
    for (const entry of readdirSync(dir, {withFileTypes: true})) {
      const file = path.join(dir, entry.name)
      if (entry.isDirectory()) {
        files += walk(file)
        continue
      }
      const fd = openSync(file, 'r')
      const size = fstatSync(fd).size
      const take = entry.name === 'commits.jsonl' ? Math.min(size, 1 << 14) : size
      let at = size - take
      const hash = createHash('sha256')
      while (at < size) {
        const n = readSync(fd, scratch, 0, Math.min(scratch.length, size - at), at)
        if (n === 0) break
        hash.update(scratch.subarray(0, n))
        at += n
      }
      hash.digest('hex')
      closeSync(fd)
      files++
    }
    return files
  }
  const runs = readdirSync(path.join(path.resolve(values.store), 'runs')).filter((n) => n.startsWith('R-')).length
  walk(path.resolve(values.store))
  const cpu = []
  for (let i = 0; i < Number(values.rounds); i++) {
    const before = process.cpuUsage()
    walk(path.resolve(values.store))
    const used = process.cpuUsage(before)
    cpu.push((used.user + used.system) / 1000)
  }
  console.log(JSON.stringify({runs, head: null, cpu_ms: cpu, per_run_ms: cpu.map((c) => c / runs)}))
  process.exit(0)
}

const store = values.memory ? await memoryStoreOf(path.resolve(values.store)) : await openStore(values.store, 'existing')
const first = await store.audit(undefined, {deliveredKeys})
if (!first.ok) throw new Error(`the store does not pass its audit: ${JSON.stringify(first.problems.slice(0, 3))}`)
const cpu = []
for (let i = 0; i < Number(values.rounds); i++) {
  const before = process.cpuUsage()
  const report = await store.audit(undefined, {deliveredKeys})
  const used = process.cpuUsage(before)
  if (report.head !== first.head) throw new Error('the head digest changed between rounds')
  cpu.push((used.user + used.system) / 1000)
}
await store.close?.()
console.log(JSON.stringify({runs: first.runs, head: first.head, cpu_ms: cpu, per_run_ms: cpu.map((c) => c / first.runs)}))
