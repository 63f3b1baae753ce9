"""Breaks the protocol: answers every line with `{"seq": N, "answer": ...}` whose answer is
an array nested as deep as the first argument says."""

import sys

from epochgc.model.port import read_request

depth = int(sys.argv[1])
for raw in sys.stdin:
    seq, _ = read_request(raw)
    print(f'{{"seq": {seq}, "answer": {"[" * depth}{"]" * depth}}}', flush=True)
