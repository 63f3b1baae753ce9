"""Breaks the protocol: answers a state step with a line that is not JSON."""

import sys

from epochgc.model.port import Session, answer_line, read_request

session = Session()
for raw in sys.stdin:
    seq, text = read_request(raw)
    answer = session.handle(text)
    print("OK" if answer.get("op") == "state" else answer_line(seq, answer), flush=True)
