/** `pipe lsp`: the language server, validate's checks of an editor's buffer. */
import {commandsOf} from '../main.js'

export const {group, execute, describe} = commandsOf('lsp', {
  lsp: () => import('../../commands/lsp.js'),
})
