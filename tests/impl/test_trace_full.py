"""A `--trace` file that cannot grow (newuser18 U7): the trace stops at its last whole record
and nothing else does. Old code: the write's OSError ("File too large") raised inside Raft's
flush callback and the fence; the nodes stayed up and stopped serving, `produce` retried for
minutes, and the trace ended with a torn line (`check-trace`: exit 65).

EFBIG is made the way the kernel makes it, by RLIMIT_FSIZE on a child process (setrlimit(2):
"Attempts to extend a file beyond this limit result in delivery of a SIGXFSZ signal", which
Python ignores, so write(2) fails with EFBIG after a short write up to the limit); ENOSPC by
/dev/full ("Writes to the /dev/full device fail with an ENOSPC error", full(4)). The whole
cluster case (cluster start under the limit, produce, cluster status, check-trace: ~12 s) runs
in `tox -e tracefull` (tests/deep_cases.py)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.broker.broker import Broker
from epochgc.impl.partition.fence import FenceDecision
from epochgc.impl.partition.statemachine import ApplyEvent
from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.store.local import LocalStore
from epochgc.impl.trace import TraceWriter, broker_hooks
from tests.impl.cli_cluster import BOUND_S, ENV, epochgc

LIMIT = 4096  # bytes: RLIMIT_FSIZE of the child, a trace of ~12 records

_WRITER = textwrap.dedent("""
    import json, sys
    from epochgc.impl.trace import TraceWriter
    w = TraceWriter(sys.argv[1], 2)
    for i in range(1000):  # ~300 bytes a record: the limit is met long before
        w.write("apply", "t/0", {"pad": "x" * 250, "i": i})
    print(json.dumps({"status": w.status(), "seq": w.seq}))
