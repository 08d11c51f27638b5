/**
 * The scripted model behind examples/coding-agent: every step of pipelines/coding.yaml answered for
 * the median() requirement, the agent as a tool-call conversation that fixes one bug, fails QA on
 * the other, and fixes that from QA's verdict on its second attempt. Each reply is a function of the
 * request alone, so recording it twice gives the same cassette.
 */
import type {ModelRequest, Scripted} from './model-server.js'

const usage = {prompt_tokens: 300, completion_tokens: 80}

/** Whether a request is about the median example (its requirement, spec or task mentions median). */
export function isMedianRequest(request: ModelRequest): boolean {
  return request.body.messages.some((m) => typeof m.content === 'string' && /median/.test(m.content))
}

const SPEC = {
  title: 'median() that gives the right answer',
  goal: 'median() in median.js returns the middle value of a list of numbers, sorted as numbers, and the mean of the two middle values for an even count.',
  features: [
    {title: 'For an even number of values, median() returns the mean of the two middle values', priority: 'P0'},
    {title: 'median() sorts numbers as numbers', priority: 'P0'},
  ],
  constraints: ['An empty list stays an error.'],
  non_functional: [{category: 'maintainability', text: 'The tests in median.test.js must pass.'}],
  acceptance_criteria: [
    {
      text: 'Given [4, 1, 3, 2], when median() is called, then it returns 2.5.',
      given: 'the values [4, 1, 3, 2]',
      when: 'median() is called',
      then: 'it returns 2.5',
    },
    {text: 'Given [10, 9, 2], when median() is called, then it returns 9.', given: 'the values [10, 9, 2]', when: 'median() is called', then: 'it returns 9'},
  ],
  open_questions: [],
  citations: [
    {spec_path: 'features[0]', excerpt: 'For an even number of values it must return the mean'},
    {spec_path: 'constraints[0]', excerpt: 'An empty list stays an error.'},
  ],
}

const PLAN = {
  tasks: [
    {
      title: 'Fix median()',
      goal: 'median() passes median.test.js',
      type: 'modify_file',
      priority: 'P0',
      feature_ids: ['FR-001', 'FR-002'],
      acceptance_criteria: ['AC-001', 'AC-002'],
      depends_on: [],
      files_touched: ['median.js'],
      static_checks: ['node --check median.js'],
      unit_tests: ['node --test'],
      smoke_tests: [],
      expected_signals: ['median([4, 1, 3, 2]) is 2.5'],
    },
  ],
}

const VV = {
  vv: [
    {
      kind: 'verification',
      method: 'test',
      description: 'node --test runs median.test.js',
      acceptance_criteria: ['AC-001', 'AC-002'],
      tasks: ['T-001'],
      requirements: ['FR-001', 'FR-002'],
    },
  ],
}

export const MEDIAN_ARCH = {
  tech_stack: {language: 'JavaScript (Node.js 20, ES modules)', toolchain: ['node'], test_framework: 'node:test'},
  directory_tree: ['package.json', 'median.js', 'median.test.js'],
  api_specs: [
    {
      name: 'median',
      signature: 'median(values: number[]): number',
      description: 'the middle value; the mean of the two middle values for an even count; RangeError for an empty list',
    },
  ],
  data_models: [],
  build_run_commands: {test: [['node', '--test']]},
}

export const MEDIAN_TASKS = {
  tasks: [
    {
      id: 'T1',
      title: 'Fix median()',
      goal: 'median() returns the mean of the two middle values for an even count and sorts numbers as numbers',
      type: 'modify_file',
      files_required: ['median.js', 'median.test.js'],
      files_touched: ['median.js'],
      constraints: {forbidden_paths: ['median.test.js'], forbidden_actions: ['change what median() returns for an odd count', 'add a dependency']},
      acceptance_tests: {
        static_checks: [['node', '--check', 'median.js']],
        unit_tests: [['node', '--test']],
        smoke_tests: [],
        expected_signals: ['median([4, 1, 3, 2]) is 2.5', 'median([10, 9, 2]) is 9'],
      },
      rollback_plan: {strategy: 'git_reset'},
      max_retries: 3,
    },
  ],
}

