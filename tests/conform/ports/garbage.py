"""Breaks the protocol: answers a state step with a line that is not JSON."""

import json
import sys

from model.port import Session

session = Session()
for line in sys.stdin:
    answer = session.handle(line)
    print("OK" if answer.get("op") == "state" else json.dumps(answer), flush=True)
