/**
 * The built CLI's entry (bin/run.js): oclif's `execute`, from the same bundle as the commands, the
 * help class and the hooks, so they all share one copy of @oclif/core (see scripts/bundle.mjs).
 */
export {execute} from '@oclif/core/execute'
