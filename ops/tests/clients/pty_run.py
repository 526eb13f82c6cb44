#!/usr/bin/env python3
"""Runs a command under a pseudo-terminal (as over ssh) and copies everything it drew to
stdout, then exits with its exit code. usage: pty_run.py TIMEOUT_SECS COMMAND [ARGS...]"""
import os, select, subprocess, sys, time

timeout = float(sys.argv[1])
master, slave = os.openpty()
env = dict(os.environ, TERM="xterm-256color", COLUMNS="200", LINES="50")
child = subprocess.Popen(sys.argv[2:], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
os.close(slave)
out = bytearray()
deadline = time.time() + timeout
while time.time() < deadline:
    ready, _, _ = select.select([master], [], [], 0.2)
    if ready:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    elif child.poll() is not None:
        break
if child.poll() is None:
    child.kill()
    sys.stderr.write("pty_run: the command ran past %ss\n" % timeout)
code = child.wait()
sys.stdout.buffer.write(bytes(out))
sys.exit(code)
