/** Authoring: checking pipelines and policy, scaffolding, keys and the commands that only read the manifest. The config loader, the schemas' validators, yaml and the expression checker; no store, no engine. */
import {commandsOf} from '../main.js'

export const {group, execute, describe} = commandsOf('author', {
  autocomplete: () => import('../../commands/autocomplete.js'),
  'autocomplete:script': () => import('../../commands/autocomplete/script.js'),
  help: () => import('../../commands/help.js'),
  init: () => import('../../commands/init.js'),
  'keys:generate': () => import('../../commands/keys/generate.js'),
  'keys:list': () => import('../../commands/keys/list.js'),
  'pipeline:resolve': () => import('../../commands/pipeline/resolve.js'),
  'policy:check': () => import('../../commands/policy/check.js'),
  'policy:explain': () => import('../../commands/policy/explain.js'),
  'policy:init': () => import('../../commands/policy/init.js'),
  validate: () => import('../../commands/validate.js'),
})
