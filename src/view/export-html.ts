/** pipe export RUN --html: the run page as one file, everything inline, for a ticket or a release. */
import {randomBytes} from 'node:crypto'
import path from 'node:path'
import {PipeError} from '../errors.js'
import type {RunStore} from '../store/types.js'
import {makeDirs, writeNamedFile} from '../util/fs.js'
import {redact} from '../util/redact.js'
import {page} from './layout.js'
import {loadRunView} from './run-data.js'
import {pageTools} from './page-tools.js'
import {RUN_SCRIPT, runBody} from './run-page.js'
import {stat} from '../util/fs-async.js'

/** Redacted as a whole, as the view server redacts what it sends: the page also shows what it composes as it is read. */
export async function runPageHtml(view: Awaited<ReturnType<typeof loadRunView>>): Promise<string> {
  const tools = await pageTools()
  return redact(
    page({
      title: `pipe: ${view.record.run_id}`,
      nonce: randomBytes(16).toString('base64'),
      body: runBody(view, {standalone: true, ...tools}),
      script: RUN_SCRIPT,
      standalone: true,
    }),
  )
}

/**
 * Writes the page to `file` (its folder made if needed, as --dir does), or to standard output for
 * `-`. A folder given as the file is refused before anything is read.
 */
export async function exportRunHtml(store: RunStore, runId: string, file: string): Promise<{html: string; bytes: number}> {
  const toStdout = file === '-'
  if (!toStdout && (await stat(file).catch(() => null))?.isDirectory()) {
    throw new PipeError('E_INVALID_ARGS', `--html ${file} is a folder, not a file`, {
      hint: `Name the file to write, e.g. --html ${path.join(file, `${runId}.html`)}.`,
    })
  }
  const text = await runPageHtml(await loadRunView(store, runId))
  if (toStdout) {
    process.stdout.write(text)
    return {html: '-', bytes: Buffer.byteLength(text)}
  }
  makeDirs(path.dirname(path.resolve(file)))
  writeNamedFile(file, text)
  return {html: file, bytes: Buffer.byteLength(text)}
}
