/**
 * Every command, by id (words joined by ':'), each as the import() of its module: in the CLI's
 * bundle a command's modules are initialised only when it runs. The build describes every command
 * from this map into the manifest (dist/cli/commands.json) that help, completion and the router
 * read; test/cli/startup.test.ts checks that every file in src/commands/ is listed.
 */
import type {CommandStatics} from '../cli/manifest.js'

export const COMMANDS: Record<string, () => Promise<{default: CommandStatics}>> = {
  answer: () => import('../commands/answer.js'),
  attest: () => import('../commands/attest.js'),
  'attest:verify': () => import('../commands/attest/verify.js'),
  'audit:verify': () => import('../commands/audit/verify.js'),
  autocomplete: () => import('../commands/autocomplete.js'),
  'autocomplete:script': () => import('../commands/autocomplete/script.js'),
  budget: () => import('../commands/budget.js'),
  cancel: () => import('../commands/cancel.js'),
  confirm: () => import('../commands/confirm.js'),
  export: () => import('../commands/export.js'),
  graph: () => import('../commands/graph.js'),
  help: () => import('../commands/help.js'),
  init: () => import('../commands/init.js'),
  'keys:generate': () => import('../commands/keys/generate.js'),
  'keys:list': () => import('../commands/keys/list.js'),
  'ledger:list': () => import('../commands/ledger/list.js'),
  lsp: () => import('../commands/lsp.js'),
  'pipeline:resolve': () => import('../commands/pipeline/resolve.js'),
  'policy:check': () => import('../commands/policy/check.js'),
  'policy:explain': () => import('../commands/policy/explain.js'),
  'policy:init': () => import('../commands/policy/init.js'),
  publish: () => import('../commands/publish.js'),
  replay: () => import('../commands/replay.js'),
  resume: () => import('../commands/resume.js'),
  review: () => import('../commands/review.js'),
  rollback: () => import('../commands/rollback.js'),
  run: () => import('../commands/run.js'),
  'runs:list': () => import('../commands/runs/list.js'),
  'runs:show': () => import('../commands/runs/show.js'),
  'schedule:list': () => import('../commands/schedule/list.js'),
  'schedule:run-due': () => import('../commands/schedule/run-due.js'),
  'snapshot:list': () => import('../commands/snapshot/list.js'),
  'snapshot:show': () => import('../commands/snapshot/show.js'),
  'spec:diff': () => import('../commands/spec/diff.js'),
  'spec:list': () => import('../commands/spec/list.js'),
  'spec:show': () => import('../commands/spec/show.js'),
  stats: () => import('../commands/stats.js'),
  'store:archive': () => import('../commands/store/archive.js'),
  'store:copy': () => import('../commands/store/copy.js'),
  test: () => import('../commands/test.js'),
  validate: () => import('../commands/validate.js'),
  view: () => import('../commands/view.js'),
  worker: () => import('../commands/worker.js'),
}
