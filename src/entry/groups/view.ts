/** The web view and the export of a run as files or a page: diff2html and dagre besides the store. */
import {commandsOf} from '../main.js'

export const {group, execute, describe} = commandsOf('view', {
  export: () => import('../../commands/export.js'),
  view: () => import('../../commands/view.js'),
})
