import {mkdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {specToMarkdown} from '../spec/markdown.js'
import {writeFileAtomic} from '../util/fs.js'
import {requireSpec} from './model-support.js'
import type {StepHandler} from './types.js'

export const publish: StepHandler<'publish'> = {
  kind: 'publish',
  summary: 'publish the reviewed spec version to its targets',
  outcomes: () => ['success'],
  changesSpec: false,
  safeToRetry: true,
  async run(context) {
    const spec = requireSpec(context, 'publish')
    const decision = context.history.latestOutput<string>('review_decision')
    if ((context.step.require_review ?? true) && decision !== 'go') {
      throw new PipeError('E_STATE', `spec ${spec.meta.spec_version} has no review decision "go" (latest: ${decision ?? 'none'})`, {
        hint: 'Put a review step before publish and approve it with --decision go.',
      })
    }
    const results = []
    for (const target of context.step.targets) {
      const dir = path.resolve(context.cwd, target.dir, spec.meta.feature_id)
      await mkdir(dir, {recursive: true})
      const json = `${JSON.stringify(spec, null, 2)}\n`
      const jsonFile = path.join(dir, `${spec.meta.spec_version}.json`)
      // Publishing the same version again is a no-op; different content under the same name is a conflict.
      const existing = await readFile(jsonFile, 'utf8').catch(() => null)
      if (existing !== null && existing !== json) {
        throw new PipeError('E_CONFLICT', `${jsonFile} already holds different content for ${spec.meta.spec_version}`, {hint: 'Published files are never overwritten; move the old file away if it is wrong.'})
      }
      if (existing === null) await writeFileAtomic(jsonFile, json)
      await writeFileAtomic(path.join(dir, `${spec.meta.spec_version}.md`), specToMarkdown(spec))
      results.push({target: target.name, type: target.type, external_id: path.relative(context.cwd, jsonFile), status: existing === null ? 'published' : 'already_published'})
    }
    return {
      type: 'done',
      outcome: 'success',
      reason: `published ${spec.meta.spec_version} to ${results.map((r) => `${r.target} (${r.external_id})`).join(', ')}`,
      inputs: {canonical_spec_ref: spec.meta.spec_version, review_decision: decision ?? null, idempotency_keys: context.step.targets.map((t) => `${spec.meta.feature_id}+${t.name}+${spec.meta.spec_version}`)},
      outputs: {publish_result: results},
    }
  },
}
