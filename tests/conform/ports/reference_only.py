"""A correct port that implements only the reference variant: it refuses every other reset,
so `epochgc conform` must skip those vector files, not fail them."""

import json
import sys

from model.port import Session

session = Session()
for line in sys.stdin:
    obj = json.loads(line) if line.startswith('{"op":"reset"') else None
    if obj is not None and obj.get("variant") != "reference":
        answer = {"error": f"variant {obj.get('variant')} not implemented"}
    else:
        answer = session.handle(line)
    print(json.dumps(answer), flush=True)
