/**
 * pipe's expression language: `${{ … }}` in pipeline YAML, CEL inside (@marcbachmann/cel-js).
 * This module is self-contained: it knows JSON Schemas and values, not pipelines, so the config
 * loader and the engine build its inputs from what they have.
 *
 * Design notes
 * - Templates (template.ts). A scalar that is exactly one `${{ expr }}` (whitespace around is
 *   ignored) yields the expression's typed value; expressions inside longer text are stringified:
 *   strings as they are, numbers in shortest round-trip form, true/false, null as nothing, lists
 *   and maps as compact JSON. `$${{` writes a literal `${{`. The closing `}}` is found outside CEL
 *   string literals, `//` comments and `{…}` map literals, so `'a}}b'` and nested maps work.
 * - Offsets. Every diagnostic has an offset and length: within the expression (check) or within
 *   the scalar's value (checkTemplate). scalarOffsetMapper (source-map.ts) maps a value offset to
 *   the scalar's source text (quotes, escapes, folded lines), which the loader adds to the yaml
 *   node's range[0] and turns into line:col with its LineCounter.
 * - Scope. Expressions read `inputs`, `steps.<id>.outputs` / `.outcome`, `spec`, `run` (id,
 *   feature_id, parent), `secrets`, and per-expression aliases (a foreach's `as:`). The checker
 *   resolves every reference against declared JSON Schemas: an object schema that lists
 *   `properties` is closed unless `additionalProperties` says otherwise; `{type: object}` with
 *   no properties, a missing schema, or a combinator with several branches is dyn (unchecked).
 *   Unknown names, inputs, steps, secrets and fields are errors with a did-you-mean.
 * - Types. The same schemas become CEL types (closed objects -> message types, open ones ->
 *   map<string, T>, arrays -> list<T>, integer -> int, number -> double, nullable or mixed ->
 *   dyn), and cel-js's checker reports type errors (`size(l) == 'x'`). CEL does not mix int
 *   and double: a `number` field compares with `2.0`, not `2`.
 * - Values. At run time values are converted by the same schemas (integer -> BigInt, number ->
 *   double, undeclared integral numbers -> BigInt), and results come back as JSON: BigInt to
 *   number when it is a safe integer, else an error; timestamps to RFC 3339 strings; bytes,
 *   durations and types are errors (convert with string()).
 * - Safety. cel-js interprets a parsed tree: no JavaScript is generated or eval'd, and nothing
 *   goes to a shell. Limits: expression length, cel-js parse limits (AST nodes, depth), result
 *   size (measured while converting, so shared structure cannot explode), and a budget of
 *   steps and time per evaluation (meter.ts): inputs are not the author's, and a synchronous
 *   loop lets no signal through. matches() is RE2 (regex.ts), linear in the text.
 * - Caching. Each checker and evaluator parses each distinct expression once (per alias set).
 * - Inputs (inputs.ts). Declarations, `-i key=value` parsing, values file, defaults, strict
 *   coercion; every problem collected.
 *
 * Integration (what the loader and engine do with this)
 * - Per pipeline, build ExprDeclarations: `inputs` = the `inputs:` mapping; `steps` = every step
 *   id with its kind's outputs schema (or the step's own `output_schema`) and its kind's
 *   outcomes; `spec` = the spec schema; `secrets` = the `secrets:` list. Then one ExprChecker
 *   (validate, --dry-run) and one ExprEvaluator (run) per pipeline.
 * - Validate: for each string scalar with hasTemplate(), checker.checkTemplate(value, {aliases,
 *   expect}) (`expect: 'bool'` for `when:`; aliases for a foreach's `with:` = {[as]:
 *   elementSchema(checker.check(itemsExpression).schema)}); map each diagnostic's offset with
 *   scalarOffsetMapper(source slice, node.type, value) + node.range[0] to line:col.
 *   `references` tells which steps an expression reads (for ordering checks).
 * - Run: evaluator.bind({inputs, steps, spec, run, secrets}, aliases).render(scalar) for each
 *   templated field; record the resolved values (with secrets redacted) in the snapshot.
 */
export {ExprChecker, type CheckOptions, type CheckResult, type ExprDiagnostic, type TemplateCheckResult} from './check.js'
export {ExprEvaluator, BoundExpressions, ExpressionError, type AliasValue, type ExprContext} from './evaluate.js'
export {
  checkDeclarations,
  coerce,
  parseInputPairs,
  resolveInputs,
  type InputDeclaration,
  type InputProblem,
  type InputSources,
  type InputType,
  type InputValue,
  type ResolvedInputs,
} from './inputs.js'
export {DEFAULT_LIMITS, type ExprLimits} from './limits.js'
export {DYN, elementSchema, schemaRef, type JsonSchema, type JsonSchemaLike, type SchemaRef} from './schema.js'
export {ROOT_NAMES, aliasProblem, type AliasTypes, type ExprDeclarations} from './scope.js'
export {decodeScalar, scalarOffsetMapper, type ScalarType} from './source-map.js'
export {hasTemplate, parseTemplate, type ExprPart, type Template, type TemplatePart, type TextPart} from './template.js'
export {stringify, type JsonValue} from './values.js'
