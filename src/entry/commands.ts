/**
 * Every command, by id: oclif's explicit command strategy (package.json, oclif.commands) reads this
 * map from the CLI's one bundle, dist/cli/main.cjs, instead of finding a file per command. The
 * manifest (oclif.manifest.json) is made from it, and test/cli/startup.test.ts checks that every file
 * in src/commands/ is listed.
 */
import type {Command} from '@oclif/core/command'
import Answer from '../commands/answer.js'
import Attest from '../commands/attest.js'
import AttestVerify from '../commands/attest/verify.js'
import AuditVerify from '../commands/audit/verify.js'
import Budget from '../commands/budget.js'
import Cancel from '../commands/cancel.js'
import Confirm from '../commands/confirm.js'
import Export from '../commands/export.js'
import Graph from '../commands/graph.js'
import Help from '../commands/help.js'
import Init from '../commands/init.js'
import KeysGenerate from '../commands/keys/generate.js'
import KeysList from '../commands/keys/list.js'
import LedgerList from '../commands/ledger/list.js'
import Lsp from '../commands/lsp.js'
import PipelineResolve from '../commands/pipeline/resolve.js'
import PolicyCheck from '../commands/policy/check.js'
import PolicyExplain from '../commands/policy/explain.js'
import PolicyInit from '../commands/policy/init.js'
import Publish from '../commands/publish.js'
import Replay from '../commands/replay.js'
import Resume from '../commands/resume.js'
import Review from '../commands/review.js'
import Rollback from '../commands/rollback.js'
import Run from '../commands/run.js'
import RunsList from '../commands/runs/list.js'
import RunsShow from '../commands/runs/show.js'
import SnapshotList from '../commands/snapshot/list.js'
import SnapshotShow from '../commands/snapshot/show.js'
import SpecDiff from '../commands/spec/diff.js'
import SpecList from '../commands/spec/list.js'
import SpecShow from '../commands/spec/show.js'
import Stats from '../commands/stats.js'
import StoreArchive from '../commands/store/archive.js'
import StoreCopy from '../commands/store/copy.js'
import Test from '../commands/test.js'
import Validate from '../commands/validate.js'
import View from '../commands/view.js'
import ScheduleList from '../commands/schedule/list.js'
import ScheduleRunDue from '../commands/schedule/run-due.js'
import Worker from '../commands/worker.js'

export const COMMANDS: Record<string, Command.Class> = {
  answer: Answer,
  attest: Attest,
  'attest:verify': AttestVerify,
  'audit:verify': AuditVerify,
  budget: Budget,
  cancel: Cancel,
  confirm: Confirm,
  export: Export,
  graph: Graph,
  help: Help,
  init: Init,
  'keys:generate': KeysGenerate,
  'keys:list': KeysList,
  'ledger:list': LedgerList,
  lsp: Lsp,
  'pipeline:resolve': PipelineResolve,
  'policy:check': PolicyCheck,
  'policy:explain': PolicyExplain,
  'policy:init': PolicyInit,
  publish: Publish,
  replay: Replay,
  resume: Resume,
  review: Review,
  rollback: Rollback,
  run: Run,
  'runs:list': RunsList,
  'runs:show': RunsShow,
  'schedule:list': ScheduleList,
  'schedule:run-due': ScheduleRunDue,
  'snapshot:list': SnapshotList,
  'snapshot:show': SnapshotShow,
  'spec:diff': SpecDiff,
  'spec:list': SpecList,
  'spec:show': SpecShow,
  stats: Stats,
  'store:archive': StoreArchive,
  'store:copy': StoreCopy,
  test: Test,
  validate: Validate,
  view: View,
  worker: Worker,
}