""")


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_a_trace_at_the_file_size_limit_stops_at_its_last_whole_record(tmp_path: Path) -> None:
    """Old code: the child died of `OSError: [Errno 27] File too large` (the exception the
    node's flush callback raised), the file at the limit ending mid-record."""
    trace = tmp_path / "t.ndjson"
    r = subprocess.run([sys.executable, "-c", _WRITER, str(trace)], capture_output=True,
                       text=True, timeout=BOUND_S, env=ENV, preexec_fn=lambda: _limited(LIMIT))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    st = out["status"]
    assert st is not None and st["path"] == str(trace), out
    assert st["error"] == os.strerror(27), st  # EFBIG: "File too large", the torn tail cut
    data = trace.read_bytes()
    assert 0 < len(data) <= LIMIT and data.endswith(b"\n"), data[-80:]
    seqs = [json.loads(line)["seq"] for line in data.splitlines()]
    assert seqs == list(range(1, st["record"])), (seqs, st)
    # Stopped for good: no record after the one that failed was attempted or written.
    assert out["seq"] == st["record"], out
    # One line said it (the node's log), naming the record and the error.
    said = [ln for ln in r.stderr.splitlines() if "trace stopped" in ln]
    assert said == [f"trace stopped at record {st['record']}: File too large ({trace} holds "
                    f"the records before it; the node serves on)"], r.stderr


def test_a_torn_record_another_node_wrote_after_is_left_and_said(tmp_path: Path) -> None:
    """Cutting back to the torn record would delete whole records of another node written
    after it (the nodes share the file): they are kept, and the stop says where it is."""
    trace = tmp_path / "t.ndjson"
    w = TraceWriter(trace, 1)
    w.write("apply", "t/0", {"i": 0})
    start = trace.stat().st_size
    rec = b'{"a torn":"record"}\n'
    os.write(w._fd, rec[:5])  # what a short write leaves
    with open(trace, "ab") as other:
        other.write(b'{"another":"node"}\n')
    w._torn(rec, start, 5)
    assert trace.read_bytes().endswith(b'{"a t{"another":"node"}\n')
    st = w.status()
    assert st is not None and st["error"] == (
        f"write(2) wrote part of a record; a torn record is left at byte {start} (another "
        "node wrote after it; `epochgc check-trace` refuses its line)"), st


class _TracedSim(SimCluster):
    """The simulated cluster with every node's trace on /dev/full (as node_main attaches it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.writers: dict[int, TraceWriter] = {}
        self.traced: dict[int, Any] = {}
        super().__init__(*args, **kwargs)

    def _hooks(self, nid: int) -> Any:
        if nid not in self.writers:
            b: Broker = self.brokers[nid]
            self.writers[nid] = TraceWriter("/dev/full", nid)
            self.traced[nid] = broker_hooks(self.writers[nid], lambda: b)
        return self.traced[nid]

    def _on_fence(self, nid: int, name: str, d: FenceDecision) -> None:
        super()._on_fence(nid, name, d)
        self._hooks(nid).on_fence(nid, name, d)

    def _on_apply(self, nid: int, name: str, ev: ApplyEvent) -> None:
        super()._on_apply(nid, name, ev)
        self._hooks(nid).on_apply(nid, name, ev)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_trace_whose_writes_fail_never_fails_the_apply_or_the_fence(tmp_path: Path) -> None:
    """Old code: the OSError (ENOSPC) raised out of the state machine's apply and the fence
    (in the node: Raft's flush callback), and the produce never completed."""
    c = _TracedSim(seed=5, partitions=("t/0",), store=LocalStore(tmp_path, create=True))
    try:
        c.bootstrap()
        for i in range(5):
            acks = c.produce({"t/0": [b"r%d" % i]})
            assert acks["t/0"].base == i
        assert [r for _, r in c.read_all("t/0")] == [b"r%d" % i for i in range(5)]
        assert c.writers, "no trace was written"
        for w in c.writers.values():
            st = w.status()
            assert st is not None and st["record"] == 1, st
            assert st["error"] == os.strerror(28), st  # ENOSPC: nothing was written
    finally:
        c.close()


def test_a_cluster_whose_trace_cannot_grow_serves_on_and_says_so(tmp_path: Path) -> None:
    """newuser18 U7 as the user met it: `cluster start --trace FILE` with the file size
    limited (`ulimit -f`: the node processes inherit it). Old code: 15 records acknowledged,
    then 'waiting for node 1 ...: no answer yet' until the bound; status blamed reports."""
    d, trace = tmp_path / "c", tmp_path / "t.ndjson"
    limit = 16 << 10  # Raft's segments stay far below it for this many records
    start = subprocess.run(
        [sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir", str(d), "--store",
         str(tmp_path / "store"), "--nodes", "1", "--partitions", "t/0", "--trace", str(trace)],
        capture_output=True, text=True, timeout=BOUND_S, env=ENV,
        preexec_fn=lambda: _limited(limit))
    assert start.returncode == 0, start.stderr
    try:
        r = epochgc("produce", "--data-dir", str(d), "--partition", "t/0", "--count", "60",
                    "--batch", "1")
        assert r.returncode == 0, r.stderr[-2000:]
        assert trace.stat().st_size <= limit
        st = epochgc("cluster", "status", "--data-dir", str(d))
        said = [ln for ln in st.stdout.splitlines() if "trace stopped" in ln]
        assert len(said) == 1 and said[0].startswith("node 1: trace stopped at record "), st.stdout
        assert f": File too large ({trace} holds its records before it" in said[0], said
        js = json.loads(epochgc("cluster", "status", "--data-dir", str(d), "--json").stdout)
        ts = js["nodes"]["1"]["trace_stopped"]
        assert ts["error"] == "File too large" and ts["path"] == str(trace), ts
        ck = epochgc("check-trace", str(trace))
        assert ck.returncode == 0, ck.stdout + ck.stderr
        log = (d / "n1.log").read_text()
        assert log.count("trace stopped at record") == 1 and "Traceback" not in log, log[-3000:]
    finally:
        epochgc("cluster", "stop", "--data-dir", str(d))
