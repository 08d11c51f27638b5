import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {spawn} from 'node:child_process'
import {PipeCommand} from '../cli/base-command.js'
import {withSignals} from '../cli/signals.js'
import {assertId} from '../store/file/ids.js'
import {openStore} from '../store/open.js'
import {startViewServer} from '../view/server.js'
import {jsonText, line as t} from '../util/terminal-text.js'

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost'])

export default class View extends PipeCommand {
  static override summary =
    'Serve a read-only web view of the store on 127.0.0.1: runs, a run page (graph, steps, prompts as sent, tool calls, timeline, spec diffs, audit verdict) and stats.'
  static override description = `The server reads the store and changes nothing. It answers GET and HEAD only, only to a Host header naming the address it listens on, and serves pages under a Content-Security-Policy that runs no script but pipe's own. It listens on loopback unless --host names another address (then it warns: anyone who can reach that address can read the store). Ctrl-C stops it.`
  static override examples = [
    {description: 'Browse the runs of the store found from here', command: '<%= config.bin %> <%= command.id %>'},
    {description: "One run's page, on a fixed port, opened in the browser", command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --port 8080 --open'},
    {description: 'Print {"url": ...} and serve until stopped', command: '<%= config.bin %> <%= command.id %> --port 0 --json'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN): the URL printed is its page.'})}
  static override flags = {
    port: Flags.integer({char: 'p', description: 'Port to listen on; 0 takes a free one.', default: 0, min: 0, max: 65535, helpValue: 'N'}),
    host: Flags.string({
      description: 'Address to listen on. Anything but loopback exposes the store to whoever can reach it.',
      default: '127.0.0.1',
      helpValue: 'ADDRESS',
    }),
    open: Flags.boolean({description: 'Open the URL in the browser (xdg-open, open or start).', default: false}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{url: string}> {
    const {args, flags} = await this.parse(View)
    if (args.run !== undefined) assertId('run', args.run)
    const store = await openStore(this.storeDir(flags.store), 'existing')
    if (args.run !== undefined) await store.assertRunExists(args.run)
    if (!LOOPBACK.has(flags.host))
      this.progress(`warning: pipe view listens on ${flags.host}, not loopback: anyone who can reach it can read this store's runs, prompts and outputs`)
    // The commands a page shows name this store by its full path: they are copied into a shell anywhere.
    const server = await startViewServer({store, storeArg: store.root, host: flags.host, port: flags.port})
    const url = args.run !== undefined ? `${server.url}runs/${args.run}` : server.url
    if (this.jsonEnabled()) {
      process.stdout.write(`${jsonText({url})}\n`)
      this.jsonPrinted = true
    } else {
      process.stdout.write(t`${url}\n`)
      this.progress('pipe view: read-only; Ctrl-C stops it')
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
  const child = spawn(command, args, {stdio: 'ignore', detached: true})
  child.on('error', () => warn(`could not open a browser (${command} is not available): open ${url} yourself`))
  // xdg-open with no browser to hand it to (a server, a container) exits 3 and says so where no one sees.
  child.on('exit', (code) => {
    if (code !== 0 && code !== null) warn(`could not open a browser (${command} exited ${code}): open ${url} yourself`)
  })
  child.unref()
}
