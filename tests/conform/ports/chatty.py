"""Breaks the protocol: answers a restart step with two lines."""

import json
import sys

from model.port import Session

session = Session()
for line in sys.stdin:
    answer = json.dumps(session.handle(line))
    print(answer, flush=True)
    if '"restart"' in line:
        print(answer, flush=True)
