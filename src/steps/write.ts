/**
 * `kind: write`: one file of the repository from a template or a value. pipe writes it itself, so the
 * path is held to what a step may touch (policy/rules.ts checkPath: the root, forbidden_paths, .git,
 * the store) and, like a file publish target, to a path no symlink leads along: a link planted by a
 * command, even one pointing inside the repository, is refused rather than written through.
 */
import {closeSync, constants, fstatSync, lstatSync, openSync, readlinkSync, readSync, writeSync} from 'node:fs'
import path from 'node:path'
import {stringify as yamlText} from 'yaml'
import type {KindFinding} from '../config/kind-contract.js'
import {PipeError} from '../errors.js'
import type {LoadedPolicy} from '../policy/policy.js'
import {assertPath} from '../policy/rules.js'
import {realish} from '../util/contain.js'
import {createFileExclusive, syncFd, writeFileAtomic} from '../util/fs.js'
import {inHeldDir, type OnLink} from '../util/held-dir.js'
import {sha256} from '../util/hash.js'
import {redact} from '../util/redact.js'
import type {KindOutputs, StepHandler, StepOf} from './types.js'

type Mode = NonNullable<StepOf<'write'>['mode']>
type Format = NonNullable<StepOf<'write'>['format']>

export type WriteOutputs = {
  /** The file, relative to the repository root, with forward slashes. */
  path: string
  /** sha256 of the whole file after the write (after an append: of everything it now holds). */
  sha256: string
  /** The file's size after the write, in bytes. */
  bytes: number
  mode: Mode
}

/** The step's `value` as the engine resolved it: any JSON value (the generated type says only "a map"). */
function valueOf(step: StepOf<'write'>): unknown {
  return (step as {value?: unknown}).value
}

/** The text the step writes: `content` as it is, or `value` in its format. */
function textOf(step: StepOf<'write'>): string {
  if (step.content !== undefined) return step.content
  const value = valueOf(step)
  const format: Format = step.format ?? 'json'
  switch (format) {
    case 'json':
      return `${JSON.stringify(value, null, 2)}\n`
    case 'yaml':
      return yamlText(value)
    case 'text':
    case 'markdown':
      if (typeof value !== 'string') {
        throw new PipeError(
          'E_CONFIG',
          `value of write step "${step.id}" is ${value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value}, but format ${format} writes a string as it is`,
          {
            hint: 'Give a string value (string(x), a join), or write it as format: json or yaml.',
          },
        )
      }
      return value
  }
}

/** The refusal of a symlink on the way: checkPath lets a link that stays inside the repository through, and this step writes what the link would redirect. */
function refuseLink(given: string): OnLink {
  return ({at, target}) => {
    throw new PipeError(
      'E_POLICY_DENIED',
      `path "${given}" is denied (sandbox): it leads through the symlink ${at} -> ${target}, which a write step never follows`,
      {
        hint: `Write to the file the link points at by its own path, or remove the symlink ${at} (a command may have planted it).`,
        details: {rule: 'sandbox', path: given},
      },
    )
  }
}

/** Appends to a regular file (made when missing), never through a symlink, and returns all it then holds. */
function appendTo(target: string, text: string, given: string): Buffer {
  const fd = openSync(target, constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o666)
  try {
    const opened = fstatSync(fd)
    if (!opened.isFile())
      throw new PipeError('E_INVALID_ARGS', `${given} is not a regular file (a folder, a FIFO or a device): a write step appends only to files`, {
        hint: 'Point path at a file.',
      })
    // A hard link is the same file under another name, perhaps in .git or outside the repository: appending would write there.
    if (opened.nlink > 1) {
      throw new PipeError(
        'E_POLICY_DENIED',
        `path "${given}" is denied (sandbox): the file has ${opened.nlink} hard links, and another of its names may lie in .git, the store or outside the repository; a write step never appends through one`,
        {
          hint: 'Remove the extra link, or write the file with mode: overwrite (which replaces the name, not the file).',
        },
      )
    }
    writeSync(fd, text)
    syncFd(fd, true)
    const {size} = fstatSync(fd)
    const whole = Buffer.alloc(size)
    let read = 0
    while (read < size) {
      const n = readSync(fd, whole, read, size - read, read)
      if (n === 0) break
      read += n
    }
    return whole.subarray(0, read)
  } finally {
    closeSync(fd)
  }
}

type Written = {outcome: 'written'; relative: string; bytes: Buffer} | {outcome: 'exists'; relative: string}

/** Why `given` cannot name a file to write, or undefined: it ends in a separator, or it is the repository root itself. */
function notAFile(given: string): string | undefined {
  if (given.trim() === '') return 'path is empty; name the file to write'
  if (/[\\/]$/.test(given)) return `path "${given}" ends in a separator and so names a folder; a write step writes a file`
  const normal = path.posix.normalize(given.replaceAll('\\', '/'))
  if (normal === '.' || normal === './') return `path "${given}" is the repository root, not a file; a write step writes a file`
  return undefined
}

