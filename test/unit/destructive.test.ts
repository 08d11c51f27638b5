/**
 * Issue 37 item 14: the built-in list of destructive commands, judged on the parsed argument vector.
 * `echo rm` is not `rm`; the ways to reach the same program (a path, a wrapper, a shell's -c line,
 * find -exec) are.
 */
import {expect} from 'chai'
import {destructiveMatch} from '../../src/policy/destructive.js'

describe('destructive commands (policy)', () => {
  it('matches each listed command on its argv, whatever path or wrapper reaches it', () => {
    const cases: Array<[string[], string]> = [
      [['rm', 'x.txt'], 'rm'],
      [['/bin/rm', '-f', 'x.txt'], 'rm'],
      [['./rm', 'x.txt'], 'rm'],
      [['command', 'rm', 'x.txt'], 'rm'],
      [['env', 'A=1', '-u', 'HOME', 'rm', 'x.txt'], 'rm'],
      [['env', '--', 'rm', 'x.txt'], 'rm'],
      [['sudo', '-u', 'root', 'rm', 'x.txt'], 'rm'],
      [['nice', '-n', '5', 'nohup', 'rm', 'x.txt'], 'rm'],
      [['timeout', '-s', 'KILL', '10', 'rm', 'x.txt'], 'rm'],
      [['xargs', '-n', '1', 'rm'], 'rm'],
      [['busybox', 'rm', 'x.txt'], 'rm'],
      [['sh', '-c', 'rm x.txt'], 'rm'],
      [['bash', '-ec', 'echo hi && /usr/bin/rm -rf build'], 'rm'],
      [['sh', '-c', 'sh -c "git push origin main"'], 'git push'],
      [['find', '.', '-name', '*.o', '-delete'], 'find -delete'],
      [['find', '.', '-exec', 'rm', '{}', ';'], 'rm'],
      [['git', 'push'], 'git push'],
      [['git', '-C', 'repo', '-c', 'user.name=x', 'push', 'origin'], 'git push'],
      [['git', 'reset', '--hard', 'HEAD~1'], 'git reset --hard'],
      [['git', 'clean', '-fdx'], 'git clean'],
      [['git', 'checkout', '--', 'a.txt'], 'git checkout --'],
      [['git', 'restore', 'a.txt'], 'git restore'],
      [['chmod', '-R', '777', '.'], 'chmod -R'],
      [['chown', '-hR', 'u', '.'], 'chown -R'],
      [['dd', 'if=/dev/zero', 'of=x'], 'dd'],
      [['mkfs.ext4', '/dev/sdb'], 'mkfs'],
      [['curl', 'https://example.com'], 'curl'],
      [['wget', 'x'], 'wget'],
      [['ssh', 'host'], 'ssh'],
      [['scp', 'a', 'host:'], 'scp'],
      [['rsync', '-a', '.', 'host:'], 'rsync'],
      [['npm', 'publish'], 'npm publish'],
      [['docker', 'push', 'img'], 'docker push'],
      // Lines pipe's own parser refuses are cut at every operator and substitution.
      [['bash', '-c', 'for f in a b; do rm $f; done'], 'rm'],
      [['sh', '-c', 'echo $(curl https://example.com)'], 'curl'],
      [['bash', '-c', '(rm x.txt) &'], 'rm'],
      [['bash', '-c', 'X=1 git push > log.txt'], 'git push'],
    ]
    for (const [argv, pattern] of cases) expect(destructiveMatch(argv)?.pattern, JSON.stringify(argv)).to.equal(pattern)
  })

  it('leaves alone what only names a destructive command, or a harmless form of the program', () => {
    const cases: string[][] = [
      ['echo', 'rm', 'x.txt'],
      ['grep', '-r', 'git push', '.'],
      ['ls', 'rm'],
      ['git', 'status'],
      ['git', 'log', '--oneline'],
      ['git', 'checkout', 'main'],
      ['git', 'reset', 'HEAD'],
      ['chmod', '644', 'a.txt'],
      ['npm', 'test'],
      ['sh', '-c', 'echo rm'],
      ['env', 'A=1', 'node', '--check', 'x.js'],
      ['find', '.', '-name', 'rm'],
      ['node', '--check', 'calc.js'],
      ['command', '-v'],
      ['bash', '-c', 'for i in $(seq 1 5); do echo line $i; done'],
      ['bash', '-c', 'echo "rm" > out.txt; exit 3'],
    ]
    for (const argv of cases) expect(destructiveMatch(argv), JSON.stringify(argv)).to.equal(null)
  })
})
