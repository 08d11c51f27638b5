#!/usr/bin/env python3
"""Runs one command and prints its own resource usage as JSON: CPU (user, sys) and peak RSS of the
child as the kernel accounts it (wait4), and wall time. Node cannot read a child's rusage."""
import json, os, sys, time

def main():
    cwd = sys.argv[1]
    argv = sys.argv[2:]
    out = os.open(os.devnull, os.O_WRONLY)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.dup2(out, 1)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    print(json.dumps({
        'status': os.waitstatus_to_exitcode(status),
        'user_ms': ru.ru_utime * 1000,
        'sys_ms': ru.ru_stime * 1000,
        'cpu_ms': (ru.ru_utime + ru.ru_stime) * 1000,
        'wall_ms': wall * 1000,
        'maxrss_mib': ru.ru_maxrss / 1024,
    }))

main()
