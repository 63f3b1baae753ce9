"""A correct port that implements only the reference variant: it refuses every other reset,
so `epochgc conform` must skip those vector files, not fail them."""

import json
import sys

from epochgc.model.port import Session, answer_line, read_request

session = Session()
for raw in sys.stdin:
    seq, text = read_request(raw)
    obj = json.loads(text) if text.startswith('{"op":"reset"') else None
    if obj is not None and obj.get("variant") != "reference":
        answer = {"error": f"variant {obj.get('variant')} not implemented"}
    else:
        answer = session.handle(text)
    print(answer_line(seq, answer), flush=True)