const SUMMARY = {
  what_changed: ['median.js: median() sorts numbers numerically and takes the mean of the two middle values for an even count'],
  why: 'median() sorted values as text and returned the upper middle value for an even count, so median([4, 1, 3, 2]) and median([10, 9, 2]) were wrong',
  how_verified: ['node --check median.js', 'node --test: all four tests in median.test.js pass'],
  risks: ['Values that are not numbers (NaN, strings) are not checked, as before'],
  rollback: 'git revert the "coding_agent: T1" commit, or git reset --hard to the "pipe: checkpoint before task T1" commit',
  blockers: [],
  manual_steps: [],
}

const EVEN =
  'median.js\n<<<<<<< SEARCH\n  return sorted[middle]\n=======\n  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2\n>>>>>>> REPLACE\n'
const NUMERIC = 'median.js\n<<<<<<< SEARCH\n  const sorted = [...values].sort()\n=======\n  const sorted = [...values].sort((a, b) => a - b)\n>>>>>>> REPLACE\n'

/** The agent: attempt 1 reads and fixes the even count only; attempt 2 reads the verdict's file and fixes the sort. */
function implement(request: ModelRequest): Scripted {
  const prompt = request.body.messages.find((m) => m.role === 'user')?.content ?? ''
  const turn = request.body.messages.filter((m) => m.role === 'assistant').length
  const first = !prompt.includes('"status": "fail"')
  const steps: Scripted[] = first
    ? [
        {tool_calls: [{id: 'call_read_median', name: 'read_file', arguments: {path: 'median.js'}}], usage},
        {tool_calls: [{id: 'call_edit_even', name: 'apply_edit_blocks', arguments: {blocks: EVEN}}], usage},
        {
          content: JSON.stringify({
            summary: 'median() takes the mean of the two middle values for an even count',
            plan: ['read median.js', 'return the mean of the two middle values for an even count'],
          }),
          usage,
        },
      ]
    : [
        {tool_calls: [{id: 'call_read_test', name: 'read_file', arguments: {path: 'median.test.js'}}], usage},
        {tool_calls: [{id: 'call_edit_sort', name: 'apply_edit_blocks', arguments: {blocks: NUMERIC}}], usage},
        {
          content: JSON.stringify({
            summary: 'median() sorts numbers numerically (QA showed median([10, 9, 2]) gave 2: the default sort compares text)',
            plan: ['read the failing test the verdict names', 'sort with a numeric comparator'],
          }),
          usage,
        },
      ]
  return steps[Math.min(turn, steps.length - 1)]!
}

/**
 * The files the repository context in a request lists (its "## Files" section), as an architect
 * names them; null when the request shows no repository.
 */
export function filesShown(request: ModelRequest): string[] | null {
  const prompt = request.body.messages.find((m) => m.role === 'user')?.content ?? ''
  const section = /^## Files \(\d+ in the repository[^)]*\)\n((?:[^\n]+\n)*)/m.exec(typeof prompt === 'string' ? prompt : '')
  return section ? section[1]!.split('\n').filter(Boolean) : null
}

export function medianReply(request: ModelRequest): Scripted {
  // The architect names the files the repository context showed it, like a model that read it.
  const arch = {...MEDIAN_ARCH, directory_tree: filesShown(request) ?? MEDIAN_ARCH.directory_tree}
  const replies: Record<string, unknown> = {compile: SPEC, plan_tasks: PLAN, generate_vv: VV, arch, tasks: MEDIAN_TASKS, summary: SUMMARY}
  if (request.kind === 'implement') return implement(request)
  const value = replies[request.kind]
  return value === undefined ? {status: 500, body: {error: {message: `no scripted reply for ${request.kind}`}}} : {content: JSON.stringify(value), usage}
}
