/**
 * pipe installed in a folder whose path URLs must escape (a space, '%', '#', non-ASCII): bin/run.js
 * finds its run bundle, the bundle's vendored packages (dist/vendor/, through bin/run.js's import)
 * and the data beside it (prompts, schemas) through file URLs made from that path, and its command
 * manifest (help) from the folder it is given.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp, mkdir, readFile, symlink} from 'node:fs/promises'
import path from 'node:path'
import {examples, json, node, repoRoot, tempDir, type CliResult, codingExampleRun} from '../helpers/cli.js'
import {cannedReply, ModelServer} from '../helpers/model-server.js'

describe('pipe installed under a path with a space, %, # and non-ASCII characters', function () {
  this.timeout(240000)

  let dir: string
  let cleanup: () => Promise<void>
  let root: string
  let server: ModelServer | undefined

  before(async () => {
    ;({dir, cleanup} = await tempDir('pipe-install-path-'))
    root = path.join(dir, 'lib %41 #1 é', 'pipe')
    await mkdir(root, {recursive: true})
    for (const copied of ['bin', 'dist', 'schemas', 'pipelines', 'package.json', 'policy.yaml']) {
      await cp(path.join(repoRoot, copied), path.join(root, copied), {recursive: true})
    }
    await symlink(path.join(repoRoot, 'node_modules'), path.join(root, 'node_modules'))
  })
  after(async () => {
    await server?.close()
    await cleanup()
  })

  const pipeThere = (args: string[], cwd: string, env: Record<string, string | undefined> = {}): Promise<CliResult> =>
    node([path.join(root, 'bin', 'run.js'), ...args], {cwd, env: {PIPE_HOME: path.join(dir, 'home'), ...env}, timeoutMs: 240000})

  it("answers --version and a command's help from there", async () => {
    const version = await pipeThere(['--version'], dir)
    expect(version.code, version.stderr).to.equal(0)
    expect(version.stdout).to.match(/^pipe\/\d+\.\d+\.\d+ /)
    const help = await pipeThere(['validate', '--help'], dir)
    expect(help.code, help.stderr).to.equal(0)
    expect(help.stdout).to.contain('USAGE')
  })

  it('runs the default pipeline on an OpenAI-compatible server (openai from dist/vendor, prompts beside the bundle)', async () => {
    server = await ModelServer.start(cannedReply)
    const cwd = path.join(dir, 'openai')
    await mkdir(cwd)
    const result = await pipeThere(
      [
        'run',
        path.join(root, 'pipelines', 'default.yaml'),
        '--input',
        path.join(examples, 'full-prd.md'),
        '--decision',
        'go',
        '--provider',
        'openai',
        '--json',
      ],
      cwd,
      {
        OPENAI_BASE_URL: server.url,
        OPENAI_API_KEY: 'sk-test-0000',
      },
    )
    expect(result.code, result.stderr).to.equal(0)
    expect(json<{status: string}>(result).status).to.equal('succeeded')
    expect(server.requests.length).to.equal(3)
    expect(server.requests[0]!.body.messages[0]!.content, 'the compile prompt, read from the installation').to.be.a('string').and.not.equal('')
  })

  it('runs examples/coding-agent from its cassette (simple-git and diff from dist/vendor)', async () => {
    const example = path.join(repoRoot, 'examples', 'coding-agent')
    const repo = path.join(dir, 'median')
    await cp(path.join(example, 'scratch'), repo, {recursive: true})
    execFileSync('git', ['init', '-q'], {cwd: repo})
    const result = await pipeThere([...codingExampleRun(root), '--json'], repo)
    expect(result.code, result.stderr + result.stdout).to.equal(0)
    expect(json<{status: string}>(result).status).to.equal('succeeded')
    expect(execFileSync('git', ['log', '--format=%s'], {cwd: repo, encoding: 'utf8'}).trim()).to.equal('coding_agent: T1\npipe: checkpoint before task T1')
    expect(await readFile(path.join(repo, 'median.js'), 'utf8')).to.contain('(sorted[middle - 1] + sorted[middle]) / 2')
  })
})
