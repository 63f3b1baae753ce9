"""Breaks the protocol: answers the first line, then writes an answer that never ends (no
line end, as fast as the pipe takes it), until it is stopped."""

import os
import sys

from epochgc.model.port import Session, answer_line, read_request

session = Session()
seq, text = read_request(sys.stdin.readline())
print(answer_line(seq, session.handle(text)), flush=True)
sys.stdin.readline()
chunk = b" " * (1 << 16)
while True:
    os.write(1, chunk)
