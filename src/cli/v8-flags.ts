/**
 * V8 tuned for a short-lived CLI (bench/README.md, "V8 settings", has the measurements), set before
 * the commands' bundle is compiled (cli/boot.ts), and only then: --version and help load no V8
 * module at all (node:v8 brings Node's streams with it, ~3 ms).
 * - a function must run 32 times longer before V8 optimises it: a run's per-step code is warm, not
 *   hot, and optimising it cost more CPU than it saved, while a truly hot loop (audit verify over a
 *   large store) still reaches optimised code at once;
 * - the young generation keeps its first size instead of doubling: less memory a run, at no
 *   measurable CPU;
 * - a small function waits for the same ticks as any other: V8 optimises one of at most 81 bytes of
 *   bytecode on its first tick, and TurboFan's first use costs peak memory;
 * - a regular expression runs 100 times in V8's regexp interpreter before it is compiled to machine
 *   code (V8: after its first run): a run compiled ~170 of them, most used a few times on short
 *   strings. V8 still compiles one at once for a subject of 1,000 characters or more, so a long
 *   text never goes through the interpreter.
 * A flag the user gives node (`node --interrupt-budget=67584 bin/run.js ...`) wins. (Node refuses
 * these in NODE_OPTIONS.) V8 takes a flag spelled with _ as with -. Matched by whole name:
 * --interrupt-budget-for-feedback-allocation is another flag. The code cache is made under the same
 * flags (scripts/cache-code.mjs runs bin/run.js): a cache made under others is refused.
 */
import {setFlagsFromString} from 'node:v8'

export const V8_FLAGS: ReadonlyArray<readonly [string, string]> = [
  ['--interrupt-budget', '2162688'],
  ['--semi-space-growth-factor', '1'],
  ['--max-bytecode-size-for-early-opt', '0'],
  ['--regexp-tier-up-ticks', '100'],
]

export function tuneV8(): void {
  const given = new Set(process.execArgv.map((arg) => arg.split('=')[0]!.replaceAll('_', '-')))
  for (const [flag, value] of V8_FLAGS) if (!given.has(flag)) setFlagsFromString(`${flag}=${value}`)
}
