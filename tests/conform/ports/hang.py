"""Breaks the protocol: never answers a restart step."""

import json
import sys
import time

from model.port import Session

session = Session()
for line in sys.stdin:
    if '"restart"' in line:
        time.sleep(3600)
    print(json.dumps(session.handle(line)), flush=True)
