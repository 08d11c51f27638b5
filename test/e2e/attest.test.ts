import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {createHash, generateKeyPairSync, sign} from 'node:crypto'
import {chmod, copyFile, mkdir, readdir, readFile, stat, truncate, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {promisify} from 'node:util'
import {defaultPipeline, examples, json, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {clockAt} from '../helpers/tools.js'

// Most commands run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output
// and exit code). In each test the command it is about stays a real `pipe` process (each marked), as
// does a run under another clock (libfaketime, preloaded: only a process).

const run = promisify(execFile)
const fixtures = path.join(repoRoot, 'test', 'fixtures', 'attest')

interface KeyInfo {
  name: string
  id: string
  public_key: string
  private_key_file: string
  public_key_file: string
}

let dir: string
let cleanup: () => Promise<void>
let repo: string
let env: Record<string, string | undefined>
let runId: string

/** libfaketime's settings for that time when it is installed (.ci/run installs it), else none: the machine's clock, the same day but at midnight. */
function sameDayClock(spec: string): Record<string, string> {
  try {
    return clockAt(spec)
  } catch {
    return {}
  }
}
let bundle: string
let key: KeyInfo
let policy: string
const published = (): string => path.join(repo, 'published')

function noStack(r: CliResult): void {
  expect(r.stderr).not.to.match(/\n\s+at /)
  expect(r.stderr).not.to.include('E_INTERNAL')
}

/** A DSSE envelope signed by a key nobody trusts, over the given payload, as an attacker would make it. */
function forged(payload: Buffer): string {
  const {privateKey, publicKey} = generateKeyPairSync('ed25519')
  const type = 'application/vnd.in-toto+json'
  const pae = Buffer.concat([Buffer.from(`DSSEv1 ${type.length} ${type} ${payload.length} `), payload])
  const raw = publicKey.export({type: 'spki', format: 'der'}).subarray(-32)
  const keyid = `sha256:${createHash('sha256').update(raw).digest('hex')}`
  return JSON.stringify({payloadType: type, payload: payload.toString('base64'), signatures: [{keyid, sig: sign(null, pae, privateKey).toString('base64')}]})
}

/** `pipe attest verify FILE ARGS` in this process, in the folder the tests' processes run in. */
const verifyHere = (file: string, args: string[]): Promise<CliResult> => pipeHere(['attest', 'verify', file, ...args], {cwd: dir, env})

describe('pipe attest and pipe attest verify on the built CLI', function () {
  this.timeout(120000)

  before(async () => {
    ;({dir, cleanup} = await tempDir('pipe-attest-e2e-'))
    repo = path.join(dir, 'repo')
    await mkdir(repo)
    await run('git', ['init', '-q', repo])
    env = {XDG_CONFIG_HOME: path.join(dir, 'config'), PIPE_SIGNING_KEY: undefined}
    const r = await pipeHere(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'], {cwd: repo, env})
    expect(r.code, r.stderr).to.equal(0)
    runId = json<{run_id: string}>(r).run_id
    const made = await pipeHere(['keys', 'generate', '--json'], {cwd: repo, env})
    expect(made.code, made.stderr).to.equal(0)
    key = json<KeyInfo>(made)
    policy = path.join(dir, 'policy.yaml')
    await writeFile(policy, `version: 1\nattestation:\n  trusted_keys:\n    - {id: "${key.id}", name: ci, public_key: "${key.public_key}"}\n`)
    bundle = path.join(dir, 'run.intoto.jsonl')
    // In this process; the same run attested again as a process gives the same bundle (below).
    const attested = await pipeHere(['attest', runId, '--out', bundle], {cwd: repo, env})
    expect(attested.code, attested.stderr).to.equal(0)
  })
  after(async () => cleanup())

  it('a missing key: pipe attest says to run pipe keys generate, writes nothing, and after that command it attests', async () => {
    const own = {XDG_CONFIG_HOME: path.join(dir, 'empty-config'), PIPE_SIGNING_KEY: undefined}
    const out = path.join(dir, 'missing.intoto.jsonl')
    // The refusal and the key's generation as processes.
    const refused = await pipe(['attest', runId, '--out', out], {cwd: repo, env: own})
    expect(refused.code).to.equal(2)
    expect(refused.stderr).to.include('pipe keys generate')
    noStack(refused)
    expect(await stat(out).catch(() => null)).to.equal(null)
    const made = await pipe(['keys', 'generate'], {cwd: repo, env: own})
    expect(made.code, made.stderr).to.equal(0)
    expect(made.stdout).not.to.include('PRIVATE KEY')
    const file = path.join(dir, 'empty-config', 'pipe', 'keys', 'default.key')
    expect((await stat(file)).mode & 0o777).to.equal(0o600)
    const again = await pipeHere(['attest', runId, '--out', out], {cwd: repo, env: own})
    expect(again.code, again.stderr).to.equal(0)
    // A second generate never replaces the key.
    const twice = await pipeHere(['keys', 'generate'], {cwd: repo, env: own})
    expect(twice.code).to.equal(4)
    noStack(twice)
  })

  it('verifies in another folder without a store: the signature by a trusted key, the published spec as a subject, what the run was', async () => {
    const elsewhere = path.join(dir, 'elsewhere')
    await mkdir(elsewhere)
    const spec = (await readdir(path.join(published(), (await readdir(published()))[0]!)))[0]!
    const feature = (await readdir(published()))[0]!
    await copyFile(path.join(published(), feature, spec), path.join(elsewhere, spec))
    await copyFile(bundle, path.join(elsewhere, 'run.intoto.jsonl'))
    await copyFile(policy, path.join(elsewhere, 'policy.yaml'))
    // As a process; by the key alone in this process.
    const r = await pipe(['attest', 'verify', 'run.intoto.jsonl', '--policy', 'policy.yaml', '--subject', spec, '--json'], {cwd: elsewhere, env})
    expect(r.code, r.stderr).to.equal(0)
    const report = json<{
      run: {run_id: string; status: string; pipeline: {name: string}}
      signed_by: Array<{name: string}>
      checked_subjects: Array<{name: string}>
      decisions: Array<{decision: string}>
    }>(r)
    expect(report.run).to.include({run_id: runId, status: 'succeeded'})
    expect(report.run.pipeline.name).to.equal('default')
    expect(report.signed_by.map((s) => s.name)).to.deep.equal(['ci'])
    expect(report.checked_subjects[0]!.name.endsWith(spec)).to.equal(true)
    expect(report.decisions.map((d) => d.decision)).to.include('go')
    // The public key alone does as well.
    const byKey = await pipeHere(['attest', 'verify', 'run.intoto.jsonl', '--key', key.public_key_file], {cwd: elsewhere, env})
    expect(byKey.code, byKey.stderr).to.equal(0)
    expect(byKey.stdout).to.include(runId)
    expect(await readdir(elsewhere)).to.have.members([spec, 'run.intoto.jsonl', 'policy.yaml'])
  })

  it('the same run attested twice gives the same bundle', async () => {
    const second = path.join(dir, 'second.intoto.jsonl')
    // As a process (the first was made in this process).
    const r = await pipe(['attest', runId, '--out', second], {cwd: repo, env})
    expect(r.code, r.stderr).to.equal(0)
    expect(await readFile(second, 'utf8')).to.equal(await readFile(bundle, 'utf8'))
  })

  it("Debian's python3-cryptography verifies each signature over DSSE's PAE, and each statement has in-toto Statement v1's shape", async function () {
    try {
      await run('python3', ['-c', 'import cryptography, jsonschema'])
    } catch {
      this.skip()
    }
    const {stdout} = await run('python3', [path.join(fixtures, 'verify_dsse.py'), bundle, key.public_key, fixtures])
    expect(
      stdout
        .trim()
        .split('\n')
        .map((l) => l.split(' ').slice(0, 3).join(' ')),
    ).to.deep.equal(['ok 1 https://slsa.dev/provenance/v1', 'ok 2 urn:pipe:attestation:run:v1'])
  })

  describe('each tamper is refused with exit 4, naming what failed, writing nothing', () => {
    /** \`pipe attest verify FILE ARGS\` refuses: as a process for the first tamper, in this process for the others. */
    async function refused(file: string, args: string[], what: RegExp, asProcess = false): Promise<void> {
      const before = await readdir(dir)
      const r = asProcess ? await pipe(['attest', 'verify', file, ...args], {cwd: dir, env}) : await verifyHere(file, args)
      expect(r.code, r.stderr).to.equal(4)
      expect(r.stderr).to.include('E_INTEGRITY')
      expect(r.stderr).to.match(what)
      noStack(r)
      expect(await readdir(dir)).to.deep.equal(before)
    }
    const lines = async (): Promise<string[]> => (await readFile(bundle, 'utf8')).trim().split('\n')

    it('a truncated envelope', async () => {
      const text = await readFile(bundle, 'utf8')
      const file = path.join(dir, 'truncated.jsonl')
      await writeFile(file, text.slice(0, Math.floor(text.length / 3)))
      await refused(file, ['--policy', policy], /line 1 is not JSON/, true)
    })

    it('a re-encoded envelope (URL-safe base64 without padding)', async () => {
      const [first, ...rest] = await lines()
      const envelope = JSON.parse(first!) as {payload: string}
      envelope.payload = Buffer.from(envelope.payload, 'base64').toString('base64url')
      const file = path.join(dir, 're-encoded.jsonl')
      await writeFile(file, [JSON.stringify(envelope), ...rest].join('\n'))
      await refused(file, ['--policy', policy], /not standard base64/)
    })

    it('a payload edited and re-signed by an unknown key', async () => {
      const [first, ...rest] = await lines()
      const statement = JSON.parse(Buffer.from((JSON.parse(first!) as {payload: string}).payload, 'base64').toString('utf8')) as {
        subject: Array<{digest: {sha256: string}}>
      }
      statement.subject[0]!.digest.sha256 = '0'.repeat(64)
      const file = path.join(dir, 'resigned.jsonl')
      await writeFile(file, [forged(Buffer.from(JSON.stringify(statement))), ...rest].join('\n'))
      await refused(file, ['--policy', policy], /which is not trusted/)
    })

    it('a payload edited under the original signature', async () => {
      const [first, ...rest] = await lines()
      const envelope = JSON.parse(first!) as {payload: string}
      envelope.payload = Buffer.from(Buffer.from(envelope.payload, 'base64').toString('utf8').replace('"name":"default"', '"name":"evil"')).toString('base64')
      const file = path.join(dir, 'edited.jsonl')
      await writeFile(file, [JSON.stringify(envelope), ...rest].join('\n'))
      await refused(file, ['--key', key.public_key_file], /does not verify/)
    })

    it('a statement removed or one duplicated: the bundle must hold one provenance and one run statement', async () => {
      const [first, second] = await lines()
      const alone = path.join(dir, 'one-statement.jsonl')
      await writeFile(alone, `${first}\n`)
      await refused(alone, ['--policy', policy], /holds 1 envelope.*one SLSA provenance and one run statement/)
      const doubled = path.join(dir, 'doubled.jsonl')
      await writeFile(doubled, [first, second, second].join('\n'))
      await refused(doubled, ['--policy', policy], /holds 3 envelopes/)
    })

    it('a subject file changed by one byte', async () => {
      const feature = (await readdir(published()))[0]!
      const spec = (await readdir(path.join(published(), feature)))[0]!
      const bytes = await readFile(path.join(published(), feature, spec))
      bytes[10] = bytes[10]! ^ 1
      const changed = path.join(dir, 'changed', spec)
      await mkdir(path.dirname(changed), {recursive: true})
      await writeFile(changed, bytes)
      await refused(bundle, ['--policy', policy, '--subject', changed], /is not a subject of/)
    })

    it('a revoked key', async () => {
      const revoked = path.join(dir, 'revoked', 'policy.yaml')
      await mkdir(path.dirname(revoked), {recursive: true})
      await writeFile(revoked, `version: 1\nattestation:\n  trusted_keys:\n    - {id: "${key.id}", name: ci, public_key: "${key.public_key}", revoked: true}\n`)
      await refused(bundle, ['--policy', revoked], /a revoked key/)
    })
  })

  it('a bundle past 256 MiB, a folder or a device is refused at once (E_INVALID_ARGS), not read into memory', async () => {
    // Sparse files: their size costs no disk.
    const huge = path.join(dir, 'huge.intoto.jsonl')
    await writeFile(huge, '')
    await truncate(huge, 256 * 1024 * 1024 + 1)
    const cases: Array<[string, RegExp]> = [
      [huge, /huge\.intoto\.jsonl is 268435457 bytes: more than the 268435456 bytes \(256 MiB\) an attestation may be/],
      [dir, /is a folder, not a file/],
      ['/dev/zero', /\/dev\/zero is a device, not a file/],
    ]
    // The bundle past the limit as a process, the folder and the device in this process.
    for (const [index, [file, what]] of cases.entries()) {
      const r =
        index === 0
          ? await pipe(['attest', 'verify', file, '--key', key.public_key_file], {cwd: dir, env})
          : await verifyHere(file, ['--key', key.public_key_file])
      expect(r.code, `${file}: ${r.stderr}`).to.equal(2)
      expect(r.stderr, file).to.include('E_INVALID_ARGS').and.match(what)
      noStack(r)
    }
  })

  it('a --subject is hashed as it streams, not read whole: so one past 2 GiB (what one read of Node can hold) is not refused as unreadable', async function () {
    // Hashing 512 MiB: seconds on a quiet machine, minutes where the kernel's reads are slow. A safety net, not a race.
    this.timeout(600000)
    // Streaming is the property (a read of the whole file holds all of it in memory, and fails past
    // 2 GiB): a sparse subject of 512 MiB, verified by the command in this process, is hashed and
    // compared, and the process's peak memory grows by far less than the subject's size.
    const size = 512 * 1024 * 1024 + 1
    const archive = path.join(dir, 'release.tar')
    await writeFile(archive, '')
    await truncate(archive, size)
    const peakBefore = process.resourceUsage().maxRSS * 1024
    const r = await verifyHere(bundle, ['--key', key.public_key_file, '--subject', archive])
    const grew = process.resourceUsage().maxRSS * 1024 - peakBefore
    expect(r.code, r.stderr).to.equal(4)
    expect(r.stderr).to.match(/release\.tar \(sha256:[0-9a-f]{64}\) is not a subject of/)
    expect(grew, `the peak memory grew by ${grew} bytes hashing a ${size}-byte subject: it was read whole`).to.be.below(size / 2)
  })

  it('keys list names a .key file it cannot sign with and a private key others can read, instead of leaving them out without a word', async () => {
    const config = path.join(dir, 'list-config')
    const own = {...env, XDG_CONFIG_HOME: config}
    const made = await pipeHere(['keys', 'generate', '--name', 'ci', '--json'], {cwd: dir, env: own})
    expect(made.code, made.stderr).to.equal(0)
    const keys = path.join(config, 'pipe', 'keys')
    await writeFile(path.join(keys, 'broken.key'), 'not a key\n')
    await chmod(path.join(keys, 'ci.key'), 0o644)
    // As a process.
    const listed = await pipe(['keys', 'list'], {cwd: dir, env: own})
    expect(listed.code, listed.stderr).to.equal(0)
    expect(listed.stdout).to.match(/^ci {2}sha256:[0-9a-f]{64} {2}\S+\n$/)
    expect(listed.stderr).to.include(`warning: ${path.join(keys, 'broken.key')} is not listed: it is not an Ed25519 private key`)
    expect(listed.stderr)
      .to.include(`warning: ${path.join(keys, 'ci.key')} can be read by others (mode 0644)`)
      .and.include('chmod 600')
    noStack(listed)
  })

  it('a trusted key listed under an id that is not its own is a policy error, not a pass', async () => {
    const wrong = path.join(dir, 'wrong-id', 'policy.yaml')
    await mkdir(path.dirname(wrong), {recursive: true})
    await writeFile(wrong, `version: 1\nattestation:\n  trusted_keys:\n    - {id: "sha256:${'1'.repeat(64)}", name: ci, public_key: "${key.public_key}"}\n`)
    const r = await pipe(['attest', 'verify', bundle, '--policy', wrong], {cwd: dir, env})
    expect(r.code).to.equal(2)
    expect(r.stderr).to.include('E_CONFIG')
    expect(r.stderr).to.include('is not the id of this public_key')
    noStack(r)
  })

  it("a checkpoint's commit is a gitCommit subject, the commit git has", async () => {
    const work = path.join(dir, 'checkpoint')
    await mkdir(work)
    await run('git', ['init', '-q', work])
    await writeFile(path.join(work, '.gitignore'), '.pipe/\n*.jsonl\n*.yaml\n')
    await run('git', ['-C', work, 'add', '.gitignore'])
    await run('git', ['-C', work, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'init'])
    await writeFile(
      path.join(work, 'cp.yaml'),
      'version: 1\nname: cp\nsteps:\n  - {id: w, kind: write, path: out/x.txt, content: "hi\\n", next: cp}\n  - {id: cp, kind: git, action: checkpoint, allow_dirty: true, next: fin}\n  - {id: fin, kind: end, status: succeeded, reason: done}\n',
    )
    const r = await pipeHere(['run', 'cp.yaml', '--text', 'x', '--json'], {cwd: work, env})
    expect(r.code, r.stderr).to.equal(0)
    // As a process; attested again in this process.
    const attested = await pipe(['attest', json<{run_id: string}>(r).run_id, '--json'], {cwd: work, env})
    expect(attested.code, attested.stderr).to.equal(0)
    const head = (await run('git', ['-C', work, 'rev-parse', 'HEAD'])).stdout.trim()
    const result = json<{subjects: unknown[]; sha256: string; git_notes: {annotated: string[]}}>(attested)
    expect(result.subjects).to.deep.include({name: 'git-commit/cp/2', digest: {gitCommit: head}})
    // git log leads from the commit to the run (a trailer) and to the statement (a note naming the bundle's digest).
    const trailer = await run('git', ['-C', work, 'log', '-1', '--format=%(trailers:key=Pipe-Run,valueonly)'])
    expect(trailer.stdout.trim()).to.equal(json<{run_id: string}>(r).run_id)
    expect(result.git_notes.annotated).to.deep.equal([head])
    const note = await run('git', ['-C', work, 'notes', '--ref=pipe', 'show', head])
    expect(note.stdout).to.include(`Pipe-Attestation: ${result.sha256}`)
    expect(note.stdout).to.include(`Pipe-Run: ${json<{run_id: string}>(r).run_id}`)
    // Attested again, the note is replaced, not doubled; --no-git-notes leaves it as it is.
    const again = await pipeHere(['attest', json<{run_id: string}>(r).run_id, '--out', 'again.intoto.jsonl'], {cwd: work, env})
    expect(again.code, again.stderr).to.equal(0)
    expect((await run('git', ['-C', work, 'notes', '--ref=pipe', 'show', head])).stdout.match(/Pipe-Attestation/g)).to.have.length(1)
    const quiet = await pipeHere(['attest', json<{run_id: string}>(r).run_id, '--out', 'quiet.intoto.jsonl', '--no-git-notes', '--json'], {cwd: work, env})
    expect(quiet.code, quiet.stderr).to.equal(0)
    expect(json<{git_notes: {annotated: string[]}}>(quiet).git_notes.annotated).to.deep.equal([])
  })

  describe('--store: the statements against the records of a store', () => {
    it("passes against the store that made it, and names the store's check", async () => {
      const r = await pipeHere(['attest', 'verify', bundle, '--key', key.public_key_file, '--store', path.join(repo, '.pipe'), '--json'], {cwd: dir, env})
      expect(r.code, r.stderr).to.equal(0)
      expect(json<{store?: {checked: boolean}}>(r).store?.checked).to.equal(true)
    })

    it('a store whose records were altered after the attestation: exit 4, naming the record', async () => {
      const copy = path.join(dir, 'altered-store')
      await run('cp', ['-r', path.join(repo, '.pipe'), copy])
      const snapshot = path.join(copy, 'runs', runId, 'snapshots', '000002.json')
      const text = await readFile(snapshot, 'utf8')
      const parsed = JSON.parse(text) as {reason?: string}
      await writeFile(snapshot, JSON.stringify({...parsed, reason: `${parsed.reason ?? ''} (edited)`}, null, 2))
      // As a process.
      const r = await pipe(['attest', 'verify', bundle, '--key', key.public_key_file, '--store', copy], {cwd: dir, env})
      expect(r.code, r.stderr).to.equal(4)
      expect(r.stderr).to.include('E_INTEGRITY')
      expect(r.stderr).to.include('000002')
      noStack(r)
    })

    it('another store holding a run of the same id gives other statements: exit 4, naming where they part', async () => {
      // The first run of a fresh store has the attested run's id; a one-step run that writes a file
      // is enough to make other statements under that id (the default pipeline's run is not needed).
      const other = path.join(dir, 'other')
      await mkdir(other)
      await run('git', ['init', '-q', other])
      await writeFile(
        path.join(other, 'other.yaml'),
        'version: 1\nname: other\nsteps:\n  - {id: w, kind: write, path: out/x.txt, content: "other\\n", next: fin}\n  - {id: fin, kind: end, status: succeeded, reason: done}\n',
      )
      // The same id needs the same day: a suite that crosses midnight between the two runs would number this one on the next day.
      const day = /^R-(\d{4})(\d{2})(\d{2})-/.exec(runId)!
      const sameDay = sameDayClock(`@${day[1]}-${day[2]}-${day[3]} 12:00:00`)
      // A process: libfaketime is preloaded.
      const made = await pipe(['run', 'other.yaml', '--text', 'x', '--json'], {cwd: other, env: {...env, ...sameDay}})
      expect(made.code, made.stderr).to.equal(0)
      expect(json<{run_id: string}>(made).run_id).to.equal(runId)
      const r = await pipeHere(['attest', 'verify', bundle, '--key', key.public_key_file, '--store', path.join(other, '.pipe')], {cwd: dir, env})
      expect(r.code, r.stderr).to.equal(4)
      expect(r.stderr).to.match(/does not match the store's records of R-\S+: they differ at \S+/)
      noStack(r)
    })
  })

  it("a foreach run: every child's written file is a subject, and each verifies", async () => {
    const work = path.join(dir, 'foreach')
    await mkdir(work)
    await run('git', ['init', '-q', work])
    await writeFile(
      path.join(work, 'item.yaml'),
      'version: 1\nname: item\ninputs:\n  name: {type: string, required: true}\nsteps:\n  - {id: w, kind: write, path: "out/${{ inputs.name }}.txt", content: "made ${{ inputs.name }}\\n"}\n',
    )
    await writeFile(
      path.join(work, 'main.yaml'),
      'version: 1\nname: main\nsteps:\n  - {id: each, kind: foreach, items: "${{ [\'a\', \'b\'] }}", pipeline: ./item.yaml, with: {name: "${{ item }}"}, next: fin}\n  - {id: fin, kind: end, status: succeeded, reason: done}\n',
    )
    const r = await pipeHere(['run', 'main.yaml', '--text', 'x', '--json'], {cwd: work, env})
    expect(r.code, r.stderr).to.equal(0)
    const parent = json<{run_id: string}>(r).run_id
    // As a process.
    const attested = await pipe(['attest', parent, '--json'], {cwd: work, env})
    expect(attested.code, attested.stderr).to.equal(0)
    const result = json<{file: string; subjects: Array<{name: string}>}>(attested)
    expect(result.subjects.map((s) => s.name)).to.have.members(['out/a.txt', 'out/b.txt'])
    const verified = await pipeHere(['attest', 'verify', result.file, '--key', key.public_key_file, '--subject', 'out/a.txt', '--subject', 'out/b.txt'], {
      cwd: work,
      env,
    })
    expect(verified.code, verified.stderr).to.equal(0)
  })
})
