/**
 * The inputs a step gives a child pipeline (`with:`), checked against the inputs the child
 * declares: no unknown input, literals of the declared type, expressions whose type can fit, every
 * required input given. Reported under the rule child-pipeline, at the step that names the child.
 */
import {didYouMean} from '../../util/suggest.js'
import {resolveInputs, type InputDeclaration} from '../../expr/inputs.js'
import type {Diagnostic} from '../diagnostics.js'
import {withTypeProblems} from '../expressions.js'
import type {ChildPipelineRef} from '../kind-contract.js'
import type {LoadedPipeline, Segment} from '../loaded.js'
import {diag} from '../positions.js'
import type {RuleContext} from './rule.js'

/** Step `index` of `loaded` gives the child `ref` (`name` says which, for messages) its inputs; the child declares `declared`. */
export function childInputProblems(
  loaded: LoadedPipeline,
  {catalog, checker}: RuleContext,
  index: number,
  ref: ChildPipelineRef,
  name: string,
  declared: Readonly<Record<string, {required?: boolean; default?: unknown}>>,
): Diagnostic[] {
  const diagnostics: Diagnostic[] = []
  const at: Segment[] = ['steps', index, ...ref.at]
  const rule = (d: Diagnostic): Diagnostic => ({...d, rule: 'child-pipeline'})
  const inline = ref.file === undefined
  const given = ref.with ?? {}
  const withAt: Segment[] = ['steps', index, ...(ref.withAt ?? ref.at)]
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(declared, key)) {
      const names = Object.keys(declared)
      diagnostics.push(
        rule(
          diag(
            loaded,
            [...withAt, key],
            `${name} ${inline ? 'declare' : 'has'} no input "${key}"${names.length > 0 ? `${didYouMean(key, names)}; ${inline ? 'they declare' : 'its inputs'}: ${names.join(', ')}` : `; ${inline ? 'declare it under inputs: of the step' : 'it declares no inputs'}`}`,
            true,
          ),
        ),
      )
    }
  }
  // Literal values are checked against their input's type now; expressions when they resolve.
  // As at run time, a string input takes a number, boolean, list or map as its text.
  const asGiven = (key: string, value: unknown): unknown =>
    (declared[key] as {type?: string}).type === 'string' && value !== null && typeof value !== 'string' ? JSON.stringify(value) : value
  const literals = Object.fromEntries(
    Object.entries(given)
      .filter(([key, value]) => Object.hasOwn(declared, key) && !(typeof value === 'string' && value.includes('${{')))
      .map(([key, value]) => [key, asGiven(key, value)]),
  )
  const typed = resolveInputs(declared as Record<string, InputDeclaration>, {file: {name: 'with:', data: literals}})
  for (const problem of typed.problems) {
    if (problem.input === undefined || problem.source !== 'file' || !Object.hasOwn(literals, problem.input)) continue
    diagnostics.push(rule(diag(loaded, [...withAt, problem.input], `input "${problem.input}" of ${name}: ${problem.message.replace(/^with:: /, '')}`)))
  }
  // An expression given under with: is in a step, so the loader loaded a checker for this pipeline.
  if (checker) {
    for (const problem of withTypeProblems(
      loaded,
      catalog,
      checker,
      index,
      String((ref.withAt ?? ['with'])[0]),
      given,
      declared as Record<string, {type?: string}>,
    )) {
      diagnostics.push(rule(diag(loaded, [...withAt, problem.key], `input "${problem.key}" of ${name} ${problem.message}`)))
    }
  }
  for (const [key, decl] of Object.entries(declared)) {
    if (decl.required === true && decl.default === undefined && !Object.hasOwn(given, key)) {
      diagnostics.push(rule(diag(loaded, ref.with ? withAt : at, `${name} require${inline ? '' : 's'} input "${key}": give it under with:`, true)))
    }
  }
  return diagnostics
}
