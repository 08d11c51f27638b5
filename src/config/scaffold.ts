/**
 * `pipe init`: the files of a new pipeline from one of the templates shipped in templates/ (the
 * default `model`: inputs, a model step with its prompt and output schema, a choice on the model's
 * reply, end steps; its model step is guarded by the `use_model` input, false by default, so the
 * scaffold validates, dry-runs and runs end to end offline at once). Each comes with a policy and a
 * `pipe test` file that passes offline.
 */
import {existsSync, statSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {readdir, readFile, writeFile} from '../util/fs-async.js'
import {PipeError} from '../errors.js'
import {schemasDir} from '../schema/registry.js'
import {makeDirs} from '../util/fs.js'

export interface ScaffoldOptions {
  dir: string
  name?: string
  force?: boolean
  /** The starting point (TEMPLATES; default model). */
  template?: string
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

/**
 * The starting points `pipe init --template` offers, each a folder of templates/ shipped with pipe:
 * a pipeline, what it needs (prompt, schema, child pipeline, data), a policy allowing exactly what
 * it runs, and a `pipe test` file that passes offline (a model's reply recorded in a cassette).
 */
export const TEMPLATES = {
  model: 'typed inputs, a model step with its prompt and output schema, a choice on its reply, end steps',
  command: 'a command parsed into lines, a choice on them, a file written, end steps (no model)',
  foreach: 'one child run per file of a folder, typed outputs fanned in with sum() (no model)',
  agent: "an agent step with a tool of the pipeline's own (git grep) and read_file, under a policy allowing exactly that command",
  coding: "a checkpoint, an agent's edit of the files it may touch, QA (syntax, tests), then a commit or a rollback to the checkpoint",
} as const
export type TemplateName = keyof typeof TEMPLATES

function isTemplate(name: string): name is TemplateName {
  return Object.hasOwn(TEMPLATES, name)
}

export const templatesDir = fileURLToPath(new URL('../../templates/', import.meta.url))

/** What a template's files say in place of these: the pipeline's name and where pipe's schemas are from the new folder. */
function filled(text: string, name: string, dir: string): string {
  return text
    .replaceAll('{{pipe:name}}', name)
    .replace(/\{\{pipe:schema:([a-z-]+)\}\}/g, (_, kind: string) => schemaRef(dir, schemasDir, `${kind}.schema.json`))
}

/**
 * A template's files, relative, its pipeline first. A file that `pipe test` or an editor would
 * take for one of pipe's own where it lies (a test file, discovered from the checkout's root) is
 * kept with a `.template` suffix, dropped in the new folder.
 */
async function templateFiles(template: TemplateName): Promise<string[]> {
  const root = path.join(templatesDir, template)
  const entries = await readdir(root, {recursive: true, withFileTypes: true})
  const files = entries
    .filter((e) => e.isFile())
    .map((e) =>
      path
        .relative(root, path.join(e.parentPath ?? (e as unknown as {path: string}).path, e.name))
        .split(path.sep)
        .join('/'),
    )
  return files.sort((a, b) => (a === 'pipeline.yaml' ? -1 : b === 'pipeline.yaml' ? 1 : a < b ? -1 : 1))
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
  const asked = options.template ?? 'model'
  if (!isTemplate(asked)) {
    throw new PipeError('E_INVALID_ARGS', `there is no template "${asked}"`, {
      hint: `Choose one of: ${Object.entries(TEMPLATES)
        .map(([t, what]) => `${t} (${what})`)
        .join('; ')}.`,
    })
  }
  const template = asked
  const files: Array<[string, string]> = await Promise.all(
    (await templateFiles(template)).map(async (kept): Promise<[string, string]> => [
      kept.replace(/\.template$/, ''),
      filled(await readFile(path.join(templatesDir, template, kept), 'utf8'), name, dir),
    ]),
  )
  const blocked = inTheWay(
    dir,
    files.map(([rel]) => rel),
  )
  if (blocked.length > 0)
    throw new PipeError('E_CONFLICT', `pipe init cannot write the ${template} template into ${dir}: ${blocked.join('; ')}; nothing was written`, {
      hint: 'Move them out of the way, or scaffold into another directory (pipe init DIR); --force overwrites files, never a folder.',
    })
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

/**
 * What no write could get past, found before anything is written (a scaffold left half made would
 * then refuse its own files): something other than a folder where a folder must go (DIR itself,
 * prompts/), and a folder (or a device) where a file must go.
 */
function inTheWay(dir: string, files: readonly string[]): string[] {
  const out = new Set<string>()
  const kindOf = (full: string): string | undefined => {
    const info = statSync(full, {throwIfNoEntry: false})
    if (info === undefined) return undefined
    return info.isDirectory() ? 'folder' : info.isFile() ? 'file' : 'special file'
  }
  for (const rel of files) {
    const parts = rel.split('/')
    for (let i = 0; i < parts.length; i++) {
      const full = path.join(dir, ...parts.slice(0, i))
      const kind = kindOf(full)
      if (kind === undefined) break
      if (kind !== 'folder') {
        out.add(`${full} is a ${kind}, where a folder must go`)
        break
      }
      if (i === parts.length - 1) {
        const target = path.join(dir, rel)
        const at = kindOf(target)
        if (at !== undefined && at !== 'file') out.add(`${target} is a ${at}, where the file ${rel} must go`)
      }
    }
  }
  return [...out]
}
