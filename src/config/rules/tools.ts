/**
 * The `custom-tool` rule: each agent tool a pipeline declares (its top-level `tools:`) has a name no
 * built-in tool has, a `parameters` that compiles as a JSON Schema of an object, a literal program
 * as argv[0], and argv expressions that read only `args` fields the parameters declare, typed by
 * them and giving one argument each. Whether the policy allows the vector is policy-check's
 * (steps/policy-check.ts), as for a command step.
 */
import {RESERVED_TOOL_NAMES} from '../agent-tools.js'
import type {Diagnostic} from '../diagnostics.js'
import {offsetMapper} from '../expressions.js'
import {compileOutputSchema} from '../output-schema.js'
import {diag} from '../positions.js'
import {schemaRef} from '../../expr/schema.js'
import {parseTemplate} from '../../expr/template.js'
import {didYouMean} from '../../util/suggest.js'
import type {Rule} from './rule.js'

/** What one argv element may give: one argument, written as text. */
const ONE_ARGUMENT = new Set(['string', 'int', 'uint', 'double', 'bool', 'dyn'])

export const customTool: Rule = {
  name: 'custom-tool',
  check(loaded, {checker: Checker}) {
    const out: Diagnostic[] = []
    for (const [name, def] of Object.entries(loaded.pipeline.tools ?? {})) {
      if (def === undefined) continue
      const at = ['tools', name]
      if (RESERVED_TOOL_NAMES.includes(name)) {
        out.push(
          diag(loaded, at, `tool "${name}" has the name of a built-in tool; name it otherwise (the built-in ones are ${RESERVED_TOOL_NAMES.join(', ')})`, true),
        )
      }
      const compiled = compileOutputSchema(def.parameters)
      const parameters = typeof compiled === 'string' ? undefined : compiled.schema
      if (typeof compiled === 'string') out.push(diag(loaded, [...at, 'parameters'], `the parameters of tool "${name}" ${compiled}`))
      if (def.argv[0]?.includes('${{'))
        out.push(diag(loaded, [...at, 'argv', 0], `argv[0] of tool "${name}" must be the program, written as it is: the policy judges it before any call`))
      const exprs = def.argv.map((text, i) => ({text, i})).filter(({text, i}) => i > 0 && text.includes('${{'))
      if (exprs.length === 0 || !Checker) continue
      const checker = new Checker({})
      // Unknown parameters are a problem of their own (reported above): the expressions are still checked, against anything.
      const aliases = {args: parameters === undefined ? undefined : schemaRef(parameters)}
      for (const {text, i} of exprs) {
        const segments = [...at, 'argv', i]
        const result = checker.checkTemplate(text, {aliases})
        const mapper = offsetMapper(loaded, segments, text)
        // Reading anything but args (inputs, steps, spec, run, secrets) is the problem, whatever else the checker says of it.
        const foreign = result.references.find((ref) => !/^args(\.|\[|$)/.test(ref))
        if (foreign !== undefined) {
          out.push(
            diag(
              loaded,
              segments,
              `${foreign}: a tool's argv reads only args (the arguments of the call)${didYouMean(foreign.split('.')[0]!, ['args'])}`,
              false,
              mapper(0),
            ),
          )
          continue
        }
        for (const d of result.diagnostics) out.push(diag(loaded, segments, d.message, false, mapper(d.offset)))
        if (result.diagnostics.length > 0) continue
        const whole = parseTemplate(text).whole
        if (whole === undefined) continue
        const type = checker.check(whole.expression, {aliases}).type
        if (type !== undefined && !ONE_ARGUMENT.has(type))
          out.push(
            diag(
              loaded,
              segments,
              `\${{ ${whole.expression.trim()} }} gives ${type}; each argv element is one argument: give a string, a number or a boolean`,
              false,
              mapper(0),
            ),
          )
      }
    }
    return out
  },
}
