"""`epochgc cluster start|status|stop|kill`, `produce`/`consume --verify` (contents, not just
offsets) and the per-node Prometheus endpoint, on a real 3-process cluster."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.local import LocalCluster, _alive
from epochgc.impl.exitcodes import ExitCode

NAMED_METRICS = (
    "epochgc_window_slides", "epochgc_fences", "epochgc_stale_rejections",
    "epochgc_stale_window_gap", "epochgc_apply_rejections", "epochgc_reconciler_lag_records",
    "epochgc_inactive_epoch",
)


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def status(data: str) -> dict[str, Any]:
    r = cli("cluster", "status", "--data-dir", data, "--json")
    out: dict[str, Any] = json.loads(r.stdout)
    # 0 exactly when every node answers and M is known (a script waits on it).
    healthy = all(n is not None for n in out["nodes"].values()) and out["cluster"]["M"] is not None
    assert out["healthy"] is healthy and r.exit_code == (0 if healthy else 1), r.output
    return out


def leader_of(st: dict[str, Any], part: str) -> int | None:
    for n, node in st["nodes"].items():
        if node and node["partitions"].get(part, {}).get("leader") == int(n):
            return int(n)
    return None


def wait_for(pred: Any, timeout: float = 300.0) -> Any:
    """`pred()` once truthy; `timeout` is a bound for a hang, not a timing assumption (30 s
    was one: a loaded machine's cluster may take longer)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.3)
    raise TimeoutError("condition not reached")


def metrics_text(lc: LocalCluster, node: int) -> str:
    url = f"http://127.0.0.1:{lc.meta['metrics'][str(node)]}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        body: bytes = resp.read()
    return body.decode()


def sample(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith((name + "{", name + " ")):
            continue
        head, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def tamper(store: Path) -> int:
    """Change one body character of one record in every data object (length unchanged)."""
    n = 0
    for sub in ("level_zero", "level_one"):
        for f in (store / sub).rglob("*"):
            if not f.is_file():
                continue
            data = bytearray(f.read_bytes())
            at = data.find(b"EGR1|")
            if at < 0:
                continue
            pos = data.index(b"|", data.index(b"|", data.index(b"|", at + 5) + 1) + 1) + 3
            data[pos] = ord("0") if data[pos] != ord("0") else ord("1")
            f.write_bytes(bytes(data))
            n += 1
    return n


@pytest.mark.slow
def test_cluster_cli_status_kill_metrics_and_verified_consume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, store = str(tmp_path / "c"), tmp_path / "store"
    store.mkdir()
    monkeypatch.chdir(tmp_path)
    r = cli("cluster", "start", "--data-dir", data, "--store", "store",
            "--partitions", "t/0,t/1", "--mint-interval", "1.0", "--log-level", "info")
    assert r.exit_code == 0, r.output
    lc = LocalCluster(data)
    # --log-level reaches the nodes (their logs were WARNING-only, with no flag).
    assert '"msg": "serving"' in (tmp_path / "c" / "n1.log").read_text()
    # Saved absolute: every later command below runs from another directory.
    assert lc.meta["store"] == str(store)
    monkeypatch.chdir(tmp_path / "c")
    pids = dict(lc.meta["pids"])
    assert sorted(pids) == ["1", "2", "3"] and all(_alive(p) for p in pids.values())
    try:
        # Every partition led, an applied window on t/0's leader (housekeeping ran), and a
        # cluster M. (An early, empty partition snapshot gives M = its revision (R19), so M
        # alone no longer says that housekeeping and reports ran.)
        def ready(s: dict[str, Any]) -> bool:
            lead = leader_of(s, "t/0")
            return (s["cluster"]["M"] is not None and all(leader_of(s, p) for p in ("t/0", "t/1"))
                    and lead is not None
                    and s["nodes"][str(lead)]["partitions"]["t/0"].get("applied_window")
                    is not None)

        st = wait_for(lambda: ready(s := status(data)) and s)
        assert isinstance(st["cluster"]["M"], int)
        lead = leader_of(st, "t/0")
        assert lead is not None
        p0 = st["nodes"][str(lead)]["partitions"]["t/0"]
        for field in ("term", "applied_window", "seen_window", "lro", "inactive_epoch"):
            assert field in p0
        assert p0["term"] >= 1 and p0["applied_window"] is not None

        r = cli("produce", "--data-dir", data, "--partition", "t/0", "--partition", "t/1",
                "--count", "5")
        assert r.exit_code == 0, r.output
        assert {json.loads(x)["partition"] for x in r.stdout.splitlines()} == {"t/0", "t/1"}
        # newuser5 G7: a name the cluster does not have was 64 for produce, 1 for consume
        # and advance-epoch ("no leader known"): one code, the table's usage error, and a
        # line that says the partition is unknown.
        for args in (["produce", "--data-dir", data, "--partition", "nosuch/0"],
                     ["consume", "--data-dir", data, "--partition", "nosuch/0"],
                     ["gc-admin", "advance-epoch", "--data-dir", data, "--partition", "t/99"]):
            r = cli(*args)
            last = r.output.strip().splitlines()[-1:]
            assert r.exit_code == ExitCode.USAGE and last and last[0].startswith(
                f"epochgc {' '.join(args[:2]) if args[0] == 'gc-admin' else args[0]}: error: "
                f"--partition: partition {args[-1]!r} is unknown to the cluster"), (
                args[:2], r.exit_code, r.output)

        text = cli("cluster", "status", "--data-dir", data).stdout
        line = next(x for x in text.splitlines() if x.startswith("t/0"))
        for part in ("leader=", "term=", "applied=", "seen=", "LRO=", "M(p)="):
            assert part in line, line
        assert "cluster M:" in text

        # Metrics: every named family is exposed; the leader counted fences for t/0.
        lead = leader_of(status(data), "t/0")
        assert lead is not None
        m = metrics_text(lc, lead)
        for name in NAMED_METRICS:
            assert f"# TYPE {name}" in m, name
        assert sample(m, "epochgc_fences_total", partition="t/0") >= 1
        # A stamp below the window is rejected and counted (with its gap).
        r = cli("produce", "--data-dir", data, "--partition", "t/0", "--epoch", "0")
        assert r.exit_code != 0 and "stale_cluster_epoch" in r.output
        m = metrics_text(lc, lead)
        assert sample(m, "epochgc_stale_rejections_total", partition="t/0") >= 1
        assert sample(m, "epochgc_stale_window_gap_count") >= 1

        # kill: SIGKILL the leader; status reports it unreachable; the cluster carries on.
        r = cli("cluster", "kill", "--data-dir", data, str(lead))
        # newuser12 P5: old code said nothing, both times.
        said = f"node {lead} (pid {pids[str(lead)]}) killed\n"
        assert r.exit_code == 0 and r.stdout == said, r.output
        wait_for(lambda: not _alive(pids[str(lead)]))
        r = cli("cluster", "kill", "--data-dir", data, str(lead))
        said = f"node {lead} is not running: nothing killed\n"
        assert r.exit_code == 0 and r.stdout == said, r.output
        st = wait_for(lambda: (s := status(data))["nodes"][str(lead)] is None
                      and leader_of(s, "t/0") not in (None, lead) and s)
        r = cli("cluster", "status", "--data-dir", data)
        assert "unreachable" in r.stdout and r.exit_code == 1
        r = cli("produce", "--data-dir", data, "--partition", "t/0", "--count", "3")
        assert r.exit_code == 0, r.output
        # start restarts only the missing node
        r = cli("cluster", "start", "--data-dir", data, "--store", str(store))
        assert r.exit_code == 0 and f"node {lead}:" in r.output and r.output.count("node") == 1

        r = cli("consume", "--data-dir", data, "--partition", "t/0", "--partition", "t/1",
                "--verify")
        assert r.exit_code == 0, r.output
        got = {d["partition"]: d for d in map(json.loads, r.stdout.splitlines())}
        assert got["t/0"]["acked_checked"] == 8 and got["t/1"]["acked_checked"] == 5

        # Contents, not only offsets: one changed byte per object fails the verification.
        assert tamper(store) >= 1
        r = cli("consume", "--data-dir", data, "--partition", "t/0", "--verify")
        assert r.exit_code != 0 and "checksum mismatch" in r.output
    finally:
        r = cli("cluster", "stop", "--data-dir", data)
    assert r.exit_code == 0 and LocalCluster(data).meta["pids"] == {}
    assert not any(_alive(p) for p in pids.values())
    # newuser13 Q7: what was stopped is said (old code: nothing), and nothing to stop too.
    assert r.stdout == "stopped node(s) 1, 2, 3\n", r.output
    r = cli("cluster", "stop", "--data-dir", data)
    assert r.exit_code == 0 and r.stdout == "no node was running: nothing stopped\n", r.output


def test_a_second_start_on_the_same_directory_refuses(tmp_path: Path) -> None:
    """Issue 41 item 12: two `cluster start` at once on a new directory: the loser died on
    a raw `OSError: [Errno 98] ... address already in use` (or a `JSONDecodeError` on the
    winner's half-written cluster.json). Deterministic: the first start stops itself
    (SIGSTOP, the signal hook) once its nodes are up, holding the directory's lock; the
    second must refuse naming it, start nothing, and leave the first one's cluster alone."""
    import os
    import signal
    import subprocess
    import sys

    from epochgc.impl.proctree import _stat
    from epochgc.impl.signals import HOOK_ENV

    root = Path(__file__).resolve().parents[2]
    data, store = str(tmp_path / "c"), str(tmp_path / "store")
    args = [sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir", data,
            "--store", store, "--nodes", "1", "--partitions", "t/0"]
    env = dict(os.environ, PYTHONPATH=str(root))
    first = subprocess.Popen(args, env={**env, HOOK_ENV: "nodes-up:SIGSTOP"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while (st := _stat(first.pid)) is None or st[1] != "T":  # stopped at the point
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first start never reached its nodes"
            time.sleep(0.05)
        second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
        cli("cluster", "stop", "--data-dir", data)
    assert second.returncode == 1, second.stderr
    assert (f"another `epochgc cluster start` (pid {first.pid}) is running on"
            in second.stderr), second.stderr
    assert "node 1: pid" not in second.stdout and "Errno" not in second.stderr
    assert first.returncode == 0 and "cluster ready" in out, err


def test_a_start_after_its_nodes_were_killed_starts_them_again(tmp_path: Path) -> None:
    """newuser7 H5: after its nodes were killed by `kill -9` (the crash or OOM case),
    cluster.json kept their pids and a second `cluster start` started nothing: with every
    node dead it waited 60 s in silence and failed `RuntimeError: cluster not ready`; with
    one dead it said "cluster ready" (0) with that node down. A recorded pid now counts as
    the node only when that process is alive and is that node (its command line): node
    2's pid is dead, node 3's was reused by an unrelated process, which must not be taken
    for the node nor signalled."""
    import os
    import signal
    import subprocess
    import sys

    from epochgc.impl.proctree import alive

    data, store = str(tmp_path / "c"), str(tmp_path / "store")
    args = ("cluster", "start", "--data-dir", data, "--store", store, "--partitions", "t/0")
    r = cli(*args)
    assert r.exit_code == 0, r.output
    lc = LocalCluster(data)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        for nid in ("2", "3"):
            pid = int(lc.meta["pids"][nid])
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)  # started by this process (CliRunner): reaped here
            assert not alive(pid)
        lc.meta["pids"]["3"] = other.pid  # its pid reused
        lc.save()
        r = cli(*args)
        assert r.exit_code == 0, r.output
        assert "node 2: pid" in r.output and "node 3: pid" in r.output, r.output
        assert "node 1: pid" not in r.output, r.output
        st = wait_for(lambda: (s := status(data))["healthy"] and s)
        assert all(n is not None for n in st["nodes"].values()), st
        assert other.poll() is None, "an unrelated process with a recorded pid was signalled"
        cli("cluster", "stop", "--data-dir", data)
        assert other.poll() is None, "`cluster stop` signalled an unrelated process"
    finally:
        cli("cluster", "stop", "--data-dir", data)
        other.kill()
        other.wait()
