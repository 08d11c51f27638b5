/** `Args.string({...})`: a command's positional arguments (cli/flags.ts has the declarations). */
export {stringArg as string} from './flags.js'
