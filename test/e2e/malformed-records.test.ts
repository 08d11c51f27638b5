import {expect} from 'chai'
import {cp, mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {sealRecord} from '../../src/store/trail/integrity.js'
import {ReplyCache} from '../../src/store/replies.js'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

// Every record kind of the store, each replaced by malformed variants ({} and other non-records,
// fields of the wrong type, ids that are not ids): audit verify reports each as tampering naming the
// file (exit 4), and each command that reads the record stops with E_INTEGRITY naming it. None of
// them may end in E_INTERNAL.
//
// Every variant is checked by every command its kind lists, on a store made by one real `pipe run`.
// A kind's first variant meets each command as a process of the built CLI (what it prints and
// exits with, through the build's own validators); the others meet them in this process
// (test/helpers/pipe-here.ts: the CLI's path from argv from src/, its output and exit code), which is
// what tells one malformed record from another: a process per command (~0.25 s of CPU each) had this
// file check each variant with a few commands only.

delete process.env.PIPE_AUDIT_KEY

const sentence = path.join(examples, 'one-sentence.txt')
const answers = path.join(examples, 'one-sentence.answers.yaml')
const REPLY = 'a'.repeat(64)

type Json = Record<string, unknown>

interface Names {
  run: string
  spec: string
  previousSpec: string
  /** The version the run's first gate step read. */
  gateSpec: string
  evidence: string
  feature: string
  ledgerKey: string
}

/** Where each kind lives, relative to the store, and the commands that read it. */
interface Kind {
  name: string
  file: (n: Names) => string
  /** Each variant is the file's new text, made from the original text. */
  variants: Array<[string, (original: string) => string]>
  /** A line of a log (numbered from 0) instead of the whole file. */
  line?: (n: Names, lines: Json[]) => number
  commands: (n: Names) => string[][]
}

const edit =
  (change: (record: Json) => void) =>
  (original: string): string => {
    const record = JSON.parse(original) as Json
    change(record)
    return JSON.stringify(record)
  }

const notRecords: Array<[string, (original: string) => string]> = [
  ['{}', () => '{}'],
  ['null', () => 'null'],
  ['an array', () => '[]'],
  ['a number', () => '5'],
]

const audit = (n: Names): string[][] => [
  ['audit', 'verify'],
  ['audit', 'verify', n.run],
]

const kinds: Kind[] = [
  {
    name: 'snapshot',
    file: (n) => `runs/${n.run}/snapshots/000002.json`,
    variants: [
      ...notRecords,
      ['step of the wrong type', edit((r) => (r.step = 'compile'))],
      ['meta of the wrong type', edit((r) => (r.meta = 5))],
      ['a run id that is not one', edit((r) => (r.run_id = '../../x'))],
      ['evidence links with bad ids', edit((r) => (r.evidence_links = [{evidence_id: '../../../x'}, null]))],
    ],
    commands: (n) => [
      ...audit(n),
      ['runs', 'show', n.run],
      ['snapshot', 'list', n.run],
      ['snapshot', 'show', n.run, '--seq', '2'],
      ['stats'],
      ['export', n.run],
      ['replay', n.run, '--check'],
    ],
  },
  {
    name: 'run record',
    file: (n) => `runs/${n.run}/run.json`,
    variants: [
      ...notRecords,
      ['status of the wrong type', edit((r) => (r.status = 5))],
      ['head of the wrong type', edit((r) => (r.head = 'x'))],
      ['a run id that is not one', edit((r) => (r.run_id = '../../x'))],
      ['replay_of with a bad run id', edit((r) => (r.replay_of = {run_id: '../../x', seq: 2}))],
      ['redrives holding null', edit((r) => (r.redrives = [null]))],
    ],
    commands: (n) => [
      ...audit(n),
      ['runs', 'show', n.run],
      ['runs', 'list'],
      ['snapshot', 'list', n.run],
      ['stats'],
      ['export', n.run],
      ['replay', n.run, '--check'],
    ],
  },
  {
    name: 'timeline line',
    file: (n) => `runs/${n.run}/events.jsonl`,
    line: () => 1,
    variants: [...notRecords, ['event of the wrong type', edit((r) => (r.event = 5))], ['seq of the wrong type', edit((r) => (r.seq = 'x'))]],
    commands: (n) => [...audit(n), ['runs', 'show', n.run], ['export', n.run]],
  },
  {
    name: 'evidence',
    file: (n) => `evidence/${n.evidence}.json`,
    variants: [
      ...notRecords,
      ['an evidence id that is not one', edit((r) => (r.evidence_id = '../x'))],
      ['field hashes of the wrong type', edit((r) => (r.field_hashes = 5))],
    ],
    commands: audit,
  },
  {
    name: 'spec version',
    file: (n) => `specs/${n.spec}.json`,
    variants: [
      ...notRecords,
      ['meta of the wrong type', edit((r) => (r.meta = 5))],
      ['a version that is not one', edit((r) => ((r.meta as Json).spec_version = '../x'))],
      ['tasks of the wrong type', edit((r) => (r.tasks = 'x'))],
    ],
    commands: (n) => [...audit(n), ['spec', 'show', n.spec], ['spec', 'list'], ['spec', 'diff', n.previousSpec, n.spec], ['export', n.run]],
  },
  {
    name: 'spec version a gate step read',
    file: (n) => `specs/${n.gateSpec}.json`,
    variants: [...notRecords, ['tasks of the wrong type', edit((r) => (r.tasks = 'x'))]],
    commands: (n) => [...audit(n), ['replay', n.run, '--check']],
  },
  {
    name: 'run-index line',
    file: () => 'audit/runs.jsonl',
    line: (n, lines) => lines.findIndex((l) => l.run_id === n.run),
    variants: [
      ...notRecords,
      ['a feature id that is not one', edit((r) => (r.feature_id = '../../x'))],
      ['a malformed feature id', edit((r) => (r.feature_id = 'F-bad'))],
      ['a run id of the wrong type', edit((r) => (r.run_id = 5))],
    ],
    commands: audit,
  },
  {
    name: 'ledger entry',
    file: (n) => `ledger/${n.ledgerKey}.json`,
    variants: [
      ...notRecords,
      ['status of the wrong type', edit((r) => (r.status = 5))],
      ['a key that is not one', edit((r) => (r.key = '../x'))],
      ['attempts of the wrong type', edit((r) => (r.attempts = 'x'))],
    ],
    commands: (n) => [...audit(n), ['ledger', 'list'], ['ledger', 'list', '--limit', '5']],
  },
  {
    name: 'ledger-log line',
    file: () => 'audit/ledger.jsonl',
    line: () => 0,
    variants: [...notRecords, ['a key that is not one', edit((r) => (r.key = '../../x'))], ['entry_seal of the wrong type', edit((r) => (r.entry_seal = 5))]],
    commands: audit,
  },
  {
    name: 'feature',
    file: (n) => `features/${n.feature}.json`,
    variants: [...notRecords, ['a feature id that is not one', edit((r) => (r.feature_id = '../x'))]],
    commands: () => [['audit', 'verify']],
  },
  {
    name: 'reply cache file',
    file: () => `replies/${REPLY}.json`,
    variants: [...notRecords, ['format of the wrong type', edit((r) => (r.format = 5))], ['a key that is not one', edit((r) => (r.key = '../x'))]],
    commands: () => [['audit', 'verify']],
  },
]

describe('malformed records: reported as tampering naming the file, never E_INTERNAL', function () {
  this.timeout(600000)
  let base: string
  let cleanup: () => Promise<void>
  let names: Names

  before(async () => {
    ;({dir: base, cleanup} = await tempDir('pipe-malformed-base-'))
    const run = await pipe(['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'go', '--json'], {cwd: base})
    expect(run.code, run.stderr).to.equal(0)
    const {run_id: runId, spec_version: spec, feature_id: feature} = json<{run_id: string; spec_version: string; feature_id: string}>(run)
    const root = path.join(base, '.pipe')
    const snapshot = JSON.parse(await readFile(path.join(root, 'runs', runId, 'snapshots', '000002.json'), 'utf8')) as {
      evidence_links: Array<{evidence_id: string}>
    }
    const gate = JSON.parse(await readFile(path.join(root, 'runs', runId, 'snapshots', '000003.json'), 'utf8')) as {
      step: {kind: string}
      spec_version_in: string
    }
    expect(gate.step.kind).to.equal('gate')
    const specs = (await readdir(path.join(root, 'specs')))
      .filter((f) => f.endsWith('.json'))
      .map((f) => f.slice(0, -5))
      .sort()
    const ledger = (await readdir(path.join(root, 'ledger'))).filter((f) => f.endsWith('.json'))
    expect(ledger).to.have.length(1)
    names = {
      run: runId,
      spec,
      previousSpec: specs[specs.indexOf(spec) - 1]!,
      evidence: snapshot.evidence_links[0]!.evidence_id,
      feature,
      ledgerKey: ledger[0]!.slice(0, -5),
      gateSpec: gate.spec_version_in,
    }
    // A reply as the cache holds one (the offline pipeline asks no model).
    const key = `sha256:${REPLY}`
    await mkdir(path.join(root, 'replies'))
    await writeFile(
      path.join(root, 'replies', `${REPLY}.json`),
      `${JSON.stringify(sealRecord({format: 'pipe-reply/1', key, request: {model: 'm'}, reply: {content: 'x'}}), null, 2)}\n`,
    )
    const clean = await pipe(['audit', 'verify'], {cwd: base})
    expect(clean.code, clean.stdout + clean.stderr).to.equal(0)
  })
  after(async () => cleanup())

  for (const kind of kinds) {
    describe(kind.name, () => {
      for (const [index, [variant, make]] of kind.variants.entries()) {
        it(`${variant}`, async () => {
          const {dir, cleanup: done} = await tempDir('pipe-malformed-')
          try {
            await cp(path.join(base, '.pipe'), path.join(dir, '.pipe'), {recursive: true})
            const relative = kind.file(names)
            const file = path.join(dir, '.pipe', relative)
            const original = await readFile(file, 'utf8')
            if (kind.line) {
              const lines = original.trimEnd().split('\n')
              const at = kind.line(
                names,
                lines.map((l) => JSON.parse(l) as Json),
              )
              expect(at, 'the line to replace').to.be.at.least(0)
              lines[at] = make(lines[at]!)
              await writeFile(file, `${lines.join('\n')}\n`)
            } else await writeFile(file, make(original))
            for (const args of kind.commands(names)) {
              const asProcess = index === 0
              const result = asProcess ? await pipe(args, {cwd: dir}) : await pipeHere(args, {cwd: dir})
              const said = `${result.stdout}\n${result.stderr}`
              const what = `pipe ${args.join(' ')}${asProcess ? '' : ' (in this process)'} (exit ${result.code}):\n${said}`
              expect(said, what).to.not.contain('E_INTERNAL')
              expect(said, what).to.not.match(/Cannot read properties|is not a function|is not iterable/)
              expect(said, what).to.contain(relative)
              // spec list shows each version, a damaged one with its problem; every other command stops.
              if (args.join(' ') === 'spec list') expect(result.code, what).to.equal(0)
              else expect(result.code, what).to.equal(4)
              // (replay --check reports a gate whose input it cannot read as differing, with the reason.)
              if (args[0] !== 'audit' && args.join(' ') !== 'spec list')
                expect(result.stderr, what).to.match(args[0] === 'replay' ? /E_INTEGRITY|E_CONFLICT/ : /E_INTEGRITY/)
            }
            if (kind.name === 'reply cache file') {
              const error = await new ReplyCache(path.join(dir, '.pipe')).read(`sha256:${REPLY}`).then(
                () => null,
                (e: unknown) => e as {code?: string; message: string},
              )
              expect(error?.code).to.equal('E_INTEGRITY')
              expect(error?.message).to.contain(relative)
            }
          } finally {
            await done()
          }
        })
      }
    })
  }
})
