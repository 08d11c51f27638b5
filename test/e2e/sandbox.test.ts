/**
 * Commands in the bubblewrap sandbox. A real `pipe` process stays for the first run (its timeout,
 * after which the test looks for the command's leftover processes), the first policy explain, and
 * each run whose stderr must carry a fallback's warning (it is said once per process); the other
 * commands run in this process (test/helpers/pipe-here.ts: the same command from argv, its output
 * and exit code; its commands in the same sandbox).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {createServer, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {snapshotsIn} from '../helpers/stores.js'
import {needs} from '../helpers/tools.js'

interface RunJson {
  run_id: string
  status: string
  error?: {code: string; message: string; hint?: string}
}

interface CommandOut {
  exit_code: number | null
  timed_out: boolean
  stdout: {head: string; tail: string; total_bytes: number; omitted_bytes: number}
  stderr: {head: string; tail: string}
  sandbox: {contained: boolean; network: boolean; warning?: string; processes_by?: string}
}

let dir: string
let repo: string
let cleanup: () => Promise<void>

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-sandbox-'))
  repo = path.join(dir, 'repo')
  await mkdir(repo)
})
afterEach(async () => cleanup())

async function policyFile(extra = '', limits = ''): Promise<string> {
  const file = path.join(dir, 'policy.yaml')
  await writeFile(
    file,
    `version: 1\nallowed_commands:\n  - [bash, -c, "{arg}"]\n  - [node, "{path}"]\nforbidden_paths: []\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {max_output_bytes: 1024, command_timeout_ms: 60000, max_concurrent_commands: 1${limits}}\n${extra}`,
  )
  return file
}

async function pipelineFile(yaml: string): Promise<string> {
  const file = path.join(dir, 'p.yaml')
  await writeFile(file, `version: 1\nname: sandboxed\nsteps:\n${yaml}`)
  return file
}

async function run(
  steps: string,
  policy?: string,
  env: Record<string, string | undefined> = {},
  spawned = false,
): Promise<{result: RunJson; code: number | null; stderr: string}> {
  const args = ['run', await pipelineFile(steps), '--policy', policy ?? (await policyFile()), '--json']
  // The command in this process, or (spawned) a `pipe` process.
  const r = spawned ? await pipe(args, {cwd: repo, env, timeoutMs: 120000}) : await pipeHere(args, {cwd: repo, env})
  return {result: json<RunJson>(r), code: r.code, stderr: r.stderr}
}

async function command(runId: string): Promise<CommandOut> {
  // What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts).
  const snap = (await snapshotsIn(repo, runId))[0]!
  const outputs = snap.outputs as {command?: CommandOut}
  return outputs.command ?? (snap.errors[0]!.details as {command: CommandOut}).command
}

function processesTagged(tag: string): string[] {
  return execFileSync('ps', ['-eo', 'args'], {encoding: 'utf8'})
    .split('\n')
    .filter((l) => l.includes(tag))
}

describe('commands in the bubblewrap sandbox', function () {
  this.timeout(180000)

  before(function () {
    // These tests are about real containment: without bwrap they are skipped, said once at the
    // start, and under CI (where .ci/run installs it) they fail, loudly.
    needs(this, 'bubblewrap')
  })

  it('kills a setsid grandchild that keeps stdout open at the timeout, and frees the command slot', async () => {
    const tag = `pipe-setsid-${process.pid}-${Date.now()}`
    const steps = `  - {id: daemon, kind: command, run: [bash, -c, 'setsid bash -c "exec -a ${tag} sleep 300" & echo started; exec -a ${tag}-main sleep 301'], command_timeout_ms: 6000}\n`
    // A process: the test looks for the command's leftover processes after the timeout.
    const out = await run(steps, undefined, {}, true)
    expect(out.code, out.stderr).to.equal(1)
    expect(out.result.error?.code).to.equal('E_TOOL_TIMEOUT')
    const result = await command(out.result.run_id)
    expect(result).to.deep.include({timed_out: true})
    expect(result.sandbox.contained).to.equal(true)
    expect(result.stdout.head).to.equal('started\n')
    // The PID namespace is gone, and with it the process that left the process group.
    expect(processesTagged(tag)).to.deep.equal([])
    // max_concurrent_commands is 1: a second run can only finish if the first freed its slot.
    const second = await run("  - {id: again, kind: command, run: [bash, -c, 'echo again']}\n")
    expect(second.code, second.stderr).to.equal(0)
    expect((await command(second.result.run_id)).stdout.head).to.equal('again\n')
  })

  it('lets a command write only inside the repository: the root is read-only and /tmp is private', async () => {
    const outside = path.join(dir, 'outside.txt')
    const tmpFile = `/tmp/pipe-sandbox-escape-${process.pid}`
    // The repository lies under /tmp here, so its parent exists in the private /tmp: a write there succeeds and vanishes.
    const script = `echo in > inside.txt; echo out > ${outside}; echo tmp > ${tmpFile} && echo tmp-ok; touch /usr/pipe-escape || echo root-denied`
    const out = await run(`  - {id: write, kind: command, run: [bash, -c, '${script}']}\n`)
    expect(out.code, out.stderr).to.equal(0)
    const result = await command(out.result.run_id)
    expect(result.stdout.head).to.contain('tmp-ok').and.contain('root-denied')
    expect(await readFile(path.join(repo, 'inside.txt'), 'utf8')).to.equal('in\n')
    expect(existsSync(outside), 'nothing written next to the repository').to.equal(false)
    expect(existsSync(tmpFile), "the command's /tmp is its own").to.equal(false)
    expect(existsSync('/usr/pipe-escape')).to.equal(false)
  })

  it('keeps the store read-only for commands even though it lies inside the repository', async () => {
    await run('  - {id: first, kind: noop}\n')
    const out = await run("  - {id: tamper, kind: command, run: [bash, -c, 'echo x > .pipe/tampered || echo store-denied']}\n")
    expect(out.code, out.stderr).to.equal(0)
    expect((await command(out.result.run_id)).stdout.head).to.contain('store-denied')
    expect(existsSync(path.join(repo, '.pipe', 'tampered'))).to.equal(false)
  })

  it('keeps .git and literal forbidden paths read-only, so a hook or fsmonitor planted there never runs outside the sandbox', async () => {
    execFileSync('git', ['init', '-q'], {cwd: repo})
    await writeFile(path.join(repo, '.env'), 'KEY=1\n')
    // The planted script's rm is the attack the sandbox must contain: pre-approved, so it runs unasked.
    const policy = await policyFile('confirm: {destructive: allow}\n').then(async (file) => {
      await writeFile(file, (await readFile(file, 'utf8')).replace('forbidden_paths: []', 'forbidden_paths: [".git/**", ".env", "secrets/**"]'))
      return file
    })
    await mkdir(path.join(repo, 'secrets'))
    const script = [
      `printf "#!/bin/sh\\necho pwned > ${dir}/pwned\\n" > .git/hooks/post-commit || echo hook-denied`,
      `printf "[core]\\n\\tfsmonitor = touch ${dir}/pwned\\n" >> .git/config || echo config-denied`,
      'echo x > .env || echo env-denied',
      'echo x > secrets/new || echo secrets-denied',
      'rm -rf .git || echo rm-denied',
    ].join('; ')
    const out = await run(`  - {id: plant, kind: command, run: [bash, -c, '${script}']}\n`, policy)
    expect(out.code, out.stderr).to.equal(0)
    const stdout = (await command(out.result.run_id)).stdout.head
    for (const word of ['hook-denied', 'config-denied', 'env-denied', 'secrets-denied', 'rm-denied']) expect(stdout).to.contain(word)
    expect(existsSync(path.join(repo, '.git', 'hooks', 'post-commit'))).to.equal(false)
    expect(await readFile(path.join(repo, '.git', 'config'), 'utf8')).not.to.contain('fsmonitor')
    expect(await readFile(path.join(repo, '.env'), 'utf8')).to.equal('KEY=1\n')
    expect(existsSync(path.join(repo, 'secrets', 'new'))).to.equal(false)
  })

  it('has no network unless the policy allows it', async () => {
    const server: Server = createServer((_req, res) => res.end('reached'))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const {port} = server.address() as AddressInfo
    try {
      const probe = `  - {id: net, kind: command, run: [bash, -c, 'exec 3<>/dev/tcp/127.0.0.1/${port} && printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3']}\n`
      const closed = await run(probe)
      const denied = await command(closed.result.run_id)
      expect(denied.exit_code).to.not.equal(0)
      expect(denied.stdout.head).to.not.contain('reached')
      expect(denied.sandbox).to.include({contained: true, network: false})

      const open = await run(probe, await policyFile('network: true\n'))
      const allowed = await command(open.result.run_id)
      expect(allowed.exit_code, allowed.stderr.head).to.equal(0)
      expect(allowed.stdout.head + allowed.stdout.tail).to.contain('reached')
      expect(allowed.sandbox).to.include({contained: true, network: true})
    } finally {
      server.close()
    }
  })

  it('has no way to a Unix socket of the host under /run (Docker, D-Bus) when the network is off', async () => {
    const socket = `/run/pipe-sandbox-${process.pid}.sock`
    const {createServer: createNetServer} = await import('node:net')
    const server = createNetServer((c) => c.end('host-answered\n'))
    await new Promise<void>((resolve) => server.listen(socket, resolve))
    try {
      await writeFile(
        path.join(repo, 'connect.cjs'),
        `require('node:net').connect(${JSON.stringify(socket)}).on('data', (d) => process.stdout.write(String(d))).on('error', (e) => console.log('refused ' + e.code))\n`,
      )
      const out = await run('  - {id: connect, kind: command, run: [node, connect.cjs]}\n')
      expect(out.code, out.stderr).to.equal(0)
      const stdout = (await command(out.result.run_id)).stdout.head
      expect(stdout).to.contain('refused').and.not.contain('host-answered')
    } finally {
      server.close()
    }
  })

  it('caps an output flood and ends it at the timeout', async () => {
    // 5 MB at once, 5,000 times the cap, then nothing until the timeout: a flood that does not keep
    // a core (and pipe reading it) busy for the whole timeout, as an endless `yes` did.
    const out = await run("  - {id: flood, kind: command, run: [bash, -c, 'yes | head -c 5000000; exec sleep 300'], command_timeout_ms: 6000}\n")
    expect(out.result.error?.code).to.equal('E_TOOL_TIMEOUT')
    const result = await command(out.result.run_id)
    expect(result.timed_out).to.equal(true)
    expect(Buffer.byteLength(result.stdout.head) + Buffer.byteLength(result.stdout.tail)).to.be.at.most(1024)
    expect(result.stdout.total_bytes).to.be.greaterThan(100000)
  })

  it("bounds the private /tmp by memory_mb: it lives in memory, outside the process's address-space limit", async () => {
    const script = 'for i in $(seq 1 20); do head -c 10000000 /dev/zero > /tmp/f$i || { echo stopped at $i; exit 0; }; done; echo filled'
    const out = await run(`  - {id: fill, kind: command, run: [bash, -c, '${script}']}\n`, await policyFile('', ', memory_mb: 64, max_file_bytes: 16000000'))
    expect(out.code, out.stderr).to.equal(0)
    const stdout = (await command(out.result.run_id)).stdout.head
    expect(stdout)
      .to.match(/stopped at [1-7]\b/)
      .and.not.contain('filled')
  })

  it('bounds a fork loop with max_processes', async () => {
    await writeFile(
      path.join(repo, 'forks.cjs'),
      "const {spawn} = require('node:child_process')\nlet n = 0\nconst next = () => {\n  const c = spawn('sleep', ['60'], {stdio: 'ignore'})\n  c.on('error', (e) => { console.log(`started ${n} then ${e.code}`); process.exit(0) })\n  c.on('spawn', () => { n++; if (n >= 200) { console.log(`started ${n}`); process.exit(0) } else next() })\n}\nnext()\n",
    )
    const out = await run('  - {id: forks, kind: command, run: [node, forks.cjs]}\n', await policyFile('', ', max_processes: 40, memory_mb: 4096'))
    expect(out.code, out.stderr).to.equal(0)
    const result = await command(out.result.run_id)
    const match = /started (\d+) then (\w+)/.exec(result.stdout.head)
    expect(match, result.stdout.head + result.stderr.head).to.not.equal(null)
    expect(Number(match![1])).to.be.below(40)
    expect(match![2]).to.equal('EAGAIN')
  })

  it('limits the size of a file a command writes', async () => {
    const out = await run(
      "  - {id: big, kind: command, run: [bash, -c, 'head -c 3000000 /dev/zero > big.bin; echo status $?']}\n",
      await policyFile('', ', max_file_bytes: 1000000'),
    )
    expect(out.code, out.stderr).to.equal(0)
    expect((await command(out.result.run_id)).stdout.head).to.match(/status [1-9]/)
    expect((await readFile(path.join(repo, 'big.bin'))).length).to.equal(1000000)
  })

  it('refuses to run uncontained when the sandbox is required, and warns when auto falls back', async () => {
    const marker = path.join(repo, 'ran')
    const steps = `  - {id: touch, kind: command, run: [bash, -c, 'touch ${marker}']}\n`
    const refused = await run(steps, await policyFile('sandbox: required\n'), {PIPE_BWRAP: ''})
    expect(refused.code).to.equal(3)
    expect(refused.result.error?.code).to.equal('E_POLICY_DENIED')
    expect(refused.result.error?.message).to.contain('requires a sandbox')
    expect(refused.result.error?.hint).to.contain('apt-get install bubblewrap')
    expect(existsSync(marker)).to.equal(false)

    // A process: the warning is said once per process (sandbox.ts's warnOnce), and this test's own process may have said it.
    const fallback = await run(steps, await policyFile('sandbox: auto\n'), {PIPE_BWRAP: ''}, true)
    expect(fallback.code, fallback.stderr).to.equal(0)
    expect(fallback.stderr).to.contain('Warning: bubblewrap (bwrap) is not installed')
    expect(existsSync(marker)).to.equal(true)
    const result = await command(fallback.result.run_id)
    expect(result.sandbox.contained).to.equal(false)
    expect(result.sandbox.warning).to.contain('uncontained')
  })

  it('falls back with a warning when bwrap is there but cannot make its namespaces', async () => {
    const fake = path.join(dir, 'bwrap')
    await writeFile(fake, '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n', {mode: 0o755})
    const steps = "  - {id: say, kind: command, run: [bash, -c, 'echo ran']}\n"
    // A process: the warning is said once per process.
    const fallback = await run(steps, await policyFile('sandbox: auto\n'), {PIPE_BWRAP: fake}, true)
    expect(fallback.code, fallback.stderr).to.equal(0)
    expect(fallback.stderr, fallback.stderr).to.contain('cannot create its namespaces here (bwrap: No permissions to create new namespace)')
    expect((await command(fallback.result.run_id)).sandbox.contained).to.equal(false)
    const refused = await run(steps, await policyFile('sandbox: required\n'), {PIPE_BWRAP: fake})
    expect(refused.result.error?.code).to.equal('E_POLICY_DENIED')
  })

  it('keeps even an explicitly allowed node --import data: from writing outside the repository', async () => {
    const outside = `/var/tmp/pipe-import-escape-${process.pid}`
    await writeFile(path.join(repo, 'a.js'), 'export {}\n')
    const code = `import {writeFileSync} from 'node:fs'; try { writeFileSync('${outside}', 'x'); console.log('wrote') } catch (e) { console.log(e.code) }`
    const out = await run(
      `  - {id: imp, kind: command, run: [node, --import, ${JSON.stringify(`data:text/javascript,${encodeURIComponent(code)}`)}, a.js]}\n`,
      await policyFile('', '').then(async (f) => {
        await writeFile(f, (await readFile(f, 'utf8')).replace('  - [node, "{path}"]\n', '  - [node, "..."]\n'))
        return f
      }),
    )
    expect(out.code, out.stderr).to.equal(0)
    expect((await command(out.result.run_id)).stdout.head).to.equal('EROFS\n')
    expect(existsSync(outside)).to.equal(false)
  })

  it('denies node --check --import under the coding policy, allows node --check FILE, and keeps an inner --', async () => {
    const coding = path.join(repoRoot, 'examples', 'coding')
    const policy = path.join(coding, 'policy.yaml')
    const escape = await pipe(
      ['policy', 'explain', '--policy', policy, '--root', repo, '--json', '--', 'node', '--check', '--import', 'data:text/javascript,0', 'calc.js'],
      {cwd: repo},
    )
    expect(escape.code).to.equal(3)
    const plain = await pipeHere(['policy', 'explain', '--policy', policy, '--root', repo, '--json', '--', 'node', '--check', 'calc.js'], {cwd: repo})
    expect(plain.code, plain.stdout).to.equal(0)
    const inner = await pipeHere(['policy', 'explain', '--policy', policy, '--json', '--', 'node', '--', 'x'], {cwd: repo})
    expect(json<{subject: string[]}>(inner).subject, 'an inner -- is part of the argv').to.deep.equal(['node', '--', 'x'])
  })
})
