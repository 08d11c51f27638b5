/**
 * Step deadlines share one timer: each fires on time, in order, whatever order they were set in; a
 * cancelled one never fires; a pending one holds the process open (a step that never settles still
 * times out), and none pending lets it exit at once (no 10-minute wait after a run).
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {deadline} from '../../src/engine/deadlines.js'
import {monotonicMs} from '../../src/util/monotonic.js'
import {bundledScript} from '../helpers/bundled.js'

const module = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'engine', 'deadlines.ts')

function child(script: string): {status: number | null; stdout: string} {
  // Bundled and run by plain node (helpers/bundled.ts): tsx cost each child ~0.6 s of CPU to start.
  const result = spawnSync(process.execPath, [bundledScript(`import {deadline} from ${JSON.stringify(module)}\n${script}`)], {
    encoding: 'utf8',
    timeout: 60000,
  })
  return {status: result.status, stdout: result.stdout + result.stderr}
}

describe('step deadlines', () => {
  /** Three deadlines set latest first; resolves with the order they fired in. */
  function latestFirst(): {fired: Promise<string[]>} {
    const order: string[] = []
    const fired = new Promise<string[]>((resolve) => {
      deadline(60, () => {
        order.push('late')
        resolve(order)
      })
      deadline(20, () => order.push('early'))
      deadline(40, () => order.push('middle'))
    })
    return {fired}
  }

  it('fires each deadline, earliest first, whatever order they were set in', async () => {
    expect(await latestFirst().fired).to.deep.equal(['early', 'middle', 'late'])
  })

  it('fires deadlines due at once earliest first when the timer is late (a busy machine)', async () => {
    const {fired} = latestFirst()
    // Hold the event loop past the last deadline, as a loaded machine does: the one timer then
    // finds all three due in one expiry.
    const until = monotonicMs() + 70
    while (monotonicMs() < until);
    expect(await fired).to.deep.equal(['early', 'middle', 'late'])
  })

  it('never fires a cancelled deadline, and still fires the others', async () => {
    const fired: string[] = []
    const cancel = deadline(10, () => fired.push('cancelled'))
    cancel()
    await new Promise<void>((resolve) => deadline(30, () => resolve()))
    expect(fired).to.deep.equal([])
  })

  it('holds the process open while a deadline is pending, so a step that never settles times out', () => {
    const result = child(`new Promise(() => {}); deadline(200, () => console.log('fired'))`)
    expect(result.stdout).to.contain('fired')
    expect(result.status).to.equal(0)
  })

  it('lets the process exit once no deadline is pending', () => {
    // A ten-minute deadline, cancelled once the event loop has turned: the process ends on its own rather than at the spawn timeout.
    const result = child(`const cancel = deadline(600000, () => console.log('fired')); setImmediate(() => { cancel(); console.log('cancelled') })`)
    expect(result.stdout).to.contain('cancelled').and.not.contain('fired')
    expect(result.status).to.equal(0)
  })
  it('waits out a deadline beyond what one timer can hold, without spinning or warning (policy step_timeout_ms has no maximum)', () => {
    // Node caps a timer at 2^31-1 ms and fires a longer one after 1 ms with a TimeoutOverflowWarning;
    // re-armed from the far deadline each time, the shared timer fired every millisecond. The 300 ms
    // before the cancel is the window in which that would show, not a bound: a slower machine only widens it.
    const result = child(`const cancel = deadline(3000000000, () => console.log('fired')); setTimeout(() => { cancel(); console.log('cancelled') }, 300)`)
    expect(result.stdout).to.contain('cancelled').and.not.contain('fired')
    expect(result.stdout).to.not.contain('TimeoutOverflowWarning')
    expect(result.status).to.equal(0)
  })

  it('fires on time when the wall clock steps back (timers are monotonic, so must deadlines be)', () => {
    // The wall clock set back an hour (an NTP correction, a resumed VM) right after the step began:
    // a deadline on Date.now() would then wait an hour longer, holding the process open.
    const result = child(`const real = Date.now; deadline(100, () => { console.log('fired'); process.exit(0) }); Date.now = () => real() - 3600000`)
    expect(result.stdout).to.contain('fired')
    expect(result.status).to.equal(0)
  })
})
