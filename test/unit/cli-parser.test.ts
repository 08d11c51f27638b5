/**
 * The command layer's parser (src/cli/parser.ts) on the argv forms pipe's commands are given, and
 * the help it shows from a manifest entry (src/cli/help.ts). In-process: the parser is a pure
 * function; test/cli/one-path.test.ts and cli-help.test.ts run the same through the built CLI.
 */
import {expect} from 'chai'
import * as Args from '../../src/cli/args.js'
import * as Flags from '../../src/cli/flags.js'
import {describeCommand} from '../../src/cli/manifest.js'
import {parseArgv, type ParseInput} from '../../src/cli/parser.js'
import {commandHelp} from '../../src/cli/help.js'
import {PipeError} from '../../src/errors.js'

const declared: ParseInput = {
  command: 'demo',
  args: {pipeline: Args.string({description: 'Pipeline file.', required: true}), other: Args.string({description: 'Another.'})},
  flags: {
    input: Flags.string({description: 'Requirement file.', helpValue: 'FILE'}),
    set: Flags.string({char: 'i', description: 'A typed input.', multiple: true}),
    text: Flags.string({char: 't', description: 'Text.'}),
    meta: Flags.boolean({description: 'Meta.', default: true, allowNo: true}),
    verbose: Flags.boolean({char: 'v', description: 'Verbose.'}),
    quiet: Flags.boolean({char: 'q', description: 'Quiet.'}),
    limit: Flags.integer({char: 'n', description: 'Most.', default: 20, min: 1}),
    provider: Flags.string({description: 'Provider.', options: ['auto', 'offline']}),
    decision: Flags.string({description: 'Decision.'}),
    note: Flags.string({description: 'Note.', dependsOn: ['decision']}),
    skip: Flags.string({description: 'Skip.', exclusive: ['decision']}),
  },
  strict: true,
}

function parse(argv: string[], input: Partial<ParseInput> = {}): ReturnType<typeof parseArgv> {
  return parseArgv(argv, {...declared, ...input})
}

/** The E_INVALID_ARGS error parsing `argv` throws: its message and hint. */
function refusal(argv: string[], input: Partial<ParseInput> = {}): {message: string; hint: string | undefined} {
  try {
    parse(argv, input)
  } catch (error) {
    expect(error).to.be.instanceOf(PipeError)
    expect((error as PipeError).code).to.equal('E_INVALID_ARGS')
    return {message: (error as PipeError).message, hint: (error as PipeError).hint}
  }
  throw new Error(`${argv.join(' ')} parsed`)
}

