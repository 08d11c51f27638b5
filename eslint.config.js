// @ts-check
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/**
 * The direction of dependency between the folders of src/ (DESIGN.md, "Layers"): commands (and
 * their cli/ helpers) -> engine -> steps -> the rest. Each entry lists the folders a folder must
 * not import, by static import, re-export or dynamic import(). A relative path that climbs out of
 * the folder (`../engine/x.js`, `../../engine/x.js`) is how src/ files name another folder.
 */
const UPPER = ['commands', 'cli', 'view']
const ENGINE_AND_UP = [...UPPER, 'engine']
const STEPS_AND_UP = [...ENGINE_AND_UP, 'steps']
const LOWEST = ['config', 'store', 'providers', 'policy', 'gates', 'publish', 'edit', 'vcs', 'spec', 'expr', 'schema']
export const LAYERS = {
  // The web view (pipe view, export --html): beside cli/, under the commands that serve it.
  view: ['commands', 'cli'],
  engine: UPPER,
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

/** An import of one of `folders`: from src/*.ts (`root`) by `./`, from deeper by climbing out with `../`. */
const reaches = (folders, root) => `^${root ? '\\./' : '(\\.\\./)+'}(${folders.join('|')})(/|$)`

function layerRules(folder, forbidden) {
  const root = folder === '.'
  const name = root ? 'src/*.ts' : `src/${folder}/`
  const message = `${name} must not import from ${forbidden.map((f) => `src/${f}/`).join(', ')}: dependencies point one way (see DESIGN.md, Layers).`
  const regex = reaches(forbidden, root)
  return {
    files: [root ? 'src/*.ts' : `src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': ['error', {patterns: [{regex, message}]}],
      'no-restricted-syntax': ['error', {selector: `ImportExpression > Literal[value=/${regex.replaceAll('/', '\\/')}/]`, message}],
    },
  }
}

export default tseslint.config(
  {ignores: ['dist/**', 'node_modules/**', 'examples/**', 'src/types/**', 'bench/**', 'scripts/**', 'test/helpers/*.cjs', '.mocharc.cjs', 'eslint.config.js', 'bin/**']},
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
  {
    files: ['test/**/*.ts'],
    rules: {'@typescript-eslint/no-unused-expressions': 'off', '@typescript-eslint/no-unsafe-assignment': 'off', '@typescript-eslint/no-unsafe-member-access': 'off', '@typescript-eslint/no-unsafe-call': 'off'},
  },
)
