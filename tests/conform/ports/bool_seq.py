"""Breaks the protocol: echoes line 1's sequence number as the JSON boolean `true` (the
protocol's N is a whole number; Python's True == 1 must not pass for it)."""

import sys

from epochgc.model.port import Session, answer_line, read_request

session = Session()
for raw in sys.stdin:
    seq, text = read_request(raw)
    answer = session.handle(text)
    print(answer_line(True if seq == 1 else seq, answer), flush=True)  # type: ignore[arg-type]
