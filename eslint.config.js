// @ts-check
import js from '@eslint/js'
import tseslint from 'typescript-eslint'
import {readFileSync} from 'node:fs'

/**
 * The direction of dependency between the folders of src/ (docs/development.md, the layers after
 * "Dependencies point one way"; test/unit/layers.test.ts keeps the two in agreement): commands
 * (and their cli/ helpers, and view/) -> app (the use cases) -> engine -> steps -> the rest. Each entry lists the
 * folders a folder must not import, by static import, re-export or dynamic import(). A relative
 * path that climbs out of the folder (`../engine/x.js`, `../../engine/x.js`) is how src/ files name
 * another folder.
 */
const UPPER = ['entry', 'commands', 'cli', 'view']
const APP_AND_UP = [...UPPER, 'app']
const ENGINE_AND_UP = [...APP_AND_UP, 'engine']
const STEPS_AND_UP = [...ENGINE_AND_UP, 'steps']
const LOWEST = ['config', 'store', 'providers', 'policy', 'gates', 'publish', 'edit', 'vcs', 'spec', 'expr', 'schema']
export const LAYERS = {
  // The commands' bundle: its entry and the map of every command. Nothing imports it.
  entry: [],
  // The commands, over their cli/ helpers.
  commands: ['entry'],
  cli: ['entry', 'commands'],
  // The web view (pipe view, export --html): beside cli/, under the commands that serve it.
  view: ['entry', 'commands', 'cli'],
  app: UPPER,
  engine: APP_AND_UP,
  steps: ENGINE_AND_UP,
  // Loading and checking files: kinds reach the loader through the catalog the registry passes in.
  config: [...STEPS_AND_UP, 'store', 'providers', 'publish', 'edit', 'vcs', 'gates'],
  // Records only: never the code that writes them or the files they came from.
  store: [...STEPS_AND_UP, 'config', 'providers', 'policy', 'publish', 'edit', 'vcs', 'gates', 'expr'],
  gates: [...STEPS_AND_UP, 'config', 'store', 'providers', 'policy', 'publish', 'edit', 'vcs'],
  providers: [...STEPS_AND_UP, 'config', 'store', 'policy', 'publish', 'edit', 'vcs', 'gates'],
  policy: [...STEPS_AND_UP, 'config', 'store', 'providers', 'publish', 'edit', 'vcs', 'gates'],
  publish: STEPS_AND_UP,
  edit: [...STEPS_AND_UP, 'store', 'providers', 'publish'],
  vcs: [...STEPS_AND_UP, ...LOWEST],
  spec: [...STEPS_AND_UP, ...LOWEST.filter((f) => f !== 'spec')],
  expr: [...STEPS_AND_UP, 'store', 'providers', 'policy', 'publish', 'edit', 'vcs', 'gates'],
  schema: [...STEPS_AND_UP, ...LOWEST.filter((f) => f !== 'schema')],
  types: [...STEPS_AND_UP, ...LOWEST],
  util: [...STEPS_AND_UP, ...LOWEST],
  // Traces (OpenTelemetry): engine and providers report to it; it reads only records' types.
  telemetry: [...STEPS_AND_UP, ...LOWEST],
  // src/errors.ts, src/error-codes.ts, src/exit-codes.ts, src/log.ts: used by every layer.
  '.': [...STEPS_AND_UP, ...LOWEST],
}

/**
 * The folders above steps reach a kind only through src/steps/registry.ts (its handlers and `views`),
 * never a kind's own module (nor the folder of the same name beside it, src/steps/agent/): what a
 * kind records stays its own. The kinds are read from the registry itself, the one list of them.
 */
export const ABOVE_KINDS = ['app', 'engine', 'commands', 'cli', 'view']
export const KIND_MODULES = kindModules(readFileSync(new URL('./src/steps/registry.ts', import.meta.url), 'utf8'))
const KIND_MODULE = `^(\\.\\./)+steps/(${KIND_MODULES.join('|')})(\\.js$|/)`

/** The modules whose handlers the registry's map holds (`ingest,` or `clarify_questions: clarifyQuestions,`). */
function kindModules(source) {
  const map = /export const registry\b[^=]*=\s*\{([^}]*)\}/.exec(source)?.[1] ?? ''
  const handlers = [...map.matchAll(/(?:^|,)\s*(?:\w+\s*:\s*)?(\w+)\s*(?=,|$)/g)].map((m) => m[1])
  const from = new Map([...source.matchAll(/^import \{([^}]*)\} from '\.\/([\w-]+)\.js'/gm)].flatMap((m) => m[1].split(',').map((n) => [n.trim(), m[2]])))
  const modules = [...new Set(handlers.map((h) => from.get(h)))]
  if (modules.length < 10 || modules.includes(undefined)) throw new Error(`eslint.config.js: could not read the step kinds from src/steps/registry.ts (found ${modules.join(', ')})`)
  return modules
}

/** commands, cli and view call use cases (src/app/); they name the engine only by its types. */
export const ENGINE_TYPES_ONLY = ['commands', 'cli', 'view']

/**
 * Node's modules that cost every process importing them and that only some commands use: through
 * src/util/fs-async.ts, loaded when first called (bench/README.md, "Issue 38: a bundle per group of
 * commands"). An import of their types costs nothing.
 */
const ON_FIRST_USE = [
  {name: 'node:child_process', message: 'Use childProcess() from src/util/fs-async.ts: node:child_process loads net, dgram and streams (~3–4 ms) in every process that imports it.', allowTypeImports: true},
  {name: 'node:fs/promises', message: "Use src/util/fs-async.ts: node:fs/promises loads ~25 of Node's modules (~2 ms) in every process that imports it.", allowTypeImports: true},
]

