"""Breaks the protocol: exits with status 3 at the first gc_epoch step."""

import json
import sys

from model.port import Session

session = Session()
for line in sys.stdin:
    if '"gc_epoch"' in line:
        sys.exit(3)
    print(json.dumps(session.handle(line)), flush=True)
