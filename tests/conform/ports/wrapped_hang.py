"""Breaks the protocol through a wrapper (as `sh -c`, npm or make run a port): starts the
real port as a child in its own process group, then never answers. With `ignore-term` the
child ignores SIGTERM and the wrapper dies of it; with `exits` the wrapper exits (status 3)
while the child runs on. The child writes its pid to the file named by the second argument
once it is set up, so a test knows it is there before the port is stopped."""

import os
import subprocess
import sys
import time

mode, ready = sys.argv[1], sys.argv[2]
CHILD = f"""
import os, signal, sys, time
if {mode == "ignore-term"!r}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as f:
    f.write(str(os.getpid()))
os.replace(tmp, sys.argv[1])
time.sleep(3600)
"""
subprocess.Popen([sys.executable, "-c", CHILD, ready],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
while not os.path.exists(ready):
    time.sleep(0.01)
if mode == "exits":
    sys.exit(3)
time.sleep(3600)
