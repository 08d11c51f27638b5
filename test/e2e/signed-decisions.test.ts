/**
 * Issue 39 item 3: people sign what they decide. A person with a signing key (the default key of
 * pipe keys generate, or PIPE_SIGNING_KEY) signs each decision as it is recorded; pipe audit verify
 * checks every signature and names whose key it is; --as NAME only with the key NAME holds. Real
 * git gives the person's id, the built CLI decides, and Python's cryptography checks a signature
 * on its own, from the record and the signer's .pub file.
 *
 * Most commands run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output
 * and exit code); in each test the command it is about runs as a real `pipe` process (`spawned`), as
 * do the audit whose files are recorded (test/helpers/record-loads.cjs) and the PostgreSQL audit that
 * finds a changed line.
 */
import {expect} from 'chai'
import {execFile, execFileSync} from 'node:child_process'
import {createPrivateKey, sign} from 'node:crypto'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {promisify} from 'node:util'
import {sealLine, sealRecord} from '../../src/store/trail/integrity.js'
import type {RunEvent, RunRecord, SignedDecision} from '../../src/types/run.js'
import {bin, defaultPipeline, examples, json, node, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {ModelServer} from '../helpers/model-server.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {madeOnce, readIn} from '../helpers/stores.js'

const exec = promisify(execFile)
const checker = path.join(repoRoot, 'test', 'fixtures', 'attest', 'verify_decision.py')

const REVIEWED = `version: 1
name: reviewed
steps:
  - {id: ingest, kind: ingest, next: compile}
  - {id: compile, kind: compile, next: manual_review}
  - {id: manual_review, kind: review, next: done}
  - {id: done, kind: end, status: succeeded, reason: reviewed}
`

interface KeyInfo {
  name: string
  id: string
  public_key: string
  private_key_file: string
  public_key_file: string
}

interface AuditJson {
  ok: boolean
  problems: Array<{file: string; field: string; record: string; message: string}>
  notes: Array<{record: string; message: string}>
  signed_decisions?: Array<{
    run_id: string
    step: string
    decision: string
    by: {id: string; name?: string}
    key_id: string
    key_name: string | null
    trust: string
  }>
}

type Line = Record<string, unknown> & {prev: string | null; hash: string; signed?: SignedDecision}

function noStack(r: CliResult): void {
  expect(r.stderr).not.to.match(/\n\s+at /)
  expect(r.stderr).not.to.include('E_INTERNAL')
}

describe('signed decisions: people sign what they decide (CLI, file store, real git)', function () {
  this.timeout(180000)
  let dir: string
  let cleanup: () => Promise<void>
  let env: Record<string, string | undefined>
  let key: KeyInfo

  /** `pipe ARGS` in this process. */
  const run = (args: string[], extra: Record<string, string | undefined> = {}): Promise<CliResult> => pipeHere(args, {cwd: dir, env: {...env, ...extra}})
  /** The same as a `pipe` process. */
  const spawned = (args: string[], extra: Record<string, string | undefined> = {}): Promise<CliResult> =>
    pipe(args, {cwd: dir, env: {...env, ...extra}, timeoutMs: 60000})
  const events = (id: string): Promise<RunEvent[]> => readIn(path.join(dir, '.pipe'), (store) => store.readEvents(id))
  const trust = (entries: string): Promise<void> => writeFile(path.join(dir, 'policy.yaml'), `version: 1\nattestation:\n  trusted_keys:\n${entries}`)
  const entry = (k: KeyInfo, name: string, extra = ''): string => `    - {id: "${k.id}", name: ${name}, public_key: "${k.public_key}"${extra}}\n`
  const start = async (): Promise<string> => {
    const started = await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--json'])
    expect(started.code, started.stderr).to.equal(10)
    return json<{run_id: string}>(started).run_id
  }
  const audit = async (asProcess = false): Promise<{r: CliResult; report: AuditJson}> => {
    const r = await (asProcess ? spawned : run)(['audit', 'verify', '--json'])
    return {r, report: json<AuditJson>(r)}
  }
  const signedLine = async (id: string, event = 'review_given'): Promise<SignedDecision> => {
    const line = (await events(id)).find((e) => e.event === event)
    expect(line?.signed, `${event} carries a signature`).to.be.an('object')
    return line!.signed!
  }

  const envIn = (at: string): Record<string, string | undefined> => ({
    XDG_CONFIG_HOME: path.join(at, 'config'),
    PIPE_SIGNING_KEY: undefined,
    PIPE_USER: undefined,
    PIPE_INTERACTIVE: '0',
  })
  /**
   * The repository and the person's default key every test starts from, made once (a real \`pipe keys
   * generate\`) and copied into each test's folder: the key is the same in every test, each test's
   * copy of it (under its own config folder) is its own.
   */
  const prepared = madeOnce(async (at) => {
    execFileSync('git', ['init', '-q', '-b', 'main', at])
    // Who decides is who the repository's git says.
    execFileSync('git', ['-C', at, 'config', 'user.email', 'alice@example.com'])
    await writeFile(path.join(at, 'p.yaml'), REVIEWED)
    const made = await pipeHere(['keys', 'generate', '--json'], {cwd: at, env: envIn(at)})
    expect(made.code, made.stderr).to.equal(0)
    return {at, key: json<KeyInfo>(made)}
  })

  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-signed-'))
    const {at, key: made} = await prepared(dir)
    env = envIn(dir)
    const here = (file: string): string => path.join(dir, path.relative(at, file))
    key = {...made, private_key_file: here(made.private_key_file), public_key_file: here(made.public_key_file)}
    await trust(entry(key, 'release-manager'))
  })
  afterEach(async () => cleanup())

  it('a review is signed with the default key; audit verify names it trusted, and Python checks the signature on its own', async function () {
    const id = await start()
    const reviewed = await spawned(['review', id, '--decision', 'go', '--note', 'matches the brief'])
    expect(reviewed.code, reviewed.stderr).to.equal(0)
    const signed = await signedLine(id)
    expect(signed).to.deep.include({run_id: id, step: 'manual_review', decision: 'go', note: 'matches the brief'})
    expect(signed.by.id).to.equal('alice@example.com')
    expect(signed.shown_sha256).to.match(/^sha256:[0-9a-f]{64}$/)
    expect(signed.signature).to.include({key_id: key.id, alg: 'ed25519', public_key: key.public_key})
    const {r, report} = await audit()
    expect(r.code, r.stdout + r.stderr).to.equal(0)
    expect(report.signed_decisions).to.have.length(1)
    expect(report.signed_decisions![0]).to.deep.include({run_id: id, step: 'manual_review', decision: 'go', key_name: 'release-manager', trust: 'trusted'})
    const text = await run(['audit', 'verify'])
    expect(text.stderr).to.include(`signed: ${id} step manual_review go by alice@example.com`).and.include('key release-manager: trusted')

    try {
      await exec('python3', ['-c', 'import cryptography'])
    } catch {
      this.skip()
    }
    const child = execFile('python3', [checker, key.public_key_file])
    child.stdin!.end(JSON.stringify(signed))
    const out = await new Promise<{code: number | null; stdout: string; stderr: string}>((resolve) => {
      let stdout = ''
      let stderr = ''
      child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
      child.on('close', (code) => resolve({code, stdout, stderr}))
    })
    expect(out.code, out.stderr).to.equal(0)
    expect(out.stdout.trim()).to.equal(`ok ${key.id}`)
  })

  it('one byte of a signed decision changed, its line and the chain re-sealed: audit verify exits 4 naming the run, the step and who', async () => {
    const id = await start()
    expect((await run(['review', id, '--decision', 'go', '--note', 'matches the brief'])).code).to.equal(0)
    const runDir = path.join(dir, '.pipe', 'runs', id)
    const file = path.join(runDir, 'events.jsonl')
    const lines = (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Line)
    const at = lines.findIndex((l) => l.event === 'review_given')
    // A tamperer with the store's files and pipe's source, but not the person's key: the seals hold again, the signature cannot.
    lines[at] = {...lines[at]!, signed: {...lines[at]!.signed!, note: 'matches the brieF'}}
    const out: Line[] = lines.slice(0, at)
    for (const line of lines.slice(at)) out.push(sealLine(line, out.at(-1)?.hash ?? null))
    await writeFile(file, out.map((l) => `${JSON.stringify(l)}\n`).join(''))
    const record = JSON.parse(await readFile(path.join(runDir, 'run.json'), 'utf8')) as RunRecord
    record.head = {...record.head!, event_hash: out.at(-1)!.hash}
    await writeFile(path.join(runDir, 'run.json'), `${JSON.stringify(sealRecord(record), null, 2)}\n`)

    const {r, report} = await audit(true)
    expect(r.code, r.stdout).to.equal(4)
    noStack(r)
    expect(report.problems).to.have.length(1)
    expect(report.problems[0]!.field).to.equal(`line ${at + 1}`)
    expect(report.problems[0]!.record).to.equal(`${id}: alice@example.com's go at step manual_review (review_given)`)
    expect(report.problems[0]!.message).to.include('does not verify against its signature')
    const text = await run(['audit', 'verify'])
    expect(text.code).to.equal(4)
    expect(text.stdout).to.include(id).and.include('manual_review').and.include('alice@example.com')
  })

  it("audit verify lists the signed decisions its walk read: each of the store's files is read once", async () => {
    const id = await start()
    expect((await run(['review', id, '--decision', 'go', '--note', 'matches the brief'])).code).to.equal(0)
    const loads = path.join(dir, 'loads.json')
    // test/helpers/record-loads.cjs: every file the process opened or read through fs.
    const r = await node(['-r', path.join(repoRoot, 'test', 'helpers', 'record-loads.cjs'), bin, 'audit', 'verify', '--json'], {
      cwd: dir,
      env: {...env, PIPE_TEST_LOADS: loads},
    })
    expect(r.code, r.stdout + r.stderr).to.equal(0)
    expect(json<AuditJson>(r).signed_decisions!.map((s) => [s.run_id, s.step, s.trust])).to.deep.equal([[id, 'manual_review', 'trusted']])
    const {opened, read} = JSON.parse(await readFile(loads, 'utf8')) as {opened: string[]; read: string[]}
    const store = path.join(dir, '.pipe') + path.sep
    const files = [...opened, ...read].filter((f) => f.startsWith(store)).map((f) => f.slice(store.length))
    expect(files).to.include(path.join('runs', id, 'events.jsonl'))
    expect(files.filter((f, i) => files.indexOf(f) !== i)).to.deep.equal([])
  })

  it('a key the policy does not trust is named, and the audit still passes; a key it revoked fails it', async () => {
    const id = await start()
    expect((await run(['review', id, '--decision', 'go'])).code).to.equal(0)
    // The keys are those of the run's policy file as it reads now: a team that stops trusting a key says so there.
    const other = json<KeyInfo>(await run(['keys', 'generate', '--name', 'other', '--json']))
    await trust(entry(other, 'someone-else'))
    const untrusted = await audit()
    expect(untrusted.r.code, untrusted.r.stdout + untrusted.r.stderr).to.equal(0)
    expect(untrusted.report.signed_decisions![0]).to.include({trust: 'untrusted', key_name: null, key_id: key.id})
    expect(untrusted.report.notes.map((n) => n.message).join('\n'))
      .to.include(`signed by key ${key.id}`)
      .and.include('does not name')

    await trust(entry(key, 'release-manager', ', revoked: true'))
    const revoked = await audit(true)
    expect(revoked.r.code).to.equal(4)
    noStack(revoked.r)
    expect(revoked.report.signed_decisions![0]).to.include({trust: 'revoked', key_name: 'release-manager'})
    expect(revoked.report.problems).to.have.length(1)
    expect(revoked.report.problems[0]!.record).to.equal(`${id}: alice@example.com's go at step manual_review`)
    expect(revoked.report.problems[0]!.message).to.include('revoked')
  })

  it('--as NAME: recorded and signed when the key is the one NAME holds; refused, recording nothing, for another key or none', async () => {
    const id = await start()
    const other = await run(['keys', 'generate', '--name', 'other', '--json'])
    const otherKey = json<KeyInfo>(other)
    const mismatch = await spawned(['review', id, '--decision', 'go', '--as', 'release-manager'], {PIPE_SIGNING_KEY: otherKey.private_key_file})
    expect(mismatch.code).to.equal(2)
    noStack(mismatch)
    expect(mismatch.stderr).to.include('E_INVALID_ARGS').and.include(`the key named release-manager`).and.include(otherKey.id)
    const unknown = await run(['review', id, '--decision', 'go', '--as', 'nobody'])
    expect(unknown.code).to.equal(2)
    expect(unknown.stderr).to.include('no key of').and.include('release-manager')
    const keyless = await run(['review', id, '--decision', 'go', '--as', 'release-manager'], {XDG_CONFIG_HOME: path.join(dir, 'no-keys')})
    expect(keyless.code).to.equal(2)
    expect(keyless.stderr).to.include('pipe keys generate')
    noStack(keyless)
    expect((await events(id)).filter((e) => e.event === 'review_given')).to.have.length(0)

    const as = await run(['review', id, '--decision', 'go', '--as', 'release-manager'])
    expect(as.code, as.stderr).to.equal(0)
    const signed = await signedLine(id)
    expect(signed.by).to.include({id: 'alice@example.com', name: 'release-manager'})
    const {r, report} = await audit()
    expect(r.code).to.equal(0)
    expect(report.signed_decisions![0]!.by.name).to.equal('release-manager')
  })

  it('a signing key that cannot be used stops the decision, naming the file, and nothing is recorded', async () => {
    const id = await start()
    const bad = path.join(dir, 'broken.key')
    await writeFile(bad, 'not a key\n')
    const malformed = await spawned(['review', id, '--decision', 'go'], {PIPE_SIGNING_KEY: bad})
    expect(malformed.code).to.equal(2)
    expect(malformed.stderr).to.include('E_CONFIG').and.include(bad)
    noStack(malformed)
    const missing = await run(['review', id, '--decision', 'go'], {PIPE_SIGNING_KEY: path.join(dir, 'gone.key')})
    expect(missing.stderr).to.include('E_IO').and.include('gone.key')
    noStack(missing)
    expect((await events(id)).map((e) => e.event)).not.to.include('review_given')
    // Once the cause is fixed, the same command decides.
    expect((await run(['review', id, '--decision', 'go'])).code).to.equal(0)
  })

  it("pipe attest carries each signed decision; attest verify says who signed what, and refuses a decision altered under the attester's own signature", async () => {
    const started = await run(['run', defaultPipeline, '--policy', 'policy.yaml', '--input', path.join(examples, 'full-prd.md'), '--json'])
    expect(started.code, started.stderr).to.equal(10)
    const id = json<{run_id: string}>(started).run_id
    expect((await run(['review', id, '--decision', 'go', '--as', 'release-manager'])).code).to.equal(0)
    const bundle = path.join(dir, 'run.intoto.jsonl')
    const attested = await run(['attest', id, '--out', bundle])
    expect(attested.code, attested.stderr).to.equal(0)
    const verified = await run(['attest', 'verify', bundle, '--policy', 'policy.yaml', '--json'])
    expect(verified.code, verified.stderr).to.equal(0)
    const report = json<{signed_decisions: Array<{step: string; decision: string; by: {id: string; name?: string}; key_name: string | null; trust: string}>}>(
      verified,
    )
    expect(report.signed_decisions).to.have.length(1)
    expect(report.signed_decisions[0]).to.deep.include({step: 'manual_review', decision: 'go', key_name: 'release-manager', trust: 'trusted'})
    expect(report.signed_decisions[0]!.by).to.include({id: 'alice@example.com', name: 'release-manager'})
    const text = await run(['attest', 'verify', bundle, '--policy', 'policy.yaml'])
    expect(text.stdout).to.include('signed manual_review go by alice@example.com as release-manager').and.include('with key release-manager')

    // Whoever attests cannot put words in a person's mouth: the run statement re-signed by the attester's (trusted) key, a decision's note changed.
    const lines = (await readFile(bundle, 'utf8')).trim().split('\n')
    const envelope = JSON.parse(lines[1]!) as {payloadType: string; payload: string; signatures: Array<{keyid: string; sig: string}>}
    const statement = JSON.parse(Buffer.from(envelope.payload, 'base64').toString('utf8')) as {predicate: {decisions: Array<{signed?: SignedDecision}>}}
    const d = statement.predicate.decisions.find((x) => x.signed)!
    d.signed = {...d.signed!, decision: 'drop'}
    const payload = Buffer.from(JSON.stringify(statement), 'utf8')
    const pae = Buffer.concat([Buffer.from(`DSSEv1 ${envelope.payloadType.length} ${envelope.payloadType} ${payload.length} `), payload])
    const attester = createPrivateKey(await readFile(key.private_key_file))
    const forged = {...envelope, payload: payload.toString('base64'), signatures: [{keyid: key.id, sig: sign(null, pae, attester).toString('base64')}]}
    const altered = path.join(dir, 'altered.intoto.jsonl')
    await writeFile(altered, `${lines[0]}\n${JSON.stringify(forged)}\n`)
    const refused = await spawned(['attest', 'verify', altered, '--policy', 'policy.yaml'])
    expect(refused.code).to.equal(4)
    noStack(refused)
    expect(refused.stderr).to.include("alice@example.com's drop at step manual_review").and.include('does not verify against its signature')
  })

  it('a budget grant is signed as a review is (a real model server spends the budget)', async () => {
    const server = await ModelServer.start(() => ({content: JSON.stringify({title: 'x'}), usage: {prompt_tokens: 10000, completion_tokens: 5000}}))
    try {
      await writeFile(path.join(dir, 'prompt.md'), 'Name it.\n')
      await writeFile(path.join(dir, 'out.schema.json'), JSON.stringify({type: 'object', required: ['title'], properties: {title: {type: 'string'}}}))
      const step = (id: string, next = ''): string => `  - {id: ${id}, kind: model, prompt: prompt.md, output_schema: out.schema.json${next}}\n`
      await writeFile(path.join(dir, 'b.yaml'), `version: 1\nname: budgeted\nbudget: {tokens: 14000}\nsteps:\n${step('a', ', next: b')}${step('b')}`)
      const paused = await run(['run', 'b.yaml', '--policy', 'policy.yaml', '--json'], {OPENAI_BASE_URL: server.url})
      expect(paused.code, paused.stderr).to.equal(10)
      const id = json<{run_id: string}>(paused).run_id
      const granted = await spawned(['budget', id, '--add-tokens', '50000', '--note', 'worth it'], {OPENAI_BASE_URL: server.url})
      expect(granted.code, granted.stderr).to.equal(0)
      const signed = await signedLine(id, 'budget_granted')
      expect(signed).to.deep.include({run_id: id, step: 'b', decision: 'grant +50000 tokens', note: 'worth it'})
      expect(signed.signature.key_id).to.equal(key.id)
      const {r, report} = await audit()
      expect(r.code, r.stdout).to.equal(0)
      expect(report.signed_decisions!.map((d) => [d.decision, d.trust])).to.deep.equal([['grant +50000 tokens', 'trusted']])
    } finally {
      await server.close()
    }
  })

  it('a decision given with pipe resume --decision is signed as pipe review signs it', async () => {
    const id = await start()
    const resumed = await spawned(['resume', id, '--decision', 'go', '--note', 'fine'])
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(await signedLine(id)).to.deep.include({run_id: id, step: 'manual_review', decision: 'go', note: 'fine'})
    const {r, report} = await audit()
    expect(r.code, r.stdout).to.equal(0)
    expect(report.signed_decisions!.map((d) => d.trust)).to.deep.equal(['trusted'])
  })

  it('a vote under an approvals rule is signed on its vote_cast line', async () => {
    await writeFile(
      path.join(dir, 'policy.yaml'),
      `version: 1\napprovals:\n  manual_review: {required: 1, from: [alice@example.com]}\nattestation:\n  trusted_keys:\n${entry(key, 'release-manager')}`,
    )
    const id = await start()
    expect((await spawned(['review', id, '--decision', 'go'])).code).to.equal(0)
    const signed = await signedLine(id, 'vote_cast')
    expect(signed).to.deep.include({step: 'manual_review', decision: 'go'})
    const {r, report} = await audit()
    expect(r.code, r.stdout).to.equal(0)
    expect(report.signed_decisions!.map((s) => s.trust)).to.deep.equal(['trusted'])
  })
})

