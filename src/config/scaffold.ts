/**
 * `pipe init`: the files of a new pipeline (inputs, a model step with its prompt and output
 * schema, a choice on the model's reply, end steps, a README). The model step is guarded by the
 * `use_model` input, false by default, so the scaffold validates, dry-runs and runs end to end
 * offline at once; `-i use_model=true` with a model endpoint makes it do the real work.
 */
import {existsSync} from 'node:fs'
import {writeFile} from '../util/fs-async.js'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {schemasDir} from '../schema/registry.js'
import {makeDirs} from '../util/fs.js'

export interface ScaffoldOptions {
  dir: string
  name?: string
  force?: boolean
}

export interface ScaffoldResult {
  dir: string
  name: string
  /** Paths written, relative to dir, in the order written. */
  files: string[]
  /** Paths that existed before and were overwritten (only with force). */
  overwritten: string[]
}

// The pipeline schema's pattern for name.
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/

/**
 * The `$schema=` target for a pipeline in `dir`: relative to the installed schemas when they share
 * a directory below the filesystem root (a project with pipe in node_modules, or pipe's own
 * checkout), so the line survives moving the project; else the absolute path.
 */
export function schemaRef(dir: string, schemas = schemasDir, file = 'pipeline.schema.json'): string {
  const target = path.join(schemas, file)
  const from = path.resolve(dir)
  const rel = path.relative(from, target)
  const up = rel.split(path.sep).filter((part) => part === '..').length
  const sharesAncestor = !path.isAbsolute(rel) && up < from.split(path.sep).filter(Boolean).length
  return sharesAncestor ? rel.split(path.sep).join('/') : target
}

function pipelineYaml(name: string, schema: string): string {
  return `# yaml-language-server: $schema=${schema}
#
# Scaffolded by \`pipe init\`: typed inputs, a model step with its prompt (prompts/classify.md) and
# output schema (schemas/classify.schema.json), a choice on the model's reply, and end steps.
# The model step runs only with -i use_model=true (it needs OPENAI_API_KEY, and OPENAI_BASE_URL
# for another OpenAI-compatible server); without it the run takes the "offline" end.
#   pipe validate pipeline.yaml
#   pipe run pipeline.yaml -i title="Login fails with a 500" --dry-run
#   pipe run pipeline.yaml -i title="Login fails with a 500" -i severity=high -i use_model=true
version: 1
name: ${name}
description: Triage an issue - a model labels it (bug, feature or question), a choice routes on the label, an end step closes the run.

provider:
  kind: auto            # openai when OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline rules
  model: gpt-4o-mini
  temperature: 0

inputs:                 # given as -i title=... -i severity=high, or --inputs FILE.yaml
  title: {type: string, required: true, description: the issue's title}
  body: {type: string, default: "", description: the issue's text}
  severity: {type: string, enum: [low, medium, high], default: medium, description: how bad the reporter says it is}
  use_model: {type: boolean, default: false, description: ask the model; false skips the classify step so the run needs no endpoint}

steps:
  - id: classify
    kind: model                        # prompt + vars -> a reply that must match output_schema
    when: "\${{ inputs.use_model }}"    # false -> outcome skipped, recorded, and the run goes on
    prompt: prompts/classify.md        # {{title}}, {{body}}, {{severity}} are filled from vars
    vars:
      title: "\${{ inputs.title }}"
      body: "\${{ inputs.body }}"
      severity: "\${{ inputs.severity }}"
    output_schema: schemas/classify.schema.json
    next: route

  - id: route
    kind: choice                       # the first when that holds wins, else default
    choices:
      - {when: "\${{ steps.classify.outcome == 'skipped' }}", next: offline}
      - {when: "\${{ steps.classify.outputs.value.label == 'bug' && inputs.severity == 'high' }}", next: urgent}
      - {when: "\${{ steps.classify.outputs.value.label == 'question' }}", next: answered}
    default: triaged

  - id: offline
    kind: end
    status: succeeded
    reason: "classify was skipped: run with -i use_model=true and a model endpoint to label \\"\${{ inputs.title }}\\""

  - id: urgent
    kind: end
    status: blocked                    # a person has to look at it now
    reason: "urgent bug: \${{ steps.classify.outputs.value.summary }}"

  - id: answered
    kind: end
    status: succeeded
    reason: "question: \${{ steps.classify.outputs.value.summary }}"

  - id: triaged
    kind: end
    status: succeeded
    reason: "\${{ steps.classify.outputs.value.label }}: \${{ steps.classify.outputs.value.summary }}"
`
}

