"""Breaks the protocol before it is asked anything: prints a line that is not JSON (with a
terminal escape, and longer than the table shows) at start-up, then reads to end of input
(newuser9's `echo garbage; sleep 100` port, ended by its input closing)."""

import sys

sys.stdout.buffer.write(b"garbage \x1b[2J" + b"x" * 80 + b"\n")
sys.stdout.flush()
for _ in sys.stdin:
    pass
