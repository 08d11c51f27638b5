import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {fileEscape} from '../config/pipeline-files.js'
import {stepDir} from '../config/pipeline.js'
import {applyEditText} from '../edit/workspace.js'
import {PipeError} from '../errors.js'
import type {StepHandler} from './types.js'
import {int, obj, open} from './outputs.js'

export const edit: StepHandler<'edit'> = {
  kind: 'edit',
  summary: 'apply SEARCH/REPLACE blocks atomically inside the repository root',
  outcomes: () => ['success'],
  changesSpec: false,
  safeToRetry: false,
  outputsSchema: () => obj({edit: open({changed_lines: int})}),
  async run({step, pipeline, policy, cwd}) {
    let text = step.blocks
    if (text === undefined && step.blocks_file !== undefined) {
      const dir = stepDir(pipeline, step.id)
      const escape = fileEscape(dir, step.blocks_file)
      if (escape) throw new PipeError('E_CONFIG', `blocks_file "${step.blocks_file}" ${escape}`, {hint: 'Keep edit blocks inside the pipeline\'s directory; pipe validate reports this.'})
      const file = path.resolve(dir, step.blocks_file)
      text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
        throw new PipeError('E_CONFIG', `cannot read the edit blocks ${file} (${error.code})`, {hint: 'pipe validate checks that blocks_file exists.'})
      })
    }
    if (text === undefined) throw new PipeError('E_CONFIG', `edit step "${step.id}" has neither blocks nor blocks_file`)
    const result = await applyEditText(policy, cwd, text)
    return {
      type: 'done',
      outcome: 'success',
      reason: `edited ${result.files.length} file(s), ${result.changed_lines} line(s): ${result.files.map((f) => f.path).join(', ')}`,
      inputs: {...(step.blocks_file ? {blocks_file: step.blocks_file} : {blocks: text}), ...(step.task ? {task: step.task} : {})},
      outputs: {edit: result},
    }
  },
}
