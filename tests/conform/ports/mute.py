"""Breaks the protocol: reads every line and never answers one (newuser5 G7's stubborn.sh)."""

import sys

for _raw in sys.stdin:
    pass