const PROMPT = `Label the issue below for a triage queue.

Rules:
- \`label\` is bug (something that worked or should work does not), feature (a new capability)
  or question (the reporter needs an answer, not a change).
- \`summary\` is one sentence a maintainer can act on, in your own words.
- \`confidence\` is between 0 and 1.
- The reporter rated the severity {{severity}}; keep that in mind, but judge the label yourself.

Title: {{title}}

{{body}}
`

const SCHEMA = `${JSON.stringify(
  {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'Classification',
    description: 'The reply of the classify step: what kind of issue it is, in one sentence.',
    type: 'object',
    additionalProperties: false,
    required: ['label', 'summary'],
    properties: {
      label: {type: 'string', enum: ['bug', 'feature', 'question']},
      summary: {type: 'string', minLength: 1, maxLength: 300},
      confidence: {type: 'number', minimum: 0, maximum: 1},
    },
  },
  null,
  2,
)}\n`

function readme(name: string): string {
  return `# ${name}

A pipeline scaffolded by \`pipe init\`. Files:

- \`pipeline.yaml\`: typed inputs, a \`model\` step (\`classify\`), a \`choice\` on its reply (\`route\`) and \`end\` steps.
- \`prompts/classify.md\`: the model's prompt; \`{{title}}\`, \`{{body}}\` and \`{{severity}}\` come from the step's \`vars\`.
- \`schemas/classify.schema.json\`: what the reply must look like; expressions such as
  \`\${{ steps.classify.outputs.value.label }}\` are checked against it.

Next steps (in this directory):

1. Check it: \`pipe validate pipeline.yaml\` (expressions are type-checked against the inputs and the output schema).
2. See the plan: \`pipe run pipeline.yaml -i title="Login fails with a 500" --dry-run\`.
3. Run it offline: \`pipe run pipeline.yaml -i title="Login fails with a 500"\`. \`use_model\` defaults to
   false, so \`classify\` is recorded as skipped and the run ends at \`offline\`.
4. Run it with a model: set \`OPENAI_API_KEY\` (and \`OPENAI_BASE_URL\` for another OpenAI-compatible
   server, e.g. \`http://127.0.0.1:11434/v1\` for Ollama), then
   \`pipe run pipeline.yaml -i title="Login fails with a 500" -i severity=high -i use_model=true\`.
5. Draw it: \`pipe graph pipeline.yaml\`; after a run, \`pipe graph pipeline.yaml --run RUN\` colours the path it took.
6. Make it yours: edit the prompt, add fields to the schema (then use them in expressions), add
   steps (\`command\` with \`parse: json\`, \`foreach\`, \`pipeline\`), or start from the default pipeline
   with \`extends:\` and \`overlay:\`. pipe's docs/language.md has every field.
`
}

/** Writes the scaffold into options.dir; refuses (E_CONFLICT, listing them) to overwrite files unless force. */
export async function scaffoldPipeline(options: ScaffoldOptions): Promise<ScaffoldResult> {
  const dir = path.resolve(options.dir)
  const name = options.name ?? (path.basename(dir) || 'pipeline')
  if (!NAME.test(name)) {
    throw new PipeError('E_INVALID_ARGS', `"${name}" is not a usable pipeline name`, {
      hint: 'Give --name with letters, digits, ".", "_" or "-", starting with a letter or digit.',
    })
  }
  const files: Array<[string, string]> = [
    ['pipeline.yaml', pipelineYaml(name, schemaRef(dir))],
    ['prompts/classify.md', PROMPT],
    ['schemas/classify.schema.json', SCHEMA],
    ['README.md', readme(name)],
  ]
  const existing = files.map(([rel]) => rel).filter((rel) => existsSync(path.join(dir, rel)))
  if (existing.length > 0 && options.force !== true) {
    throw new PipeError('E_CONFLICT', `${existing.length} file(s) already exist in ${dir}: ${existing.join(', ')}`, {
      hint: 'Scaffold into another directory (pipe init DIR), or pass --force to overwrite them.',
    })
  }
  for (const [rel, text] of files) {
    const full = path.join(dir, rel)
    makeDirs(path.dirname(full))
    await writeFile(full, text)
  }
  return {dir, name, files: files.map(([rel]) => rel), overwritten: existing}
}
