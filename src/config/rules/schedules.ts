/**
 * The `schedule` rule: each schedule's cron expression parses (croner's message, the expression
 * quoted), its timezone is one Node knows, its inputs are the ones the pipeline declares (typed as
 * a run's would be: unknown names, wrong types, required ones missing), names are not repeated, and
 * each of several schedules is named.
 */
import {resolveInputs, type InputDeclaration} from '../../expr/inputs.js'
import {parseCron} from '../../util/cron.js'
import type {Diagnostic} from '../diagnostics.js'
import {diag} from '../positions.js'
import type {Rule} from './rule.js'

export const scheduleRule: Rule = {
  name: 'schedule',
  check(loaded, {cron: Cron}) {
    const out: Diagnostic[] = []
    const schedules = loaded.pipeline.schedules
    if (!Array.isArray(schedules) || Cron === undefined) return out
    const declarations = (loaded.pipeline.inputs ?? {}) as Record<string, InputDeclaration>
    const names = new Map<string, number>()
    schedules.forEach((schedule, index) => {
      if (schedule === null || typeof schedule !== 'object' || typeof schedule.cron !== 'string') return
      const at = ['schedules', index]
      const zone = typeof schedule.timezone === 'string' ? schedule.timezone : 'UTC'
      const parsed = parseCron(Cron, schedule.cron, zone)
      if (parsed.problem !== undefined) {
        const field = parsed.problem.startsWith('unknown timezone') ? 'timezone' : 'cron'
        const hint =
          field === 'timezone'
            ? '; give an IANA name such as Europe/Berlin, America/New_York or UTC'
            : '; five fields: minute hour day-of-month month day-of-week, e.g. "0 2 * * *" for 02:00 each day'
        out.push(diag(loaded, [...at, field], `${parsed.problem}${hint}`))
      }
      const name = typeof schedule.name === 'string' ? schedule.name : String(index)
      // An unnamed schedule's firings are recorded under its place in the list: with another beside
      // it, inserting or removing one would hand its firings to another schedule (one slot fired
      // twice, another never). Alone its place cannot move; naming it as its place keeps what an
      // earlier pipe recorded for it.
      if (schedules.length > 1 && typeof schedule.name !== 'string')
        out.push(
          diag(
            loaded,
            at,
            `schedule ${index} has no name: with more than one schedule each needs one, which its firings are recorded under; to keep the firings of a schedule that had none, name it as its place in the list was ("0" for the first)`,
          ),
        )
      const before = names.get(name)
      if (before !== undefined)
        out.push(diag(loaded, [...at, 'name'], `schedule ${before} is named ${JSON.stringify(name)} already; give each schedule its own name`))
      names.set(name, index)
      const given = schedule.inputs ?? {}
      if (given === null || typeof given !== 'object' || Array.isArray(given)) return
      const resolved = resolveInputs(declarations, {file: {name: `schedule ${name}'s inputs`, data: given}})
      for (const problem of resolved.problems) {
        const where = problem.input !== undefined && Object.hasOwn(given, problem.input) ? [...at, 'inputs', problem.input] : [...at, 'inputs']
        out.push(diag(loaded, Object.hasOwn(schedule, 'inputs') ? where : at, problem.message, true))
      }
    })
    return out
  },
}
