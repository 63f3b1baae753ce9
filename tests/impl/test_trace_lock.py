"""Nodes share one `--trace` file (review41a R6): a node whose record is torn (its write
failed part-way) cuts it back only when no other node appended after it, and that check and
the cut must not let another node's append fall between them (old code: an fstat, then an
ftruncate, no exclusion: the other node's whole record was cut and the cut reported clean).

Node 1 is a child process under RLIMIT_FSIZE (its write is torn the way the kernel tears it,
setrlimit(2)); between its check and its ftruncate (a hook on os.ftruncate, where the
scheduler may put it) node 2, another process with no limit, appends one whole record. The
hook waits until node 2 has either written or reached its lock, so nothing is timed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.impl.cli_cluster import BOUND_S, ENV

# Node 2: appends one record; says "locking" before it takes the file lock (new code) and
# "done" once written, on stdout, a line each.
_NODE2 = textwrap.dedent("""
    import fcntl, resource, sys
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    real_flock = fcntl.flock
    def flock(fd, op):
        if op & fcntl.LOCK_SH:
            print("locking", flush=True)
        return real_flock(fd, op)
    fcntl.flock = flock
    from epochgc.impl.trace import TraceWriter
    w = TraceWriter(sys.argv[1], 2)
    w.write("apply", "t/1", {"index": 7, "command": {"type": "node2"}})
    w.close()
    print("done", flush=True)
""")

# Node 1: three whole records, then one that meets the size limit (set just past the file's
# end, so the kernel writes part of it); its ftruncate first lets node 2 append.
_NODE1 = textwrap.dedent("""
    import json, os, resource, subprocess, sys
    from epochgc.impl.trace import TraceWriter
    path, node2 = sys.argv[1], sys.argv[2]
    w = TraceWriter(path, 1)
    for i in range(3):
        w.write("apply", "t/0", {"index": i, "command": {"type": "x"}})
    real_ftruncate = os.ftruncate
    procs = []
    def ftruncate(fd, length):
        p = subprocess.Popen([sys.executable, "-c", node2, path], stdout=subprocess.PIPE,
                             text=True)
        first = p.stdout.readline().strip()  # "done" (no lock) or "locking" (it waits)
        real_ftruncate(fd, length)
        print(json.dumps({"node2": first}), flush=True)
        procs.append(p)  # it finishes once node 1's lock is released
    os.ftruncate = ftruncate
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 40, hard))
    w.write("apply", "t/0", {"index": 3, "command": {"type": "x" * 200}})
    print(json.dumps({"status": w.status()}), flush=True)
    for p in procs:
        p.stdout.read()
        assert p.wait() == 0
""")


def test_another_nodes_append_in_the_cut_s_window_is_kept(tmp_path: Path) -> None:
    """Old code: node 2's record was cut (the file held node 1's three records only) and
    node 1's stop said nothing of it."""
    trace = tmp_path / "t.ndjson"
    r = subprocess.run([sys.executable, "-c", _NODE1, str(trace), _NODE2], capture_output=True,
                       text=True, timeout=BOUND_S, env=ENV)
    assert r.returncode == 0, r.stderr
    lines = trace.read_bytes().split(b"\n")
    assert lines[-1] == b"", lines[-1]  # the file ends with a whole record
    recs = [json.loads(x) for x in lines[:-1]]
    assert [(x["node"], x["seq"]) for x in recs] == [(1, 1), (1, 2), (1, 3), (2, 1)], recs
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert out[0] == {"node2": "locking"}, out  # it waited for the cut, at its lock
    st = out[1]["status"]
    assert st["record"] == 4 and st["error"] == "File too large", st  # cut: nothing left
