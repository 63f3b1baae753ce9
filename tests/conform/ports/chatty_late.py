"""Breaks the protocol: answers a restart step twice, the second copy written only once the
next line has arrived (so no wait by the driver can see it before it sends that line)."""

import sys

from epochgc.model.port import Session, answer_line, read_request

session = Session()
owed: str | None = None
for raw in sys.stdin:
    seq, text = read_request(raw)
    answer = answer_line(seq, session.handle(text))
    if owed is not None:
        print(owed, flush=True)
        owed = None
    print(answer, flush=True)
    if '"restart"' in text:
        owed = answer
