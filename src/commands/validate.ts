import {Args} from '@oclif/core'
import {validateFiles, type ValidateResult} from '../config/validate-files.js'
import {formatDiagnostic} from '../config/diagnostics.js'
import {PipeError} from '../errors.js'
import {kindCatalog} from '../steps/registry.js'
import {PipeCommand} from '../cli/base-command.js'

export default class Validate extends PipeCommand {
  static override summary = 'Check pipeline, policy and answers files and report every error with its line and column.'
  static override description = `Each file is checked in stages: YAML syntax (duplicate keys, alias bombs, binary or empty files), the JSON Schema (unknown keys with suggestions, wrong types), then the rules a schema cannot express (unknown steps, unreachable steps, unbounded loops, undefined gates, unregistered step kinds, missing prompt files).

The kind of each file is read from its yaml-language-server $schema line, else from its name (policy*.yaml, *answers*.yaml), else it is taken as a pipeline.

Errors are printed as FILE:LINE:COL  json.path  message. Exit code 0 only when every file is valid.`
  static override examples = [
    {description: 'Check the shipped pipeline', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml'},
    {description: 'Check several files; the errors as JSON', command: '<%= config.bin %> <%= command.id %> pipelines/*.yaml policy.yaml --json'},
  ]
  static override strict = false
  static override args = {
    file: Args.string({description: 'Files to check (pipelines, policy.yaml, answers files).', required: true}),
  }

  async run(): Promise<ValidateResult> {
    const {argv} = await this.parse(Validate)
    const result = await validateFiles(argv as string[], kindCatalog)
    if (!this.jsonEnabled()) {
      for (const file of result.files) {
        if (file.valid) this.progress(`ok  ${file.file} (${file.kind})`)
        for (const d of file.diagnostics) process.stdout.write(`${formatDiagnostic(d)}\n`)
      }
      const bad = result.files.filter((f) => !f.valid)
      if (bad.length > 0) this.progress(`${result.error_count} error(s) in ${bad.length} of ${result.files.length} file(s)`)
    }
    if (!result.valid) {
      if (this.jsonEnabled()) {
        process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
        this.jsonPrinted = true
      }
      throw new PipeError('E_CONFIG', `${result.error_count} error(s) in ${result.files.filter((f) => !f.valid).length} file(s)`, {hint: 'Fix the errors listed above; each names its file, line and column.'})
    }
    return result
  }
}
