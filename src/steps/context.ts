/**
 * `kind: context`: gathers repository context (steps/context/gather.ts) for the model and agent
 * steps after it, which put `${{ steps.ID.outputs.text }}` into their prompts through vars. The
 * text is recorded as repo evidence whose source.hash is its sha256, the snapshot's outputs list
 * each file with its sha256 and how much of it was shown, and every step whose fields read this
 * step's outputs names the evidence in its snapshot's inputs.context_ref (engine/record.ts).
 */
import type {KindOutputs, StepHandler} from './types.js'

export const context: StepHandler<'context'> = {
  kind: 'context',
  summary: 'gather repository context (file tree, files by glob or search, recent history) within forbidden_paths and a byte budget, recorded as evidence',
  outcomes: () => ['success'],
  changesSpec: false,
  // It reads the repository and changes nothing.
  safeToRetry: true,
  async run({step, policy, cwd, run, signal}) {
    // Gathering (git, globs, reads) is run code: loaded on the step's first run, never to validate a pipeline.
    const {CONTEXT_DEFAULTS, BYTES_PER_TOKEN, gatherContext} = await import('./context/gather.js')
    const maxBytes = step.max_bytes ?? CONTEXT_DEFAULTS.maxBytes
    const budget = step.max_tokens !== undefined ? Math.min(maxBytes, step.max_tokens * BYTES_PER_TOKEN) : maxBytes
    const bundle = await gatherContext({root: cwd, dotGit: run.workspace_git, signal}, policy, {
      tree: step.tree ?? true,
      maxTreeFiles: step.max_tree_files ?? CONTEXT_DEFAULTS.maxTreeFiles,
      files: step.files ?? [],
      search: step.search ?? [],
      maxFiles: step.max_files ?? CONTEXT_DEFAULTS.maxFiles,
      maxFileBytes: step.max_file_bytes ?? CONTEXT_DEFAULTS.maxFileBytes,
      history: step.history ?? CONTEXT_DEFAULTS.history,
      budget,
    })
    const shown = bundle.files.filter((f) => f.cut !== 'omitted').length
    const summary = `${bundle.tree.listed} of ${bundle.tree.total} path(s) listed, ${shown} of ${bundle.files.length} file(s) shown, ${bundle.history.shown} commit(s); ${bundle.bytes} of ${budget} bytes (~${bundle.tokens} tokens)${bundle.cut.length > 0 ? `; ${bundle.cut.length} cut` : ''}`
    return {
      type: 'done',
      outcome: 'success',
      reason: `gathered repository context: ${summary}`,
      inputs: {context_ref: {step: step.id, hash: bundle.hash, bytes: bundle.bytes}},
      outputs: bundle satisfies KindOutputs<'context'>,
      evidence: [
        {
          type: 'repo',
          link: 'repo',
          // Relative to the repository and free of run ids: the same repository gives the same record.
          source: {ref: `repo://./#context=${step.id}`, hash: bundle.hash},
          content: {
            excerpt: [...bundle.text].slice(0, 500).join(''),
            note: `the repository context step ${step.id} showed a model: ${summary}. Each file's path, sha256 and shown bytes are in the snapshot's outputs.files; source.hash is the sha256 of outputs.text.`.slice(
              0,
              2000,
            ),
          },
          linked_to: [{step: step.id}, {run_id: run.run_id}],
        },
      ],
    }
  },
}
