/**
 * kind: model on the built CLI, against a real chat-completions server on 127.0.0.1. A run that asks
 * the server, a failing run's error on stderr, the dry run, spec diff and validate are each seen from
 * a real `pipe` process once (the first case of the output_schema matrix); the other runs and checks
 * run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output and exit code),
 * asking the same server.
 */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {examples, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses, snapshotsIn, specIn} from '../helpers/stores.js'
import {cannedReply, ModelServer} from '../helpers/model-server.js'

interface RunJson {
  run_id: string
  status: string
  spec_version: string | null
  error?: {code: string; message: string; hint?: string}
}

interface Diagnostics {
  valid: boolean
  files: Array<{
    file: string
    valid: boolean
    diagnostics: Array<{line: number; col: number; message: string; rule: string; severity?: string}>
    warnings?: Array<{line: number; col: number; message: string; rule: string}>
  }>
}

const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['items'],
  properties: {items: {type: 'array', items: {type: 'object', required: ['title'], properties: {title: {type: 'string'}}}}},
}
const GOOD = {items: [{title: 'CSV export'}]}

let dir: string
let cleanup: () => Promise<void>
let server: ModelServer | undefined

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-model-'))
  await mkdir(path.join(dir, 'p', 'prompts'), {recursive: true})
  await mkdir(path.join(dir, 'p', 'schemas'), {recursive: true})
  await writeFile(path.join(dir, 'p', 'prompts', 'notes.md'), 'Notes for {{audience}} from:\n{{commits}}\n')
  await writeFile(path.join(dir, 'p', 'schemas', 'notes.schema.json'), JSON.stringify(SCHEMA, null, 2))
})
afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup()
})

const DRAFT = `  - id: draft
    kind: model
    prompt: prompts/notes.md
    vars:
      audience: customers
      commits: ["3f2a9c1 Add CSV export", "9b7e4d2 Fix rounding"]
    output_schema: schemas/notes.schema.json
`

async function pipeline(steps: string, name = 'p.yaml'): Promise<string> {
  const file = path.join(dir, 'p', name)
  await writeFile(file, `version: 1\nname: notes\nsteps:\n${steps}`)
  return file
}

function run(file: string, extra: string[] = [], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return pipe(['run', file, '--json', ...extra], {cwd: dir, env: {...(server ? {OPENAI_BASE_URL: server.url} : {}), PIPE_HOME: path.join(dir, 'home'), ...env}})
}

/** run() in this process. */
function runHere(file: string, extra: string[] = []): Promise<CliResult> {
  return pipeHere(['run', file, '--json', ...extra], {cwd: dir, env: {...(server ? {OPENAI_BASE_URL: server.url} : {}), PIPE_HOME: path.join(dir, 'home')}})
}

/** What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts). */
async function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(dir, runId)
}

