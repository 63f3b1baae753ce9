"""Breaks the protocol: never answers a restart step."""

import sys
import time

from epochgc.model.port import Session, answer_line, read_request

session = Session()
for raw in sys.stdin:
    seq, text = read_request(raw)
    if '"restart"' in text:
        time.sleep(3600)
    print(answer_line(seq, session.handle(text)), flush=True)
