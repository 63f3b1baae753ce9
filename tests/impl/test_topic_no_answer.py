"""newuser9 K9: `topic create` whose answer did not come within the client's timeout (1,024
partitions proposed one by one on a loaded host: 31 s) was sent again, and the controller
refused the second request: "topic ... already exists", made by the first one, exit 1.

A request that changes the controller's table is never sent again once sent: a timeout is
said as a timeout ("had been sent to node N, not answered (no answer within N s): it may
have been applied ..."), exit 1,
with what the cluster shows now. Long lists in lines are cut ("... and N more").

The cluster is real (three broker processes on their disk logs); the client is real, its
timeout made zero for the first create only (`SHORT_S`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.rpc import RpcClient
from epochgc.impl.controller.statemachine import ControllerStateMachine, encode_create
from epochgc.impl.controller.topics import TopicError, check_create
from epochgc.impl.raft.messages import Entry
from epochgc.impl.shortlist import short_list, short_tail

# Zero, not "too short for any machine": 1 ms was not (CI: node 1 was a follower, answered
# `not_leader` within it, and the leader created the topic). `asyncio.timeout(0)` schedules
# its cancel with `call_soon`, ahead of the reader task that would set the answer (which needs
# one more loop turn after the socket is readable), so the request is sent (the write is
# synchronous) and never answered in time, whatever the host's speed or the node's role.
SHORT_S = 0.0


def test_a_create_without_an_answer_in_time_is_said_as_a_timeout_and_status_cut(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Old code: the create was sent again after its timeout and refused: "create_topic
    'big' refused: topic 'big' already exists (partitions big/0, ...); delete it first",
    exit 1, the topic made (in part) by its own first request."""
    runner = CliRunner()
    data = str(tmp_path / "c")
    r = runner.invoke(main, ["cluster", "start", "--data-dir", data, "--store",
                             str(tmp_path / "store"), "--partitions", "t/0"])
    assert r.exit_code == 0, r.output
    try:
        sent: list[dict[str, Any]] = []
        real_call = RpcClient.call

        async def first_create_unanswered(self: RpcClient, timeout: float = 30.0,
                                          **req: Any) -> dict[str, Any]:
            # The client's own timeout, made too short for the first create only: the
            # answer of a loaded host's 31 s create, without the loaded host.
            if req.get("op") == "create_topic":
                sent.append(dict(req))
                if len(sent) == 1:
                    timeout = SHORT_S
            return await real_call(self, timeout, **req)

        monkeypatch.setattr(RpcClient, "call", first_create_unanswered)
        r = runner.invoke(main, ["topic", "create", "big", "--partitions", "16",
                                 "--data-dir", data])
        monkeypatch.undo()
        assert "already exists" not in r.output, r.output
        assert r.exit_code == 1, r.output
        assert len(sent) == 1, sent  # never sent again
        line = r.output.strip()
        assert "\n" not in line, r.output
        # The signal path's words (newuser17 T2), with the timeout said.
        assert line.startswith("epochgc topic create: error: create_topic 'big' had been "
                               "sent to node "), line
        assert (f", not answered (no answer within {SHORT_S:g} s): it may have been "
                "applied, in whole or in part (a node shows at least ") in line, line
        assert "partition(s) of 'big'" in line, line
        assert line.endswith(f"); `epochgc cluster status --data-dir {data}` shows the "
                             "cluster and flags a topic short of its partitions; `epochgc "
                             f"topic delete big --data-dir {data}` removes it"), line
    finally:
        runner.invoke(main, ["cluster", "stop", "--data-dir", data])
    _cluster_status_cuts_the_partitions_without_a_report(data, tmp_path / "store")


def _cluster_status_cuts_the_partitions_without_a_report(data: str, store_dir: Path) -> None:
    """Old code: `cluster M: none (no inactive epoch reported for: ...)` named every one
    (the tester's line: ~20,000 characters). On the same cluster, stopped (a cluster of its
    own costs the suite ~4 s): its store's partition table now has 30 partitions no report
    names (its reports, fresh or stale, cover t/0 at most), so `status` is deterministic:
    every node unreachable, M blocked on those 30."""
    from epochgc.impl.controller.publisher import publish_partitions
    from epochgc.impl.store.local import LocalStore

    sm = ControllerStateMachine()
    for i, name in enumerate(["t/0"] + [f"w/{i}" for i in range(30)]):
        sm.apply(Entry(i + 1, 1, data=encode_create(name)))
    publish_partitions(LocalStore(store_dir), sm)
    r = CliRunner().invoke(main, ["cluster", "status", "--data-dir", data])
    assert r.exit_code == 1, r.output
    last = r.output.strip().splitlines()[-1]
    assert last.startswith("cluster M: none (no inactive epoch reported for: "), r.output
    assert last.endswith(" more)") and "w/29" not in last, last


def test_an_existing_topic_with_many_partitions_is_named_in_a_short_line() -> None:
    """Old code: every partition named ("m1024x3/0, m1024x3/1, ..., m1024x3/1023")."""
    sm = ControllerStateMachine()
    for i in range(1024):
        sm.apply(Entry(i + 1, 1, data=encode_create(f"m/{i}")))
    with pytest.raises(TopicError) as e:
        check_create(sm, "m", 3)
    assert str(e.value) == (
        "topic 'm' already exists (partitions m/0, m/1, m/2, m/3, m/4, m/5, m/6, m/7, m/8, "
        "m/9 and 1,014 more, controller revision 1024); delete it first")


def test_short_list_and_tail() -> None:
    names = [f"p/{i}" for i in range(1500)]
    assert short_list(names[:10]) == ", ".join(names[:10])
    assert short_list(names) == ", ".join(names[:10]) + " and 1,490 more"
    assert short_list(names[:11], shown=2) == "p/0, p/1 and 9 more"
    blocked = "no inactive epoch reported for: " + ", ".join(names)
    assert short_tail(blocked) == ("no inactive epoch reported for: "
                                   + ", ".join(names[:10]) + " and 1,490 more")
    assert short_tail("nothing to cut") == "nothing to cut"
    assert short_tail("a: b, c") == "a: b, c"


def test_a_gc_round_blocked_on_many_partitions_says_the_first_ones(tmp_path: Path) -> None:
    """The same list in `gc`'s lines (old: every partition without a report named, twice);
    the record (and --json) keep the whole list: a machine reads them."""
    import subprocess
    import sys

    from epochgc.impl.store.local import LocalStore
    from tests.gc.helpers import AHEAD, NOW, write_health, write_partitions

    store = LocalStore(tmp_path / "s", create=True)
    names = [f"w/{i}" for i in range(30)]
    write_partitions(store, 10**6, names)
    write_health(store, "n1", NOW - 10, [("w/0", 5)])
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "-m", "epochgc", "gc", "--store", str(tmp_path / "s"),
                        "--now", str(NOW), *AHEAD], capture_output=True, text=True,
                       cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
                       timeout=300)
    assert p.returncode == 2, p.stderr
    whole = "no inactive epoch reported for: " + ", ".join(names[1:])
    cut = "no inactive epoch reported for: " + ", ".join(names[1:11]) + " and 19 more"
    [record] = (tmp_path / "s" / "_cluster" / "gc" / "rounds").iterdir()
    assert json.loads(record.read_text())["blocked"] == whole
    assert f"gc: no collection this round ({cut})" in p.stderr.splitlines(), p.stderr
    assert p.stdout.splitlines() == [f"gc: round blocked, nothing deleted: {cut}"], p.stdout