/** An import of one of `folders`: from src/*.ts (`root`) by `./`, from deeper by climbing out with `../`. */
const reaches = (folders, root) => `^${root ? '\\./' : '(\\.\\./)+'}(${folders.join('|')})(/|$)`

function layerRules(folder, forbidden) {
  const root = folder === '.'
  const name = root ? 'src/*.ts' : `src/${folder}/`
  const patterns = []
  if (forbidden.length > 0) {
    patterns.push({
      regex: reaches(forbidden, root),
      message: `${name} must not import from ${forbidden.map((f) => `src/${f}/`).join(', ')}: dependencies point one way (see docs/development.md, the layers).`,
    })
  }
  if (folder !== 'store') {
    patterns.push({
      regex: reaches(['store/postgres'], root),
      message: `${name} must not import the PostgreSQL store: ask the RunStore for what a store can do (its optional \`team\` queue, src/store/team.ts), never a concrete store.`,
    })
  }
  if (ABOVE_KINDS.includes(folder)) {
    patterns.push({regex: KIND_MODULE, message: `${name} must not import a step kind's module: read what a kind records through src/steps/registry.ts (views, handlers) and src/steps/types.ts.`})
  }
  const rules = {
    'no-restricted-imports': ['error', {patterns}],
    'no-restricted-syntax': [
      'error',
      ...patterns.map(({regex, message}) => ({selector: `ImportExpression > Literal[value=/${regex.replaceAll('/', '\\/')}/]`, message})),
      {
        selector: "CallExpression[callee.name=/^mkdir(Sync)?$/] Property[key.name='recursive']",
        message:
          "Node's recursive mkdir spins for ever where a parent exists but refuses new entries (a path under /proc, a dangling link): use makeDirs from src/util/fs.ts.",
      },
    ],
  }
  rules['@typescript-eslint/no-restricted-imports'] = ['error', {paths: ON_FIRST_USE, patterns: []}]
  if (ENGINE_TYPES_ONLY.includes(folder)) {
    const message = `${name} must call the engine through a use case in src/app/; it may import the engine's types only (see docs/development.md, the layers).`
    const regex = reaches(['engine'], root)
    rules['@typescript-eslint/no-restricted-imports'][1].patterns.push({regex, message, allowTypeImports: true})
    rules['no-restricted-syntax'].push({selector: `ImportExpression > Literal[value=/${regex.replaceAll('/', '\\/')}/]`, message})
  }
  return {files: [root ? 'src/*.ts' : `src/${folder}/**/*.ts`], rules}
}

/**
 * The calls in test/ that return a promise (test/helpers' async functions and node:fs/promises'),
 * which the syntax rule for test/ wants awaited: the type-checked no-floating-promises is not run there.
 */
const TEST_PROMISES = [
  ...['pipe', 'node', 'tempDir', 'pipelineFrom', 'harness', 'expectPipeError', 'prepareHeldStep', 'startCluster', 'followTutorial', 'statsIn'],
  ...['readIn', 'auditIn', 'auditCommandIn', 'expectAuditPasses', 'copyStore', 'startView', 'open', 'closePages', 'notBlank', 'shotOf', 'runIn'],
  ...['until', 'resumeWith', 'resumeHere', 'reviewHere', 'cancelHere', 'storeIn', 'statusIn', 'runsIn', 'runTreeIn', 'snapshotsIn'],
  ...['snapshotsInStore', 'runRecordIn', 'specIn', 'ledgerIn', 'budgetHere', 'confirmHere'],
  ...['onlyRun', 'storeAt', 'snapshotsOf', 'statusOf', 'audited', 'runIds', 'storeState', 'setup', 'cli', 'resumedHere', 'fixture'],
  ...['runRecords', 'pipeline', 'snapshots', 'ledger', 'snapshotsOfStep', 'file', 'readJson', 'writeJson', 'readLines', 'writeLines', 'verify'],
  ...['writeFile', 'readFile', 'appendFile', 'mkdir', 'mkdtemp', 'cp', 'rm', 'rename', 'unlink', 'symlink', 'chmod', 'readdir', 'stat'],
]

export default tseslint.config(
  {ignores: ['dist/**', 'node_modules/**', 'examples/**', 'templates/**', 'src/types/**', 'bench/**', 'scripts/**', 'test/helpers/*.cjs', '.mocharc.cjs', 'eslint.config.js', 'bin/**']},
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {parserOptions: {projectService: true, tsconfigRootDir: import.meta.dirname}},
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', {argsIgnorePattern: '^_', varsIgnorePattern: '^_'}],
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-floating-promises': 'error',
    },
  },
  ...Object.entries(LAYERS).map(([folder, forbidden]) => layerRules(folder, forbidden)),
  // test/ is linted without type information: the type-checked rules over the tests cost the CI
  // run more CPU than any test file (bench/README.md, "Issue 36: lint and the suite's heaviest files"),
  // and tsc --noEmit type-checks the tests all the same. What no-floating-promises caught there, a
  // promise left un-awaited, the syntax rule below catches for the helpers that start processes.
  {
    files: ['test/**/*.ts'],
    ...tseslint.configs.disableTypeChecked,
    rules: {
      ...tseslint.configs.disableTypeChecked.rules,
      '@typescript-eslint/no-unused-expressions': 'off',
      'no-restricted-syntax': [
        'error',
        {
          selector: `ExpressionStatement > CallExpression[callee.name=/^(${TEST_PROMISES.join('|')})$/]`,
          message: 'This call returns a promise: await it (or hand it on), or the test ends before what it started and passes without checking it.',
        },
      ],
    },
  },
)
