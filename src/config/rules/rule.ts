/** The shape of one validate rule, and what every rule is given besides the pipeline. */
import type {Diagnostic} from '../diagnostics.js'
import type {CronClass} from '../../util/cron.js'
import type {ExprCheckerClass} from '../expressions.js'
import type {KindCatalog} from '../kind-contract.js'
import type {LoadedPipeline} from '../loaded.js'

export interface RuleContext {
  catalog: KindCatalog
  /** The expression checker the loader loaded for this pipeline; absent when no step holds `${{`. */
  checker?: ExprCheckerClass | undefined
  /** croner, loaded by the loader only for a pipeline that declares schedules. */
  cron?: CronClass | undefined
  /** The structure is wrong, so a check that trips over a malformed value is skipped, not fatal. */
  tolerant?: boolean
}

export interface Rule {
  /** The rule's name, as diagnostics show it (a finding may carry its own: a kind's check). */
  name: string
  check(loaded: LoadedPipeline, context: RuleContext): Diagnostic[]
}
