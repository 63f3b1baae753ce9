"""Answers ONE step wrong, once: the first step answer (an answer with an "op") at or after
line number `sys.argv[1]` (the protocol's seq, counted over the whole session) gets a key
the model never gives; every other answer, a re-run of that very line included, is the
model's. A port that is wrong only sometimes (a race, uninitialised state, an
order-dependent map) must fail conform: its first wrong answer is the verdict (issue 41,
newuser16 S1)."""

import json
import sys

from epochgc.model.port import Session, answer_line, read_request

first = int(sys.argv[1])
session = Session()
wrong = False
for raw in sys.stdin:
    seq, text = read_request(raw)
    answer = session.handle(text)
    if not wrong and seq >= first and "op" in answer:
        wrong = True
        answer = {**answer, "wrong_once": True}
        print(f"wrong_once: answered line {seq} wrong: {json.dumps(answer)}", file=sys.stderr)
    print(answer_line(seq, answer), flush=True)
