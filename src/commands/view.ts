import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {withSignals} from '../cli/signals.js'
import {assertId} from '../store/file/ids.js'
import {openStore, storeInCommand} from '../store/open.js'
import {startViewServer} from '../view/server.js'
import {jsonText, line as t} from '../util/terminal-text.js'
import {currentUser} from '../util/user.js'
import {childProcess} from '../util/fs-async.js'

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost'])

export default class View extends PipeCommand {
  static override summary =
    'Serve a web view of the store on 127.0.0.1: runs, a run page (graph, steps, prompts as sent, tool calls, timeline, spec diffs, audit verdict) and stats, and decide what a run waits for from its page.'
  static override description = `A run waiting for a person shows a form beside the command that gives it: a review (go, hold or drop with a note), answers to its questions, a yes or no to a step or tool call. The page takes it by the same code as pipe review, pipe answer and pipe confirm, with the same checks, and records the same, as given by the OS user running pipe view, with via: view. On a file store the view process then continues the run as the command would; on a PostgreSQL store a worker does. Only a browser that opened the URL pipe view prints may decide: it carries a random token of this server's (kept as an HttpOnly, SameSite=Strict cookie), and each form a CSRF token and the hash of what it showed (a form drawn before the run moved on is refused).

It answers GET and HEAD (and POST of a decision form) only to a Host header naming the address it listens on, and serves pages under a Content-Security-Policy that runs no script but pipe's own. It listens on 127.0.0.1 unless --host names another address (then it warns: anyone who can reach that address can read the store); decisions are served on 127.0.0.1 only: on another address the pages are read-only (and it says so). --read-only serves the pages alone: no forms, no POST. Ctrl-C stops it.`
  static override examples = [
    {description: 'Browse the runs of the store found from here', command: '<%= config.bin %> <%= command.id %>'},
    {description: "One run's page, on a fixed port, opened in the browser", command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --port 8080 --open'},
    {description: 'Print {"url": ...} and serve until stopped', command: '<%= config.bin %> <%= command.id %> --port 0 --json'},
    {
      description: 'Pages only, no decisions from them, on every address of this machine',
      command: '<%= config.bin %> <%= command.id %> --read-only --host 0.0.0.0',
    },
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN): the URL printed is its page.'})}
  static override flags = {
    port: Flags.integer({char: 'p', description: 'Port to listen on; 0 takes a free one.', default: 0, min: 0, max: 65535, helpValue: 'N'}),
    host: Flags.string({
      description: 'Address to listen on. Anything but loopback exposes the store to whoever can reach it; on anything but 127.0.0.1 the pages are read-only.',
      default: '127.0.0.1',
      helpValue: 'ADDRESS',
    }),
    'read-only': Flags.boolean({description: 'Serve the pages alone: no decision forms, no POST.', default: false}),
    open: Flags.boolean({description: 'Open the URL in the browser (xdg-open, open or start).', default: false}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{url: string}> {
    const {args, flags} = await this.parse(View)
    if (args.run !== undefined) assertId('run', args.run)
    const location = this.storeDir(flags.store)
    const store = await openStore(location, 'existing')
    if (args.run !== undefined) await store.assertRunExists(args.run)
    if (!LOOPBACK.has(flags.host))
      this.progress(`warning: pipe view listens on ${flags.host}, not loopback: anyone who can reach it can read this store's runs, prompts and outputs`)
    // The commands a page shows name this store as --store takes it: they are copied into a shell anywhere.
    // A page that changes runs is served on this machine's loopback only, never where others reach it.
    const deciding = !flags['read-only'] && flags.host === '127.0.0.1'
    if (!flags['read-only'] && !deciding)
      this.progress(`pipe view: decisions from the page are served on 127.0.0.1 only; on ${flags.host} the pages are read-only`)
    const decide = deciding ? {decide: {store: location, cwd: process.cwd()}} : {}
    const server = await startViewServer({store, storeArg: storeInCommand(process.cwd(), location), host: flags.host, port: flags.port, ...decide})
    const page = args.run !== undefined ? `${server.url}runs/${args.run}` : server.url
    const url = server.token !== undefined ? `${page}?view_token=${server.token}` : page
    if (this.jsonEnabled()) {
      process.stdout.write(`${jsonText({url})}\n`)
      this.jsonPrinted = true
    } else {
      process.stdout.write(t`${url}\n`)
      this.progress(
        server.token !== undefined
          ? `pipe view: decisions from its pages are recorded as given by ${currentUser()} via view; Ctrl-C stops it`
          : 'pipe view: read-only; Ctrl-C stops it',
      )
    }
    if (flags.open) openInBrowser(url, (message) => this.progress(message))
    await withSignals((signal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), {once: true})), 'stopping the view server')
    await server.close()
    return {url}
  }

  // The URL was printed when the server started; stopping prints nothing more.
  override logJson(): void {}
}

function openInBrowser(url: string, warn: (message: string) => void): void {
  const [command, ...args] = process.platform === 'darwin' ? ['open', url] : process.platform === 'win32' ? ['cmd', '/c', 'start', '', url] : ['xdg-open', url]
  const child = childProcess().spawn(command, args, {stdio: 'ignore', detached: true})
  child.on('error', () => warn(`could not open a browser (${command} is not available): open ${url} yourself`))
  // xdg-open with no browser to hand it to (a server, a container) exits 3 and says so where no one sees.
  child.on('exit', (code) => {
    if (code !== 0 && code !== null) warn(`could not open a browser (${command} exited ${code}): open ${url} yourself`)
  })
  child.unref()
}
