"""Breaks the protocol: exits with status 3 at the first gc_epoch step."""

import sys

from epochgc.model.port import Session, answer_line, read_request

session = Session()
for raw in sys.stdin:
    seq, text = read_request(raw)
    if '"gc_epoch"' in text:
        sys.exit(3)
    print(answer_line(seq, session.handle(text)), flush=True)
