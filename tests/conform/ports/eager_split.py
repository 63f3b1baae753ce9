"""Breaks the protocol: prints a line before it was sent any, in two writes a moment apart
(as `print` does under PYTHONUNBUFFERED=1), then reads."""

import sys
import time

sys.stdout.write("garbage")
sys.stdout.flush()
time.sleep(0.3)  # the driver reads the first write alone; the message must not depend on it
sys.stdout.write("\n")
sys.stdout.flush()
for _raw in sys.stdin:
    pass
