import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {loadPolicyFile, resolvePolicy} from '../config/policy.js'
import {detectKind, validateFiles, type PipelineCheck, type ValidateResult} from '../config/validate-files.js'
import {renderDiagnostics} from '../cli/views.js'
import {PipeError} from '../errors.js'
import {deniedCommands, kindCatalog, unmatchedApprovals} from '../steps/registry.js'
import {PipeCommand} from '../cli/base-command.js'
import {jsonText} from '../util/terminal-text.js'

export default class Validate extends PipeCommand {
  static override summary = 'Check pipeline, policy and answers files and report every error with its line and column.'
  static override description = `Each file is checked in stages: YAML syntax (duplicate keys, alias bombs, binary or empty files), the JSON Schema (unknown keys with suggestions, wrong types), then the rules a schema cannot express (unknown steps, unreachable steps, unbounded loops, undefined gates, unregistered step kinds, missing prompt files, a step that needs a spec where no step before it can have written one).

Warnings do not fail the check: a failure outcome (a command's failure, QA's or a gate's fail) with no on: route, which ends the run failed; a step that needs a spec where some path reaches it without one.

Given a policy (--policy FILE, or one policy file among the files), every command and QA argument vector of the pipelines is checked against it, and one the policy would deny is an error. Without one, they are checked against the policy a run from the working directory would use (the nearest policy.yaml up to the repository root, else the built-in policy, which allows no command), and one it would deny is a warning: a run may still name another policy with --policy. An argument that is an expression may be any one argument here: an argv is denied when no value of it could match an allowed_commands entry.

The kind of each file is read from its yaml-language-server $schema line, else from its name (policy*.yaml, *answers*.yaml), else it is taken as a pipeline.

Errors are printed as FILE:LINE:COL  json.path  message. Exit code 0 only when every file is valid.`
  static override examples = [
    {description: 'Check the shipped pipeline', command: '<%= config.bin %> <%= command.id %> pipelines/default.yaml'},
    {description: 'Check several files; the errors as JSON', command: '<%= config.bin %> <%= command.id %> pipelines/*.yaml policy.yaml --json'},
    {
      description: "Check a pipeline's commands against the policy it will run under",
      command: '<%= config.bin %> <%= command.id %> examples/coding/pipeline.yaml --policy examples/coding/policy.yaml',
    },
  ]
  static override flags = {
    policy: Flags.string({
      description: "Check the pipelines' commands against this policy (default: the one policy file among the files, if any).",
      helpValue: 'FILE',
    }),
  }
  static override strict = false
  static override args = {
    file: Args.string({description: 'Files to check (pipelines, policy.yaml, answers files).', required: true}),
  }

  async run(): Promise<ValidateResult> {
    const {argv, flags} = await this.parse(Validate)
    const files = argv as string[]
    const result = await validateFiles(files, kindCatalog, await this.policyCheck(files, flags.policy))
    if (!this.jsonEnabled()) {
      for (const file of result.files) {
        if (file.valid) this.progress(`ok  ${file.file} (${file.kind})`)
        process.stdout.write(renderDiagnostics([...file.diagnostics, ...file.warnings]))
      }
      const bad = result.files.filter((f) => !f.valid)
      if (bad.length > 0) this.progress(`${result.error_count} error(s) in ${bad.length} of ${result.files.length} file(s)`)
      if (result.warning_count > 0) this.progress(`${result.warning_count} warning(s)`)
    }
    if (!result.valid) {
      if (this.jsonEnabled()) {
        process.stdout.write(`${jsonText(result)}\n`)
        this.jsonPrinted = true
      }
      throw new PipeError('E_CONFIG', `${result.error_count} error(s) in ${result.files.filter((f) => !f.valid).length} file(s)`, {
        hint: 'Fix the errors listed above; each names its file, line and column.',
      })
    }
    return result
  }

  /**
   * The policy to check commands against: --policy, else the only policy file given (a denied
   * command is an error); else the one a run from here would use (a denied command is a warning).
   */
  private async policyCheck(files: string[], flag: string | undefined): Promise<PipelineCheck | undefined> {
    let file = flag
    if (file === undefined) {
      const policies: string[] = []
      for (const f of files) if ((await detectKind(f)) === 'policy') policies.push(f)
      if (policies.length > 1) return undefined
      if (policies.length === 0) {
        const implicit = await resolvePolicy(undefined, process.cwd())
        // An invalid policy.yaml here is reported when it is checked itself; the pipelines are not judged against it.
        if (!implicit.ok) return undefined
        return (pipeline) =>
          deniedCommands(pipeline, implicit.loaded).map((d) => ({
            ...d,
            message: `${d.message} (a run from here without --policy uses this policy)`,
            severity: 'warning' as const,
          }))
      }
      file = policies[0]
    }
    const loaded = await loadPolicyFile(file!)
    if (!loaded.ok) {
      if (flag === undefined) return undefined
      throw new PipeError('E_CONFIG', `the policy ${flag} is not valid`, {hint: `Run pipe validate ${flag} and fix it first.`})
    }
    return (pipeline) => [...deniedCommands(pipeline, loaded.loaded), ...unmatchedApprovals(pipeline, loaded.loaded)]
  }
}