/** Writes `text` to `given` under the policy, as `mode` says. */
export async function writeInside(policy: LoadedPolicy, root: string, given: string, text: string, mode: Mode): Promise<Written> {
  const problem = notAFile(given)
  if (problem !== undefined)
    throw new PipeError('E_INVALID_ARGS', problem, {
      hint: 'Give path as a file relative to the repository root, e.g. path: notes/summary.md.',
      details: {path: given},
    })
  assertPath(policy, root, given)
  // The path as written, not as resolved: checkPath resolves the links this step refuses.
  const realRoot = realish(path.resolve(root))
  const target = path.resolve(realRoot, given)
  const relative = path.relative(realRoot, target).split(path.sep).join('/')
  const onLink = refuseLink(given)
  // Every folder is opened below the one above it, never through a link, and the file is made in
  // the last one held: a command that swaps a folder for a link meanwhile cannot redirect the write.
  return inHeldDir<Written>(realRoot, relative, {create: true, onLink}, async (dir, name) => {
    const entry = dir.entry(name)
    const existing = lstatSync(entry, {throwIfNoEntry: false})
    if (existing?.isSymbolicLink()) onLink({at: relative, target: readlinkSync(entry)})
    if (existing !== undefined && mode !== 'create' && !existing.isFile()) {
      throw new PipeError('E_INVALID_ARGS', `${relative} exists and is not a regular file: a write step writes only files`, {
        hint: 'Point path at a file, or remove what is there.',
      })
    }
    const data = Buffer.from(text, 'utf8')
    switch (mode) {
      case 'create':
        // Exclusive: a name that exists, whatever it is, is left as it is.
        return (await createFileExclusive(entry, data)) ? {outcome: 'written', relative, bytes: data} : {outcome: 'exists', relative}
      case 'overwrite':
        // A rename replaces the name itself: nothing at the name is followed.
        await writeFileAtomic(entry, data)
        return {outcome: 'written', relative, bytes: data}
      case 'append':
        return {outcome: 'written', relative, bytes: appendTo(entry, text, relative)}
    }
  })
}

export const write: StepHandler<'write'> = {
  kind: 'write',
  summary: 'write one file of the repository from a template or a value (create, overwrite or append), its sha256 recorded as evidence',
  outcomes: (step) => ((step.mode ?? 'create') === 'create' ? ['success', 'exists'] : ['success']),
  failures: {
    exists: {
      code: 'E_CONFLICT',
      hint: ({run_id, step}) =>
        `Step ${step} writes with mode: create and the file already exists; nothing was written. Move the file away and pipe resume ${run_id}, or give the step mode: overwrite or append, or route on: {exists: STEP}.`,
    },
  },
  changesSpec: false,
  attestSubjects: (snapshot) => {
    const out = snapshot.outputs as Partial<WriteOutputs> | undefined
    return out?.path && out.sha256?.startsWith('sha256:') ? [{name: out.path, digest: {sha256: out.sha256.slice('sha256:'.length)}}] : []
  },
  // A second create finds the file the first made; an append appends twice.
  safeToRetry: false,
  check(step) {
    const out: KindFinding[] = []
    const hasValue = Object.hasOwn(step, 'value')
    if ((step.content === undefined) === !hasValue)
      out.push({rule: 'write-input', at: ['id'], message: `write step "${step.id}" needs exactly one of content or value`})
    if (step.content !== undefined && step.format !== undefined)
      out.push({rule: 'write-input', at: ['format'], message: 'format applies to value; content is written as it is', key: true})
    // A literal path can be judged now; one with expressions is judged when the step runs.
    if (!step.path.includes('${{')) {
      const parts = step.path.split(/[\\/]/)
      const problem = notAFile(step.path)
      if (problem !== undefined) out.push({rule: 'write-path', at: ['path'], message: problem})
      else if (path.isAbsolute(step.path))
        out.push({rule: 'write-path', at: ['path'], message: `path "${step.path}" is absolute; give a path relative to the repository root`})
      else if (path.posix.normalize(step.path.replaceAll('\\', '/')).startsWith('../'))
        out.push({rule: 'write-path', at: ['path'], message: `path "${step.path}" leaves the repository root`})
      else if (parts.some((p) => p.toLowerCase() === '.git'))
        out.push({rule: 'write-path', at: ['path'], message: `path "${step.path}" is inside a .git folder, which steps may not touch`})
    }
    return out
  },
  graph: {details: (step) => [`${step.mode ?? 'create'} ${step.path}`]},
  async run({step, policy, cwd, run}) {
    const mode: Mode = step.mode ?? 'create'
    const text = textOf(step)
    const inputs = {path: step.path, mode, ...(step.content === undefined ? {format: step.format ?? 'json'} : {})}
    const written = await writeInside(policy, cwd, step.path, text, mode)
    if (written.outcome === 'exists') {
      return {
        type: 'done',
        outcome: 'exists',
        reason: `${written.relative} already exists; mode create writes only a new file, so nothing was written`,
        inputs,
        outputs: {},
      }
    }
    const hash = sha256(written.bytes)
    const outputs = {path: written.relative, sha256: hash, bytes: written.bytes.length, mode} satisfies WriteOutputs & KindOutputs<'write'>
    const verb = mode === 'append' ? `appended ${Buffer.byteLength(text)} bytes to` : mode === 'overwrite' ? 'wrote' : 'created'
    return {
      type: 'done',
      outcome: 'success',
      reason: `${verb} ${written.relative} (${written.bytes.length} bytes, ${hash})`,
      inputs,
      outputs,
      evidence: [
        {
          type: 'file',
          link: 'file',
          source: {ref: `file://${written.relative}`, hash},
          content: {
            excerpt: [...redact(text)].slice(0, 500).join(''),
            note: `write step ${step.id} (${mode}): ${written.relative} holds ${written.bytes.length} bytes`,
          },
          linked_to: [{step: step.id}, {run_id: run.run_id}],
        },
      ],
    }
  },
}
