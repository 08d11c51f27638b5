/**
 * Rules over the files a pipeline names: each inside the pipeline's tree, present, and its prompt
 * using only the variables its step fills (a model step's unused vars are a warning).
 */
import {existsSync, statSync} from 'node:fs'
import path from 'node:path'
import {didYouMean} from '../../util/suggest.js'
import {variablesUsed} from '../../util/template.js'
import type {Diagnostic} from '../diagnostics.js'
import {fileEscape, PIPELINE_FILE_FIELDS} from '../pipeline-files.js'
import {diag, promptText, stepDir} from '../positions.js'
import type {Rule} from './rule.js'

export const fileOutsidePipeline: Rule = {
  name: 'file-outside-pipeline',
  check(loaded) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      for (const field of PIPELINE_FILE_FIELDS) {
        const name = (step as unknown as Record<string, unknown>)[field]
        if (typeof name !== 'string') continue
        const problem = fileEscape(stepDir(loaded, i), name)
        if (problem)
          out.push(
            diag(loaded, ['steps', i, field], `${field} "${name}" ${problem}; files a pipeline names must lie inside its directory (${stepDir(loaded, i)})`),
          )
      }
    })
    return out
  },
}

export const missingFile: Rule = {
  name: 'missing-file',
  check(loaded) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      if (!('prompt' in step) || step.prompt === undefined) return
      if (fileEscape(stepDir(loaded, i), step.prompt)) return
      const full = path.resolve(stepDir(loaded, i), step.prompt)
      let problem: string | undefined
      if (!existsSync(full)) problem = 'does not exist'
      else if (!statSync(full).isFile()) problem = 'is not a file'
      if (problem) out.push(diag(loaded, ['steps', i, 'prompt'], `prompt file "${step.prompt}" ${problem} (looked for ${full})`))
    })
    return out
  },
}

export const promptVariable: Rule = {
  name: 'prompt-variable',
  check(loaded, {catalog}) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      // A kind without a fixed set (model: its vars) checks its prompt in its own rule.
      const allowed = catalog[step.kind]?.promptVariables
      if (allowed === undefined || !('prompt' in step)) return
      const text = promptText(loaded, step, i)
      if (text === undefined) return
      for (const use of variablesUsed(text)) {
        if (allowed.includes(use.name)) continue
        out.push(
          diag(
            loaded,
            ['steps', i, 'prompt'],
            `prompt file "${step.prompt}" line ${use.line} column ${use.col} uses {{${use.name}}}, which a ${step.kind} step does not fill${didYouMean(use.name, allowed)} (variables: ${allowed.join(', ') || 'none'})`,
          ),
        )
      }
    })
    return out
  },
}

export const modelUnusedVar: Rule = {
  name: 'model-unused-var',
  check(loaded) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      // A step whose prompt is filled from its vars (a model step).
      if (!('vars' in step) || step.vars === undefined) return
      const text = promptText(loaded, step, i)
      if (text === undefined) return
      const used = new Set(variablesUsed(text).map((use) => use.name))
      for (const name of Object.keys(step.vars ?? {})) {
        if (!used.has(name))
          out.push(
            diag(
              loaded,
              ['steps', i, 'vars', name],
              `var "${name}" of step "${step.id}" is not used by its prompt file "${step.prompt}" (no {{${name}}} in it)`,
              true,
            ),
          )
      }
    })
    return out
  },
}
