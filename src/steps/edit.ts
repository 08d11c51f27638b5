import {existsSync, statSync} from 'node:fs'
import {readFile} from '../util/fs-async.js'
import path from 'node:path'
import {fileEscape} from '../config/pipeline-files.js'
import {stepDir} from '../config/positions.js'
import type {KindFinding} from '../config/kind-contract.js'
import type {EditResult} from '../edit/workspace.js'
import {PipeError} from '../errors.js'
import {outputsOf} from './outputs.js'
import {errorVerdict} from './qa.js'
import type {KindOutputs, StepHandler} from './types.js'

export type EditOutputs = {edit: EditResult}

/** The files an edit step changed, with what undoes each change (pipe rollback, pipe export). */
export const appliedEdit = outputsOf<EditOutputs>()('edit')

export const edit: StepHandler<'edit'> = {
  kind: 'edit',
  summary: 'apply SEARCH/REPLACE blocks atomically inside the repository root',
  outcomes: () => ['success'],
  changesSpec: false,
  safeToRetry: false,
  check(step, loaded) {
    // A composed step's blocks file lies beside the file that holds the step.
    const dir = stepDir(loaded, step.id)
    const out: KindFinding[] = []
    if ((step.blocks === undefined) === (step.blocks_file === undefined)) {
      out.push({rule: 'edit-input', at: ['id'], message: `edit step "${step.id}" needs exactly one of blocks or blocks_file`})
    }
    if (step.blocks_file !== undefined && !fileEscape(dir, step.blocks_file)) {
      const full = path.resolve(dir, step.blocks_file)
      if (!existsSync(full) || !statSync(full).isFile())
        out.push({rule: 'edit-input', at: ['blocks_file'], message: `blocks_file "${step.blocks_file}" does not exist (looked for ${full})`})
    }
    return out
  },
  exportRole: {
    attempt: 'starts',
    files(snapshot, {task}) {
      const applied = appliedEdit.of(snapshot)
      // An edit that did not apply is a failed attempt: its verdict says so (seed 004's patch_apply_fail).
      const verdict = applied ? undefined : errorVerdict(snapshot, 'patch_apply_fail')
      const failures = (snapshot.errors.at(-1)?.details as {failures?: unknown} | undefined)?.failures
      return {
        files: {
          'plan.json': {step: snapshot.step.name, seq: snapshot.step.seq, task, edit: snapshot.inputs},
          'patch.diff': applied ? applied.files.map((f) => f.diff).join('') : '',
          'patch_apply.json': applied
            ? {status: 'applied', changed_lines: applied.changed_lines, files: applied.files.map(({reverse: _r, diff: _d, ...f}) => f)}
            : {status: 'failed', errors: snapshot.errors, ...(failures ? {failures} : {})},
        },
        ...(verdict ? {verdict} : {}),
      }
    },
    metrics(snapshot) {
      const applied = appliedEdit.of(snapshot)
      return applied ? {patch_lines: applied.changed_lines} : snapshot.errors.length > 0 ? {failure: 'patch_apply_fail'} : {}
    },
    timeline(snapshot) {
      const applied = appliedEdit.of(snapshot)
      return applied ? [`patch: ${applied.files.map((f) => `${f.path} (${f.changed_lines} lines)`).join(', ')}`] : []
    },
  },
  async run({step, pipeline, policy, cwd}) {
    let text = step.blocks
    if (text === undefined && step.blocks_file !== undefined) {
      const dir = stepDir(pipeline, step.id)
      const escape = fileEscape(dir, step.blocks_file)
      if (escape)
        throw new PipeError('E_CONFIG', `blocks_file "${step.blocks_file}" ${escape}`, {
          hint: "Keep edit blocks inside the pipeline's directory; pipe validate reports this.",
        })
      const file = path.resolve(dir, step.blocks_file)
      text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
        throw new PipeError('E_CONFIG', `cannot read the edit blocks ${file} (${error.code})`, {hint: 'pipe validate checks that blocks_file exists.'})
      })
    }
    if (text === undefined) throw new PipeError('E_CONFIG', `edit step "${step.id}" has neither blocks nor blocks_file`)
    const {applyEditText} = await import('../edit/workspace.js')
    const result = await applyEditText(policy, cwd, text)
    return {
      type: 'done',
      outcome: 'success',
      reason: `edited ${result.files.length} file(s), ${result.changed_lines} line(s): ${result.files.map((f) => f.path).join(', ')}`,
      inputs: {...(step.blocks_file ? {blocks_file: step.blocks_file} : {blocks: text}), ...(step.task ? {task: step.task} : {})},
      outputs: {edit: result} satisfies EditOutputs & KindOutputs<'edit'>,
    }
  },
}
