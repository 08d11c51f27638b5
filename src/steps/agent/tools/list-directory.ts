/** list_directory: what a directory of the repository holds, as far as the policy lets the model see. */
import {readdirSync, statSync} from 'node:fs'
import path from 'node:path'
import {checkPath} from '../../../policy/rules.js'
import {denied, directoryOf, failed, MAX_LIST, withError, type AgentTool} from './tool.js'

export const listDirectory: AgentTool = {
  name: 'list_directory',
  description: 'List the entries of a directory of the repository (names; directories end in /).',
  parameters: {
    type: 'object',
    additionalProperties: false,
    properties: {path: {type: 'string', description: 'Directory relative to the repository root; default "."'}},
  },
  resultSchema: withError({
    type: 'object',
    required: ['path', 'entries', 'truncated'],
    properties: {path: {type: 'string'}, entries: {type: 'array', items: {type: 'string'}}, truncated: {type: 'boolean'}},
  }),
  mutates: false,
  async run(args, place) {
    try {
      const dir = directoryOf(place, args['path'] as string | undefined)
      const full = path.resolve(place.root, dir)
      const entries: string[] = []
      for (const name of readdirSync(full).sort()) {
        const relative = dir === '.' ? name : `${dir}/${name}`
        if (!checkPath(place.policy, place.root, relative).allowed) continue
        entries.push(statSync(path.join(full, name), {throwIfNoEntry: false})?.isDirectory() ? `${name}/` : name)
      }
      const truncated = entries.length > MAX_LIST
      return {ok: true, result: {path: dir, entries: entries.slice(0, MAX_LIST), truncated}, summary: `${entries.length} entries in ${dir}`}
    } catch (error) {
      return denied(error) ?? failed((error as Error).message)
    }
  },
}
