/**
 * The names of the agent's built-in tools (steps/agent/tools.ts implements them; it fails to load if
 * the two lists differ) and of give_up, which every agent step offers: a tool a pipeline declares
 * may take none of them. Here, not in steps, because validate's rules (config) check the names.
 */
export const BUILT_IN_AGENT_TOOLS = ['list_directory', 'find_files', 'search_text', 'read_file', 'apply_edit_blocks', 'run_command'] as const

/** The tool an agent calls to stop. */
export const GIVE_UP_TOOL = 'give_up'

export const RESERVED_TOOL_NAMES: readonly string[] = [...BUILT_IN_AGENT_TOOLS, GIVE_UP_TOOL]
