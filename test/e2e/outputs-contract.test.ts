/**
 * Step outputs are a contract: what validate lets expressions read is what the snapshots hold. On
 * the built CLI, every shipped pipeline runs through its shipped tests (offline: the rules provider
 * and recorded cassettes), and every snapshot's outputs are checked against its kind's declaration.
 */
import {expect} from 'chai'
import {createRequire} from 'node:module'
import {readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {engineAddedOutputs, kindOutputsSchema} from '../../src/steps/output-schemas.js'
import {handlerNamed} from '../../src/steps/registry.js'
import {examples, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-outputs-contract-')))
afterEach(async () => cleanup())

describe('step outputs as a contract (built CLI)', function () {
  this.timeout(300000)

  it('validate lets an expression read steps.compile.outputs.spec_version_out, and the run gives it the version compile wrote', async () => {
    const file = path.join(dir, 'versions.yaml')
    const steps = (reason: string): string =>
      [
        'version: 1',
        'name: versions',
        'steps:',
        '  - {id: ingest, kind: ingest, next: compile}',
        '  - {id: compile, kind: compile, next: done}',
        `  - {id: done, kind: end, status: succeeded, reason: "${reason}"}`,
        '',
      ].join('\n')
    await writeFile(file, steps('compiled ${{ steps.compile.outputs.spec_version_out }}'))
    const checked = await pipe(['validate', file], {cwd: dir})
    expect(checked.stderr).to.match(/^ok {2}\S*versions\.yaml \(pipeline\)\n$/)
    expect(checked.code).to.equal(0)
    const run = json<{status: string; reason: string; spec_version: string}>(
      await pipe(['run', file, '--input', path.join(examples, 'full-prd.md'), '--json'], {cwd: dir}),
    )
    expect(run.status).to.equal('succeeded')
    expect(run.reason).to.equal(`compiled ${run.spec_version}`)
    // Declared for the kinds that write a spec version only: ingest writes none, so reading it there stays an error.
    await writeFile(file, steps('ingested ${{ steps.ingest.outputs.spec_version_out }}'))
    const refused = await pipe(['validate', file], {cwd: dir})
    expect(refused.code).to.equal(2)
    expect(refused.stdout).to.match(/steps\.ingest\.outputs has no field "spec_version_out" \(it has ingest_result\)/)
  })

  it('every snapshot of every shipped pipeline holds only the outputs its kind declares, of the declared types', async () => {
    const files = [
      ...(await readdir(path.join(repoRoot, 'pipelines'))).filter((f) => f.endsWith('.pipe-test.yaml')).map((f) => path.join(repoRoot, 'pipelines', f)),
      ...(await readdir(examples, {withFileTypes: true})).filter((d) => d.isDirectory()).flatMap((d) => [path.join(examples, d.name)]),
    ]
    const result = await pipe(['test', ...files, '--keep', '--json', '--jobs', '2'], {cwd: dir, timeoutMs: 280000})
    const report = json<{passed: number; total: number; tests: Array<{name: string; kept?: string}>}>(result)
    const kept = report.tests.map((t) => t.kept).filter((k): k is string => k !== undefined)
    try {
      expect(report.passed, result.stderr).to.equal(report.total)
      expect(kept.length).to.equal(report.total)
      const require = createRequire(import.meta.url)
      type AjvClass = new (o: object) => {compile(s: object): ((d: unknown) => boolean) & {errors?: unknown}}
      const Ajv = (require('ajv') as {default: AjvClass}).default
      const ajv = new Ajv({allErrors: true, strict: false, allowUnionTypes: true})
      const validators = new Map<string, ((d: unknown) => boolean) & {errors?: unknown}>()
      const declared = (kind: string): ((d: unknown) => boolean) & {errors?: unknown} => {
        let validate = validators.get(kind)
        if (!validate) {
          const handler = handlerNamed(kind)!
          const schema = kindOutputsSchema(handler.kind)
          // What the engine adds (spec_version_out) belongs to the kinds that can write a spec version.
          const added = handler.changesSpec === false ? {} : engineAddedOutputs()
          validate = ajv.compile({...schema, properties: {...(schema['properties'] as object), ...added}})
          validators.set(kind, validate)
        }
        return validate
      }
      const broken: string[] = []
      const kinds = new Set<string>()
      let checked = 0
      for (const store of kept.map((k) => path.join(k, 'store'))) {
        for (const run of (await readdir(path.join(store, 'runs'))).filter((r) => r.startsWith('R-'))) {
          const dirOf = path.join(store, 'runs', run, 'snapshots')
          for (const file of (await readdir(dirOf)).filter((f) => f.endsWith('.json')).sort()) {
            const snapshot = JSON.parse(await readFile(path.join(dirOf, file), 'utf8')) as Snapshot
            const validate = declared(snapshot.step.kind)
            if (!validate(snapshot.outputs)) broken.push(`${snapshot.step.kind} ${snapshot.step.name}: ${JSON.stringify(validate.errors)}`)
            // spec_version_out in outputs is the version the snapshot says the step wrote, and only that.
            const own = (snapshot.outputs as Record<string, unknown>)['spec_version_out']
            if ((own ?? null) !== snapshot.spec_version_out)
              broken.push(
                `${snapshot.step.kind} ${snapshot.step.name}: outputs.spec_version_out ${String(own)} but spec_version_out ${String(snapshot.spec_version_out)}`,
              )
            kinds.add(snapshot.step.kind)
            checked++
          }
        }
      }
      expect(broken).to.deep.equal([])
      // The shipped tests reach these kinds (a check of nothing passes too).
      expect([...kinds].sort()).to.include.members(['agent', 'command', 'compile', 'foreach', 'gate', 'model', 'pipeline', 'publish', 'qa', 'review'])
      expect(checked).to.be.greaterThan(100)
    } finally {
      await Promise.all(kept.map((k) => rm(k, {recursive: true, force: true})))
    }
  })
})