describe('signed decisions on a PostgreSQL store: the same records, the same checks', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let cleanup: () => Promise<void>
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-signed-pg-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
    execFileSync('git', ['-C', dir, 'config', 'user.email', 'alice@example.com'])
    await writeFile(path.join(dir, 'p.yaml'), REVIEWED)
  })
  afterEach(async () => cleanup())

  it('a signed review verifies; its line changed in the table fails audit verify, naming the decision', async () => {
    const db = await cluster.createDatabase()
    const url = cluster.url(db)
    const env = {XDG_CONFIG_HOME: path.join(dir, 'config'), PIPE_SIGNING_KEY: undefined, PIPE_USER: undefined, PIPE_INTERACTIVE: '0'}
    // In this process but for the audit that finds the changed line (a process).
    const run = (args: string[]): Promise<CliResult> => pipeHere([...args, '--store', url], {cwd: dir, env})
    const key = json<KeyInfo>(await pipeHere(['keys', 'generate', '--json'], {cwd: dir, env}))
    await writeFile(
      path.join(dir, 'policy.yaml'),
      `version: 1\nattestation:\n  trusted_keys:\n    - {id: "${key.id}", name: release-manager, public_key: "${key.public_key}"}\n`,
    )
    const started = await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--json'])
    expect(started.code, started.stderr).to.equal(10)
    const id = json<{run_id: string}>(started).run_id
    expect((await run(['review', id, '--decision', 'go', '--note', 'matches the brief'])).code).to.equal(0)
    const good = await run(['audit', 'verify', '--json'])
    expect(good.code, good.stdout + good.stderr).to.equal(0)
    expect(json<AuditJson>(good).signed_decisions!.map((s) => [s.run_id, s.step, s.by.id, s.trust])).to.deep.equal([
      [id, 'manual_review', 'alice@example.com', 'trusted'],
    ])
    await cluster.sql(
      db,
      `SET session_replication_role = replica; UPDATE pipe_events SET line = replace(line, '"note":"matches the brief"', '"note":"matches the brieF"') WHERE run_id = '${id}'`,
    )
    const bad = await pipe(['audit', 'verify', '--json', '--store', url], {cwd: dir, env, timeoutMs: 60000})
    expect(bad.code).to.equal(4)
    noStack(bad)
    const signed = json<AuditJson>(bad).problems.filter((p) => p.field === 'signed')
    expect(signed).to.have.length(1)
    expect(signed[0]!.file).to.match(/^pipe_events\(\d+\)$/)
    expect(signed[0]!.record).to.equal(`${id}: alice@example.com's go at step manual_review (review_given)`)
  })
})
