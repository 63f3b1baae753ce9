"""Breaks the protocol: prints a line before it was sent any (newuser5 G7), then reads."""

import sys

print("garbage", flush=True)
for _raw in sys.stdin:
    pass
