/**
 * The tools an agent step offers its model (seed 003): each with a JSON Schema for its arguments,
 * checked before it runs, and one for its result. Every path is confined to the repository root
 * (the run's working directory) by the policy's checks (sandbox, symlinks, forbidden_paths), and
 * every command goes through allowed_commands and the sandbox: the model touches files and
 * processes through these and nothing else.
 */
import {BUILT_IN_AGENT_TOOLS} from '../../config/agent-tools.js'
import {compileOutputSchema, type OutputSchema} from '../../config/output-schema.js'
import {PipeError} from '../../errors.js'
import {applyEditBlocks} from './tools/edit-blocks.js'
import {listDirectory} from './tools/list-directory.js'
import {readFileTool} from './tools/read-file.js'
import {runCommandTool} from './tools/run-command.js'
import {findFiles, searchText} from './tools/search.js'
import type {AgentTool} from './tools/tool.js'

export type {AgentTool, EditScope, ToolOutcome, ToolPlace} from './tools/tool.js'
export {customTools} from './tools/custom.js'
export {commandSegments} from './tools/run-command.js'
export {searchDeadline} from './tools/search.js'

export const TOOLS: readonly AgentTool[] = [listDirectory, findFiles, searchText, readFileTool, applyEditBlocks, runCommandTool]
export const TOOL_NAMES: readonly string[] = TOOLS.map((t) => t.name)
if (TOOL_NAMES.join() !== BUILT_IN_AGENT_TOOLS.join())
  throw new PipeError('E_INTERNAL', `the built-in agent tools ${TOOL_NAMES.join(', ')} differ from the names validate knows (config/agent-tools.ts)`)

export function toolNamed(name: string): AgentTool | undefined {
  return TOOLS.find((t) => t.name === name)
}

const argumentCheckers = new Map<string, OutputSchema>()

/**
 * The problems of a call's arguments in one line, or null when they match the tool's schema.
 * Each schema is compiled once per process.
 */
export function argumentProblems(tool: AgentTool, args: unknown): string | null {
  // A pipeline's own tool is not keyed by its name: two pipelines in one process (a worker) may declare the same name differently.
  let checker = tool.plan ? undefined : argumentCheckers.get(tool.name)
  if (tool.plan) {
    const compiled = compileOutputSchema(tool.parameters)
    if (typeof compiled === 'string') throw new PipeError('E_CONFIG', `the parameters of tool ${tool.name} ${compiled}`, {hint: 'pipe validate checks them.'})
    checker = compiled
  }
  if (!checker) {
    const compiled = compileOutputSchema(tool.parameters)
    if (typeof compiled === 'string') throw new PipeError('E_INTERNAL', `the argument schema of ${tool.name} ${compiled}`)
    checker = compiled
    argumentCheckers.set(tool.name, checker)
  }
  return checker.check(args)
}

const resultCheckers = new Map<string, OutputSchema>()

/** The problems of a tool's result against its result schema, or null. */
export function resultProblems(tool: AgentTool, result: unknown): string | null {
  let checker = resultCheckers.get(tool.name)
  if (!checker) {
    const compiled = compileOutputSchema({type: 'object', ...tool.resultSchema})
    if (typeof compiled === 'string') throw new PipeError('E_INTERNAL', `the result schema of ${tool.name} ${compiled}`)
    checker = compiled
    resultCheckers.set(tool.name, checker)
  }
  return checker.check(result)
}