describe('kind: model (a real HTTP model server on 127.0.0.1)', function () {
  this.timeout(90000)

  it('fills the prompt from vars, asks for the output schema, and records the valid reply as outputs.value', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD), usage: {prompt_tokens: 40, completion_tokens: 10}})
    const result = await run(await pipeline(DRAFT))
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('succeeded')
    const request = server.requests[0]!
    expect(request.body.response_format?.type).to.equal('json_schema')
    expect(request.body.response_format?.json_schema?.name).to.equal('draft')
    // Lists go into the prompt as indented JSON, strings as they are.
    expect(request.body.messages[1]!.content).to.equal('Notes for customers from:\n[\n  "3f2a9c1 Add CSV export",\n  "9b7e4d2 Fix rounding"\n]\n')
    expect(request.body.messages[0]!.content).to.contain('"required":["items"]')
    const [snapshot] = await snapshots(body.run_id)
    expect(snapshot!.step.kind).to.equal('model')
    expect(snapshot!.outputs).to.deep.equal({value: GOOD})
    expect(snapshot!.inputs).to.include({prompt: 'prompts/notes.md', output_schema: 'schemas/notes.schema.json'})
    expect((snapshot!.inputs as Record<string, unknown>)['vars']).to.deep.equal({
      audience: 'customers',
      commits: ['3f2a9c1 Add CSV export', '9b7e4d2 Fix rounding'],
    })
    expect(snapshot!.meta).to.include({provider: 'openai', llm_model: 'gpt-4o-mini'})
    expect(snapshot!.meta.usage).to.include({prompt_tokens: 40, completion_tokens: 10, calls: 1})
    expect(snapshot!.spec_version_out).to.equal(null)
  })

  it('sends an invalid reply back with its errors and takes the repaired one; the step model and temperature override the provider', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify({items: [{name: 'no title'}]})}, {content: '```json\n' + JSON.stringify(GOOD) + '\n```'})
    const result = await runHere(await pipeline(`${DRAFT}    model: local-7b\n    temperature: 0.2\n`))
    expect(result.code, result.stderr).to.equal(0)
    expect(server.count('draft')).to.equal(2)
    const repair = server.requests[1]!
    expect(repair.body.messages.at(-1)!.content).to.contain("/items/0 must have required property 'title'")
    expect(repair.body.model).to.equal('local-7b')
    expect((repair.body as {temperature?: number}).temperature).to.equal(0.2)
    const [snapshot] = await snapshots(json<RunJson>(result).run_id)
    expect(snapshot!.outputs).to.deep.equal({value: GOOD})
    expect(snapshot!.meta.llm_model).to.equal('local-7b')
    expect(snapshot!.meta.usage?.calls).to.equal(2)
  })

  it('fails with E_MODEL after max_repairs when no reply ever matches, and writes no spec', async () => {
    server = await ModelServer.start()
    const bad = {content: JSON.stringify({items: 'not a list'})}
    server.script('draft', bad, bad, bad, bad)
    const result = await runHere(await pipeline(`${DRAFT}    max_repairs: 1\n    spec_path: release_notes\n`))
    expect(result.code).to.equal(1)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('failed')
    expect(body.error?.code).to.equal('E_MODEL')
    expect(server.count('draft'), 'the first reply and one repair').to.equal(2)
    const [snapshot] = await snapshots(body.run_id)
    expect(snapshot!.spec_version_out).to.equal(null)
    expect(snapshot!.errors[0]!.message).to.contain('model step "draft"').and.contain('/items must be array')
    expect(body.spec_version).to.equal(null)
  })

  it('writes the value into the spec at sections.<spec_path>, a new immutable version that spec diff shows', async () => {
    server = await ModelServer.start()
    server.script('draft', {content: JSON.stringify(GOOD)})
    server.script('short', {content: JSON.stringify({items: [{title: 'Two changes'}]})})
    const steps = `${DRAFT}    spec_path: release_notes\n    next: short\n${DRAFT.replace('id: draft', 'id: short')}    spec_path: summary.short\n`
    const result = await runHere(await pipeline(steps))
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson>(result)
    const list = await snapshots(body.run_id)
    const first = list[0]!.spec_version_out!
    const second = list[1]!.spec_version_out!
    expect(first).to.match(/^S-/)
    expect(list[0]!.outputs).to.deep.equal({value: GOOD, spec_version_out: first})
    expect(body.spec_version).to.equal(second)
    const spec = await specIn(dir, second)
    expect(spec.sections).to.deep.equal({release_notes: GOOD, summary: {short: {items: [{title: 'Two changes'}]}}})
    expect(spec.meta).to.include({parent_version: first, created_by_step: 'short', status: 'draft'})
    const older = await specIn(dir, first)
    expect(older.sections, 'the first version never changes').to.deep.equal({release_notes: GOOD})
    const diff = await pipe(['spec', 'diff', first, second], {cwd: dir})
    expect(diff.code, diff.stderr).to.equal(0)
    expect(diff.stdout).to.contain('+ sections.summary')
    expect(diff.stdout).to.not.contain('release_notes')
    const markdown = await pipeHere(['spec', 'show', second], {cwd: dir})
    expect(markdown.stdout).to.contain('## release_notes').and.contain('"title": "CSV export"')
    // What `pipe audit verify` checks, in this process (helpers/stores.ts).
    await expectAuditPasses(dir, body.run_id)
  })

  it('keeps the sections when built-in kinds write later versions (compile, plan_tasks)', async () => {
    server = await ModelServer.start(cannedReply)
    server.script('draft', {content: JSON.stringify(GOOD)})
    const steps = `  - {id: ingest, kind: ingest, next: draft}\n${DRAFT}    spec_path: notes\n    next: compile\n  - {id: compile, kind: compile, next: plan}\n  - {id: plan, kind: plan_tasks}\n`
    const result = await runHere(await pipeline(steps), ['--input', path.join(examples, 'full-prd.md')])
    expect(result.code, result.stderr).to.equal(0)
    const spec = await specIn(dir, json<RunJson>(result).spec_version!)
    expect(spec.meta.created_by_step).to.equal('plan')
    expect(spec.sections).to.deep.equal({notes: GOOD})
    expect(spec.features.length).to.be.greaterThan(0)
    expect(spec.tasks.length).to.be.greaterThan(0)
  })

  it('falls back to JSON mode when the endpoint refuses JSON-schema output, still checking the reply', async () => {
    server = await ModelServer.start((request) =>
      request.body.response_format?.type === 'json_schema'
        ? {status: 400, body: {error: {message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported"}}}
        : {content: JSON.stringify(GOOD)},
    )
    server.script(
      'draft',
      {status: 400, body: {error: {message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported"}}},
      {content: '{"items": 3}'},
    )
    const result = await runHere(await pipeline(DRAFT))
    expect(result.code, result.stderr).to.equal(0)
    expect(server.requests.map((r) => r.body.response_format?.type)).to.deep.equal(['json_schema', 'json_object', 'json_object'])
    expect(server.requests[2]!.body.messages.at(-1)!.content).to.contain('/items must be array')
    const [snapshot] = await snapshots(json<RunJson>(result).run_id)
    expect(snapshot!.outputs).to.deep.equal({value: GOOD})
  })

  it('--dry-run warns that a model step would fail on the offline provider, and not when a model is configured', async () => {
    const file = await pipeline(DRAFT)
    const offline = await pipe(['run', file, '--dry-run', '--json'], {cwd: dir})
    const warnings = json<{warnings: Array<{rule: string; line: number; col: number; message: string}>}>(offline).warnings
    expect(warnings.map((w) => [w.rule, w.line, w.col])).to.deep.equal([['needs-model', 5, 11]])
    expect(warnings[0]!.message).to.contain('E_CONFIG').and.contain('OPENAI_API_KEY')
    const online = await pipeHere(['run', file, '--dry-run', '--json'], {cwd: dir, env: {OPENAI_BASE_URL: 'http://127.0.0.1:9/v1'}})
    expect(json<{warnings: unknown[]}>(online).warnings).to.deep.equal([])
  })

  it('with the offline provider, fails at once with E_CONFIG saying how to point pipe at a model', async () => {
    const result = await runHere(await pipeline(`${DRAFT}    retry: {max_retries: 3}\n`))
    expect(result.code).to.not.equal(0)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('failed')
    expect(body.error?.code).to.equal('E_CONFIG')
    expect(body.error?.message).to.contain('model step "draft" needs a model').and.contain('offline')
    const [snapshot] = await snapshots(body.run_id)
    expect(snapshot!.step.attempts, 'not retried').to.equal(1)
    expect(snapshot!.errors[0]!.hint).to.contain('OPENAI_BASE_URL').and.contain('OPENAI_API_KEY').and.contain('--provider openai').and.contain('--replay')
    // The error on stderr from a process.
    const human = await pipe(['run', await pipeline(DRAFT), '--store', '.other'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(human.stderr).to.contain('Error [E_CONFIG]').and.contain('OPENAI_API_KEY')
  })

  describe('pipe validate', () => {
    /** `pipe validate FILE --json` in this process (validate from a process: the {{var}} test and the first output_schema case). */
    async function validate(file: string): Promise<Diagnostics> {
      const result = await pipeHere(['validate', file, '--json'], {cwd: dir})
      return json<Diagnostics>(result)
    }

    it('reports a {{var}} that vars does not give, at the prompt field, with did-you-mean; an unused var is a warning', async () => {
      const file = await pipeline(DRAFT.replace('audience: customers', 'audiense: customers'))
      const result = await pipe(['validate', file], {cwd: dir})
      expect(result.code).to.equal(2)
      // Line 6 of the pipeline is `    prompt: prompts/notes.md`; the value starts at column 13.
      expect(result.stdout).to.contain(`${file}:6:13`)
      expect(result.stdout).to.contain('line 1 column 11 uses {{audience}}, which is not a key of the step\'s vars — did you mean "audiense"?')
      const ok = await validate(await pipeline(DRAFT.replace('commits: [', 'unused: 1\n      commits: ['), 'q.yaml'))
      expect(ok.valid).to.equal(true)
      const warning = (ok.files[0]!.warnings ?? ok.files[0]!.diagnostics).find((d) => d.rule === 'model-unused-var')!
      expect(warning.message).to.contain('var "unused" of step "draft" is not used')
      expect([warning.line, warning.col]).to.deep.equal([9, 7])
    })

    const badSchemas: Array<[string, string, RegExp]> = [
      ['not JSON', '{"type": "object",\n  "properties": {},,}', /is not valid JSON at line 2 column 20/],
      ['not a valid JSON Schema', JSON.stringify({type: 'object', properties: {a: {type: 'strin'}}}), /is not a valid JSON Schema: .*type/],
      ['a schema with a misspelt keyword', JSON.stringify({type: 'object', requird: ['a']}), /unknown keyword: "requird"/],
      [
        'a schema whose root is not an object',
        JSON.stringify({type: 'array', items: {type: 'string'}}),
        /must describe a JSON object: put "type": "object" at its root/,
      ],
    ]
    for (const [index, [what, text, message]] of badSchemas.entries()) {
      it(`reports an output_schema that is ${what} at file:line:col`, async () => {
        await writeFile(path.join(dir, 'p', 'schemas', 'notes.schema.json'), text)
        const file = await pipeline(DRAFT)
        // The first case from a process, the others in this process.
        const result = await (index === 0 ? pipe : pipeHere)(['validate', file], {cwd: dir})
        expect(result.code).to.equal(2)
        expect(result.stdout).to.contain(`${file}:10:20`)
        expect(result.stdout).to.match(message)
      })
    }

    // (validate's refusal from a process: the first output_schema case.)
    it('reports a missing output_schema, and prompt or output_schema files outside the tree', async () => {
      await writeFile(path.join(dir, 'secret.md'), '{{x}}')
      const missing = await validate(await pipeline(DRAFT.replace('schemas/notes.schema.json', 'schemas/nope.json')))
      expect(missing.files[0]!.diagnostics.map((d) => [d.line, d.col, d.rule])).to.deep.equal([[10, 20, 'model-step']])
      expect(missing.files[0]!.diagnostics[0]!.message).to.contain('does not exist')
      const outside = await validate(await pipeline(DRAFT.replace('prompts/notes.md', '../secret.md').replace('schemas/notes.schema.json', '/etc/passwd')))
      const found = outside.files[0]!.diagnostics.map((d) => [d.line, d.col, d.rule])
      expect(found).to.deep.include([6, 13, 'file-outside-pipeline'])
      expect(found).to.deep.include([10, 20, 'file-outside-pipeline'])
      expect(
        outside.files[0]!.diagnostics.every((d) => !d.message.includes('{{x}}')),
        'a file outside is never read',
      ).to.equal(true)
    })

    it("refuses a malformed spec_path; meta and core field names are names under sections, never the spec's own fields", async () => {
      const result = await validate(await pipeline(`${DRAFT}    spec_path: Goal..x\n`))
      expect(result.valid).to.equal(false)
      expect(result.files[0]!.diagnostics.map((d) => [d.line, d.col, d.rule])).to.deep.equal([[11, 16, 'schema']])
      for (const bad of ['meta.title', 'goal', 'features']) {
        server = await ModelServer.start()
        server.script('draft', {content: JSON.stringify(GOOD)})
        const ran = await runHere(await pipeline(`${DRAFT}    spec_path: ${bad}\n`))
        const spec = await specIn(dir, json<RunJson>(ran).spec_version!)
        expect(spec.sections?.[bad.split('.')[0]!], `${bad} is a name under sections`).to.not.equal(undefined)
        expect(spec.meta.title).to.equal(undefined)
        expect(spec.goal).to.equal('')
        expect(spec.features).to.deep.equal([])
        await server.close()
        server = undefined
      }
    })
  })
})