describe('the command parser', () => {
  it('reads --flag value, --flag=value, -c value, -cvalue and -c=value alike', () => {
    for (const argv of [
      ['p.yaml', '--text', 'hi'],
      ['p.yaml', '--text=hi'],
      ['p.yaml', '-t', 'hi'],
      ['p.yaml', '-thi'],
      ['p.yaml', '-t=hi'],
    ])
      expect(parse(argv).flags.text, argv.join(' ')).to.equal('hi')
  })

  it('gives the defaults of flags not given, and leaves a boolean without one unset', () => {
    const {flags, args} = parse(['p.yaml'])
    expect(flags).to.deep.equal({meta: true, limit: 20})
    expect(args).to.deep.equal({pipeline: 'p.yaml', other: undefined})
  })

  it('sets an allowNo boolean false with --no-NAME, and reads -vq as -v -q', () => {
    expect(parse(['p.yaml', '--no-meta']).flags.meta).to.equal(false)
    expect(parse(['p.yaml', '-vq']).flags).to.include({verbose: true, quiet: true})
    expect(refusal(['p.yaml', '--no-verbose']).message).to.equal('Nonexistent flag: --no-verbose')
  })

  it('collects a repeated flag, and the words after it until the next flag', () => {
    expect(parse(['p.yaml', '-i', 'a=1', '--set', 'b=2', '-i=c=3']).flags.set).to.deep.equal(['a=1', 'b=2', 'c=3'])
    expect(parse(['p.yaml', '-i', 'a=1', 'b=2', '--text', 'x', 'o.yaml']).flags.set).to.deep.equal(['a=1', 'b=2'])
    expect(parse(['p.yaml', '-i', 'a=1', 'b=2', '--text', 'x', 'o.yaml']).args.other).to.equal('o.yaml')
    expect(refusal(['p.yaml', '--text', 'a', '--text', 'b']).message).to.equal('--text can only be given once')
  })

  it('takes a value that starts with -, but not one of the command’s flags as a value', () => {
    expect(parse(['p.yaml', '--text', '-x not a flag']).flags.text).to.equal('-x not a flag')
    expect(parse(['p.yaml', '--input', '-']).flags.input).to.equal('-')
    expect(refusal(['p.yaml', '--text', '--verbose']).message).to.equal('--text expects a value')
    expect(refusal(['p.yaml', '--text', '--input=x']).message).to.equal('--text expects a value')
    expect(refusal(['p.yaml', '--text']).message).to.equal('--text expects a value')
    expect(refusal(['p.yaml', '--provider']).message).to.equal('--provider expects one of these values: auto, offline')
  })

  it('ends the flags at --: what follows is words, flags or not', () => {
    const parsed = parse(['--', '--text', 'x'], {strict: false})
    expect(parsed.argv).to.deep.equal(['--text', 'x'])
    expect(parsed.flags.text).to.equal(undefined)
    expect(parse(['p.yaml', '--', '-n']).args.other).to.equal('-n')
  })

  it('refuses an unknown flag, a missing argument and a word too many, each naming the command’s help', () => {
    const unknown = refusal(['p.yaml', '--bogus', '--nope=1'])
    expect(unknown).to.deep.equal({message: 'Nonexistent flags: --bogus, --nope=1', hint: 'Run pipe demo --help for usage.'})
    expect(refusal([]).message).to.equal('Missing 1 required arg: pipeline — Pipeline file.')
    expect(refusal(['a', 'b', 'c']).message).to.equal('Unexpected argument: c')
  })

  it('takes any number of words for a command that is not strict, but no unknown flag', () => {
    expect(parse(['a', 'b', 'c', '-t', 'x', 'd'], {strict: false}).argv).to.deep.equal(['a', 'b', 'c', 'd'])
    expect(refusal(['a', 'b', 'c', '--strictest'], {strict: false}).message).to.equal('Nonexistent flag: --strictest')
  })

  it('checks integers, options and the relations between flags', () => {
    expect(parse(['p.yaml', '-n', '5']).flags.limit).to.equal(5)
    expect(refusal(['p.yaml', '-n', 'five']).message).to.equal('Expected an integer but received: five (--limit)')
    expect(refusal(['p.yaml', '-n', '0']).message).to.equal('Expected an integer greater than or equal to 1 but received: 0 (--limit)')
    expect(parse(['p.yaml', '-n', '-3'], {flags: {limit: Flags.integer({char: 'n'})}}).flags.limit).to.equal(-3)
    expect(refusal(['p.yaml', '--provider', 'maybe']).message).to.equal('Expected --provider=maybe to be one of: auto, offline')
    expect(refusal(['p.yaml', '--note', 'n']).message).to.equal('--note needs --decision')
    expect(refusal(['p.yaml', '--skip', 'T1', '--decision', 'go']).message).to.equal('--skip cannot also be given with --decision')
  })
})

describe('help from a manifest entry', () => {
  it("has oclif's sections, the flags sorted short letters first, and the examples filled in", () => {
    class Demo {
      static summary = 'Do a demo.'
      static description = 'A longer text.'
      static examples = [{description: 'Once', command: '<%= config.bin %> <%= command.id %> p.yaml -t hi'}]
      static args = declared.args
      static flags = declared.flags
    }
    const text = commandHelp({format: 1, bin: 'pipe', version: '0', description: '', topics: {}, commands: {}}, describeCommand('demo:show', Demo, 'author'))
    const sections = text.split('\n').filter((line) => /^[A-Z][A-Z ]+$/.test(line))
    expect(sections).to.deep.equal(['USAGE', 'ARGUMENTS', 'FLAGS', 'GLOBAL FLAGS', 'DESCRIPTION', 'EXAMPLES'])
    expect(text).to.match(/^Do a demo\.\n\nUSAGE\n {2}\$ pipe demo show PIPELINE \[OTHER\] \[--json\]/)
    expect(text).to.contain('  --[no-]meta').and.contain('  --json  Format output as json.')
    expect(text.indexOf('-i, --set=<value>...')).to.be.lessThan(text.indexOf('--decision=<value>'))
    expect(text).to.contain('  Once\n\n    $ pipe demo show p.yaml -t hi')
  })
})
