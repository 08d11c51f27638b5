/** The agent's command-line splitter and its tools' argument and result schemas. */
import {expect} from 'chai'
import {mkdir, mkdtemp, rm, symlink, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {defaultPolicy} from '../../src/policy/policy.js'
import {splitCommandLine} from '../../src/policy/shell-line.js'
import {needsConfirmation, preapproval, toolLevel} from '../../src/policy/tools.js'
import {argumentProblems, commandSegments, resultProblems, searchDeadline, toolNamed, TOOLS} from '../../src/steps/agent/tools.js'

describe('splitCommandLine', () => {
  it('splits on && || ; and | with quotes honoured', () => {
    const result = splitCommandLine(`npm test && node "x y.js" 'a b' || echo it\\'s;git status | wc -l`)
    expect(result).to.deep.equal({
      ok: true,
      segments: [
        {argv: ['npm', 'test']},
        {argv: ['node', 'x y.js', 'a b'], after: '&&'},
        {argv: ['echo', "it's"], after: '||'},
        {argv: ['git', 'status'], after: ';'},
        {argv: ['wc', '-l'], after: '|'},
      ],
    })
  })

  it('keeps operators inside quotes as text', () => {
    expect(splitCommandLine(`node -e "a && b; c | d"`)).to.deep.equal({ok: true, segments: [{argv: ['node', '-e', 'a && b; c | d']}]})
  })

  for (const [line, why] of [
    ['echo $HOME', 'variables'],
    ['echo "$HOME"', 'variables'],
    ['echo `id`', 'command substitution'],
    ['node x.js > out.txt', 'redirections'],
    ['cat < in', 'redirections'],
    ['(cd a && ls)', 'subshells'],
    ['sleep 1 &', 'background'],
    ['ls *.js', 'globs'],
    ['cat ~/x', '~'],
    ['npm test &&', 'no command after'],
    ['&& npm test', 'no command before'],
    ['echo "open', 'unterminated'],
    ['', 'empty'],
  ] as const) {
    it(`refuses ${JSON.stringify(line)} (${why})`, () => {
      const result = splitCommandLine(line)
      expect(result.ok).to.equal(false)
      if (!result.ok) expect(result.error).to.contain(why)
    })
  }
})

describe('agent tool arguments and results', () => {
  it("validates each tool's arguments against its schema before it runs", () => {
    const read = toolNamed('read_file')!
    expect(argumentProblems(read, {path: 'a.js', start_line: 2})).to.equal(null)
    expect(argumentProblems(read, {})).to.match(/path/)
    expect(argumentProblems(read, {path: 'a.js', start_line: 0})).to.match(/start_line/)
    expect(argumentProblems(read, {path: 'a.js', extra: true})).to.match(/extra/)
    expect(argumentProblems(toolNamed('run_command')!, {command: 42})).to.match(/command/)
    expect(argumentProblems(toolNamed('apply_edit_blocks')!, {blocks: ''})).to.match(/blocks/)
  })

  it('every tool has a compilable argument and result schema', () => {
    for (const tool of TOOLS) {
      expect(argumentProblems(tool, {}), tool.name).to.satisfy((p: string | null) => p === null || typeof p === 'string')
      expect(resultProblems(tool, {error: 'x'}), tool.name).to.equal(null)
    }
  })

  it('checks every segment of a command line against allowed_commands; one denied segment denies all', () => {
    const policy = {
      ...defaultPolicy(),
      policy: {
        ...defaultPolicy().policy,
        allowed_commands: [
          ['npm', 'test', '...'],
          ['node', '{path}'],
        ] as Array<[string, ...string[]]>,
      },
    }
    const root = process.cwd()
    const ok = commandSegments({command: 'npm test -- --grep x && node a.js'}, {policy, root})
    expect(ok.ok).to.equal(true)
    const bad = commandSegments({command: 'npm test && rm -rf /'}, {policy, root})
    expect(bad).to.include({ok: false, denied: true})
    if (!bad.ok) expect(bad.error).to.contain('segment 2').and.contain('nothing was run')
    const piped = commandSegments({command: 'npm test | node a.js'}, {policy, root})
    expect(piped).to.include({ok: false, denied: false})
  })

  it('levels, confirmation and pre-approval come from the policy, with seed 003 defaults', () => {
    const base = defaultPolicy()
    expect(toolLevel(base, 'read_file')).to.equal('safe')
    expect(toolLevel(base, 'apply_edit_blocks')).to.equal('moderate')
    expect(toolLevel(base, 'run_command')).to.equal('dangerous')
    expect(needsConfirmation(base, 'dangerous')).to.equal(true)
    expect(needsConfirmation(base, 'moderate')).to.equal(false)
    const own = {
      ...base,
      policy: {
        ...base.policy,
        tools: {run_command: 'moderate' as const},
        confirm: ['moderate' as const],
        tools_preapproved: [['npm', 'test', '...']] as Array<[string, ...string[]]>,
      },
    }
    expect(toolLevel(own, 'run_command')).to.equal('moderate')
    expect(needsConfirmation(own, 'dangerous')).to.equal(false)
    expect(preapproval(own, ['npm', 'test', '--', 'x'], {root: process.cwd()})).to.match(/^tools_preapproved\[0\]/)
    expect(preapproval(own, ['npm', 'publish'], {root: process.cwd()})).to.equal(null)
  })
})

describe('agent tools on a real directory', () => {
  let root: string
  let outside: string
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'pipe-tools-'))
    outside = await mkdtemp(path.join(os.tmpdir(), 'pipe-outside-'))
    await mkdir(path.join(root, 'src'))
    await writeFile(path.join(root, 'src', 'a.js'), 'const a = 1\nconst b = 2\n')
    await writeFile(path.join(root, '.env'), 'TOKEN=x\n')
    await writeFile(path.join(outside, 'secret.txt'), 'secret\n')
    await symlink(outside, path.join(root, 'link'))
  })
  afterEach(async () => {
    await rm(root, {recursive: true, force: true})
    await rm(outside, {recursive: true, force: true})
    await rm(`${root}-slots`, {recursive: true, force: true})
  })
  // The command slots of this test alone: a folder shared by all of /tmp would couple test files running in parallel.
  const place = (): Parameters<(typeof TOOLS)[number]['run']>[1] => ({
    policy: defaultPolicy(),
    root,
    signal: new AbortController().signal,
    slotsDir: `${root}-slots`,
  })
  /** Runs `body` with the search deadline at 1 s: the runaway searches below end the same way as at 10 s, 9 s sooner. */
  const withShortDeadline = async (body: () => Promise<void>): Promise<void> => {
    const saved = searchDeadline.ms
    searchDeadline.ms = 1000
    try {
      await body()
    } finally {
      searchDeadline.ms = saved
    }
  }

  it('reads, lists, finds and searches inside the root, skipping forbidden paths', async () => {
    const read = await toolNamed('read_file')!.run({path: 'src/a.js', start_line: 2}, place())
    expect(read.result).to.include({content: '2: const b = 2\n', total_lines: 2})
    const list = await toolNamed('list_directory')!.run({}, place())
    // .env is forbidden and link/ leads outside the root: neither is shown.
    expect(list.result['entries']).to.deep.equal(['src/'])
    const found = await toolNamed('find_files')!.run({pattern: '**/*.js'}, place())
    expect(found.result['files']).to.deep.equal(['src/a.js'])
    const search = await toolNamed('search_text')!.run({query: 'const b'}, place())
    expect(search.result['matches']).to.deep.equal(['src/a.js:2:const b = 2'])
    for (const tool of TOOLS)
      if (tool.name !== 'run_command' && tool.name !== 'apply_edit_blocks')
        expect(resultProblems(tool, (await tool.run({path: 'src/a.js', pattern: '*', query: 'a'}, place())).result), tool.name).to.equal(null)
  })

  it('ends a search whose regular expression backtracks catastrophically, instead of hanging the run', async function () {
    this.timeout(120000)
    await writeFile(path.join(root, 'src', 'b.txt'), `${'a'.repeat(40)}!\n`)
    await withShortDeadline(async () => {
      const out = await toolNamed('search_text')!.run({query: '(a+)+$', regex: true}, place())
      expect(out.ok).to.equal(false)
      expect(out.result['error']).to.match(/ran over \d+ s and was ended/)
    })
    // The tool still answers afterwards, under its usual deadline (a loaded machine took more than the
    // short one to start the search's worker): the worker is gone, not the process.
    const again = await toolNamed('search_text')!.run({query: 'a{3}!', regex: true}, place())
    expect(again.result['matches']).to.deep.equal([`src/b.txt:1:${'a'.repeat(40)}!`])
  })

  it('ends a find_files whose glob (compiled to a regular expression) backtracks catastrophically, instead of hanging the run', async function () {
    this.timeout(120000)
    await writeFile(path.join(root, 'a'.repeat(40)), 'x\n')
    await withShortDeadline(async () => {
      const out = await toolNamed('find_files')!.run({pattern: '(a+)+!'}, place())
      expect(out.ok).to.equal(false)
      expect(out.result['error']).to.match(/matching the glob "\(a\+\)\+!" ran over \d+ s and was ended/)
    })
    const again = await toolNamed('find_files')!.run({pattern: 'src/*.js'}, place())
    expect(again.result).to.deep.equal({files: ['src/a.js'], truncated: false})
    const relative = await toolNamed('find_files')!.run({pattern: '*.js', path: 'src'}, place())
    expect(relative.result).to.deep.equal({files: ['src/a.js'], truncated: false})
    const globbed = await toolNamed('search_text')!.run({query: 'const', glob: 'src/**'}, place())
    expect(globbed.result['matches']).to.have.length(2)
  })

  it('redacts a secret in a long matching line before cutting the line, so no part of it shows', async () => {
    process.env['PIPE_TEST_TOOLS_TOKEN'] = 'TOPSECRETVALUE123'
    try {
      await writeFile(path.join(root, 'src', 'long.txt'), `${'x'.repeat(295)}TOPSECRETVALUE123 tail\n`)
      const out = await toolNamed('search_text')!.run({query: 'tail'}, place())
      const [line] = out.result['matches'] as string[]
      expect(line).to.match(/^src\/long\.txt:1:x+\[REDA…$/)
      expect(line).not.to.contain('TOPSE')
    } finally {
      delete process.env['PIPE_TEST_TOOLS_TOKEN']
    }
  })

  it('read_file shows the beginning of a line longer than its 64 KiB budget (a minified bundle), not nothing', async () => {
    await writeFile(path.join(root, 'src', 'bundle.min.js'), `${'x'.repeat(200_000)}\nsecond\n`)
    const out = await toolNamed('read_file')!.run({path: 'src/bundle.min.js'}, place())
    expect(out.result).to.include({start_line: 1, end_line: 1, total_lines: 2, truncated: true})
    const content = out.result['content'] as string
    expect(content)
      .to.match(/^1: x{1000}/)
      .and.match(/… \[line cut\]\n$/)
    expect(Buffer.byteLength(content)).to.be.at.most(64 * 1024)
    const next = await toolNamed('read_file')!.run({path: 'src/bundle.min.js', start_line: 2}, place())
    expect(next.result).to.include({content: '2: second\n', end_line: 2, total_lines: 2, truncated: false})
  })

  it('read_file counts and numbers lines as before across chunk boundaries, for files with and without a last newline, and empty ones', async () => {
    const lines = Array.from({length: 30000}, (_, i) => `line ${i + 1} ${'é'.repeat(i % 7)}`)
    await writeFile(path.join(root, 'src', 'many.txt'), `${lines.join('\n')}\n`)
    const out = await toolNamed('read_file')!.run({path: 'src/many.txt', start_line: 29999}, place())
    expect(out.result).to.include({content: `29999: ${lines[29998]}\n30000: ${lines[29999]}\n`, total_lines: 30000, end_line: 30000, truncated: false})
    const first = await toolNamed('read_file')!.run({path: 'src/many.txt'}, place())
    expect(first.result['truncated']).to.equal(true)
    expect((first.result['content'] as string).split('\n').slice(0, -1)).to.deep.equal(
      lines.slice(0, first.result['end_line'] as number).map((l, i) => `${i + 1}: ${l}`),
    )
    await writeFile(path.join(root, 'src', 'open.txt'), 'a\n\nb')
    expect((await toolNamed('read_file')!.run({path: 'src/open.txt'}, place())).result).to.include({content: '1: a\n2: \n3: b\n', total_lines: 3})
    await writeFile(path.join(root, 'src', 'empty.txt'), '')
    expect((await toolNamed('read_file')!.run({path: 'src/empty.txt'}, place())).result).to.include({content: '1: \n', total_lines: 1})
    await writeFile(path.join(root, 'src', 'bin.dat'), Buffer.concat([Buffer.alloc(100_000, 0x61), Buffer.from([0])]))
    expect((await toolNamed('read_file')!.run({path: 'src/bin.dat'}, place())).result['error']).to.contain('binary')
  })

  it('find_files and search_text do not follow a directory link, so a link looping back up neither fails nor repeats files', async () => {
    await symlink('..', path.join(root, 'src', 'up'))
    await symlink('.', path.join(root, 'self'))
    const found = await toolNamed('find_files')!.run({pattern: '**/*.js'}, place())
    expect(found.result).to.deep.equal({files: ['src/a.js'], truncated: false})
    const search = await toolNamed('search_text')!.run({query: 'const b'}, place())
    expect(search.result).to.deep.equal({matches: ['src/a.js:2:const b = 2'], truncated: false})
  })

  for (const given of ['../x.txt', '/etc/passwd', 'link/secret.txt', '.env']) {
    it(`denies ${given}`, async () => {
      const out = await toolNamed('read_file')!.run({path: given}, place())
      expect(out).to.include({ok: false, denied: true})
    })
  }
})
