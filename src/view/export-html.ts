/** pipe export RUN --html: the run page as one file, everything inline, for a ticket or a release. */
import {randomBytes} from 'node:crypto'
import type {RunStore} from '../store/types.js'
import {writeFileAtomic} from '../util/fs.js'
import {page} from './layout.js'
import {loadRunView} from './run-data.js'
import {RUN_SCRIPT, runBody} from './run-page.js'

export function runPageHtml(view: Awaited<ReturnType<typeof loadRunView>>): string {
  return page({title: `pipe: ${view.record.run_id}`, nonce: randomBytes(16).toString('base64'), body: runBody(view, {standalone: true}), script: RUN_SCRIPT, standalone: true})
}

export async function exportRunHtml(store: RunStore, runId: string, file: string): Promise<{html: string; bytes: number}> {
  const text = runPageHtml(await loadRunView(store, runId))
  await writeFileAtomic(file, text)
  return {html: file, bytes: Buffer.byteLength(text)}
}
