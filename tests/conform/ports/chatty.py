"""Breaks the protocol: answers a restart step with two lines."""

import sys

from epochgc.model.port import Session, answer_line, read_request

session = Session()
for raw in sys.stdin:
    seq, text = read_request(raw)
    answer = answer_line(seq, session.handle(text))
    print(answer, flush=True)
    if '"restart"' in text:
        print(answer, flush=True)
