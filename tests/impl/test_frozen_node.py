"""newuser9 K12: one node of three frozen (SIGSTOP: a VM pause, a stalled disk, a
debugger). Its listening socket still accepts (the kernel completes the handshake for a
stopped process), so a client without a bound waited on it: `produce`, `consume` and
`barrier` silently for minutes, `topic create`, `advance-epoch`, `cluster status` 30 s
each. Now a read is bounded (client.QUICK_S), the node is said once ("node 1
(127.0.0.1:PORT) does not answer; trying the others") and asked last from then on.

The cluster is real (three broker processes on their disk logs); node 1 is really
stopped, and continued in a `finally`. The waits are bounds, generous for a loaded
machine; no fixed sleep."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from epochgc.impl.cluster import asked
from epochgc.impl.cluster.client import ProcClusterAccess
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.controller.topics import topic_names
from tests.impl.cli_cluster import BOUND_S, ENV, epochgc, module_cluster
from tests.interrupted import by_signal

# BOUND_S (tests/impl/cli_cluster.py): the old code took 30 s per attempt, several
# attempts per command; the new one ~10 s. A command's own default bound stays 300 s.
_epochgc = functools.partial(epochgc, timeout=300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cluster for the module (a start costs ~4 s); each test continues its node."""
    yield from module_cluster(tmp_path_factory, "frozen", 3, _stop_cut_short_then_whole)


def _stop_cut_short_then_whole(d: Path) -> None:
    """The module's cluster's end (no cluster of its own: a start costs ~5 s), and
    newuser11 M12: `cluster stop` interrupted with 1 of 3 nodes stopped said only
    "interrupted by SIGINT". The signal comes once node 1 is stopped (the hook point
    `node-stopped`); a second stop finishes the job. Old code: no such point, every node
    stopped, exit 0."""
    whole = None
    try:
        cut = _epochgc("cluster", "stop", "--data-dir", str(d),
                       hook="node-stopped:SIGINT")
        pids = LocalCluster(d).meta["pids"]
        whole = _stop_with_node_3_frozen(d, pids)
    finally:
        _epochgc("cluster", "stop", "--data-dir", str(d))
    assert cut.returncode == by_signal(signal.SIGINT), cut.stderr
    assert (f"epochgc cluster stop: interrupted by SIGINT: node(s) 1 stopped; node(s) 2, 3 not "
            f"asked: `epochgc cluster stop --data-dir {d}` again stops what still runs"
            ) in cut.stderr, cut.stderr
    assert sorted(pids) == ["2", "3"], pids
    assert LocalCluster(d).meta["pids"] == {}
    # newuser12 P14: a frozen node SIGKILLed by the stop is said, and the wait before it.
    # Old code: nothing at all (15.7 s silent, exit 0). Node 3 is stopped (SIGSTOP): its
    # SIGTERM stays pending, so it is killed whatever the machine's load.
    assert whole is not None and whole.exit_code == 0, whole and whole.output
    p3 = pids["3"]
    assert (f"waiting for node 3 (pid {p3}) to stop: SIGKILL if it has not within 1 s\n"
            f"node 3 (pid {p3}) did not stop within 1 s: killed\n") in whole.stderr, whole.stderr
    assert not LocalCluster(d).is_node(3, p3)  # gone (a zombie has no command line)


def _stop_with_node_3_frozen(d: Path, pids: dict[str, int]) -> Any:
    """`cluster stop` in this process with node 3 frozen and the SIGTERM grace cut to 1 s
    (the real 10 s is only a bound; the wait it says is the same code)."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.cluster import local

    os.kill(pids["3"], signal.SIGSTOP)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local, "STOP_GRACE_S", 1.0)
        mp.setattr(local, "WAIT_SAY_S", 0.2)
        return CliRunner().invoke(main, ["cluster", "stop", "--data-dir", str(d)])


def test_a_frozen_node_is_said_and_passed_over(cluster: Path) -> None:
    r = _epochgc("produce", "--data-dir", str(cluster), "--partition", "t/0", "--count", "5")
    assert r.returncode == 0, r.stderr
    lc = LocalCluster(cluster)
    pid = int(lc.meta["pids"]["1"])
    port = lc.client_addrs()[1][1]
    os.kill(pid, signal.SIGSTOP)
    try:
        said = f"node 1 (127.0.0.1:{port}) does not answer; trying the others"
        try:
            r = _epochgc("consume", "--data-dir", str(cluster), "--partition", "t/0",
                         timeout=BOUND_S)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"consume still waiting after {BOUND_S} s: {e.stderr!r}")
        assert r.returncode == 0 and said in r.stderr, (r.returncode, r.stderr)
        assert '"records": 5' in r.stdout, r.stdout
        try:
            r = _epochgc("produce", "--data-dir", str(cluster), "--partition", "t/0",
                         "--count", "3", timeout=BOUND_S)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"produce still waiting after {BOUND_S} s: {e.stderr!r}")
        assert r.returncode == 0 and said in r.stderr, (r.returncode, r.stderr)
    finally:
        os.kill(pid, signal.SIGCONT)


async def _until_led_by(lc: LocalCluster, ids: set[int]) -> None:
    """Until nodes `ids` agree the controller and every partition are led among them."""
    access = ProcClusterAccess({n: a for n, a in lc.client_addrs().items() if n in ids})
    try:
        async with asyncio.timeout(BOUND_S):
            while True:
                seen = [(await access.call(n, op="status")).get("data") for n in sorted(ids)]
                if all(st is not None and st["controller"]["leader"] in ids
                       and all(p["leader"] in ids for p in st["partitions"].values())
                       for st in seen):
                    return
                await asyncio.sleep(0.2)
    finally:
        await access.close()


def test_a_frozen_node_does_not_eat_the_barriers_wait(cluster: Path) -> None:
    """newuser10 L1: `barrier` asked the nodes one after another, so the frozen node's read
    bound (10 s) used all of `--wait`; every partition was said `missing`, exit 1, though
    the barrier was applied everywhere. `--wait 9` is under that bound: the old code
    cannot pass however fast the cluster; the new one needs the barrier applied in 9 s
    (a barrier round runs every second)."""
    lc = LocalCluster(cluster)
    pid = int(lc.meta["pids"]["3"])
    os.kill(pid, signal.SIGSTOP)
    try:
        # Node 3 may have led t/0 or the controller: a change sent to it before the
        # others elect anew waits its own 30 s bound, which is not what this test is about.
        asyncio.run(_until_led_by(lc, {1, 2}))
        r = _epochgc("barrier", "--data-dir", str(cluster), "--wait", "9", "--json",
                     timeout=BOUND_S)
        out = json.loads(r.stdout)
        assert r.returncode == 0 and out["applied"], (r.returncode, r.stdout, r.stderr)
        assert {x["state"] for x in out["partitions"].values()} <= {"pending", "promoted"}
        assert out["unanswered"] == [3], out
        assert "no answer from node(s) 3; the table is from the nodes that answered" in r.stderr
    finally:
        os.kill(pid, signal.SIGCONT)


def test_barrier_wait_0_still_reports_every_partition(cluster: Path) -> None:
    """`--wait 0` asks once and reports: the nodes asked at once must not make it end
    before any has answered (every partition `missing`, no node answered)."""
    r = _epochgc("barrier", "--data-dir", str(cluster), "--wait", "0", "--json",
                 timeout=BOUND_S)
    out = json.loads(r.stdout)
    assert out["partitions"] and out["unanswered"] == [], (r.stdout, r.stderr)
    if not out["applied"]:  # nearly always at --wait 0 (a barrier round runs every second)
        # newuser25 H4: exit 1 with stderr empty. Now its last line says why.
        missing = sum(1 for x in out["partitions"].values() if x["state"] == "missing")
        assert r.returncode == 1 and r.stderr.splitlines()[-1].startswith(
            f"epochgc barrier: error: {missing} of {len(out['partitions'])} partition(s) did "
            f"not apply candidate {out['candidate']} within --wait 0 s; "), r.stderr
    else:
        assert r.returncode == 0, r.stderr


async def _until_topic_has(lc: LocalCluster, topic: str, count: int) -> None:
    """Until every node shows `count` partitions of `topic` (a bound, not a sleep)."""
    access = ProcClusterAccess(lc.client_addrs())
    seen: list[int | None] = []
    try:
        async with asyncio.timeout(BOUND_S):
            while True:
                metas = [await access.call(n, op="meta") for n in sorted(lc.client_addrs())]
                seen = [len(topic_names(m["partitions"], topic)) if m.get("status") == "ok"
                        else None for m in metas]
                if seen == [count] * len(metas):
                    return
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"after {BOUND_S} s the nodes show {seen} partition(s) of {topic!r}, "
                    f"not {count}")
    finally:
        await access.close()


def test_a_topic_change_stopped_by_a_signal_is_carried_out_whole(cluster: Path) -> None:
    """newuser10 L2 (shares this module's cluster: the suite's time). A Ctrl-C after
    `topic create --partitions 64` had sent its request: "interrupted by SIGINT" only, and
    the node, its client gone, cancelled the request between two partitions: 12 of 64 left
    for good, the retry refused "already exists". Now the node carries a change it has
    begun out whole and the line says the request was sent. The signal comes at the hook
    point `change-sent` (the request written, its answer not read); `topic delete` too."""
    lc = LocalCluster(cluster)
    r = _epochgc("topic", "create", "zt", "--partitions", "64", "--data-dir", str(cluster),
                 hook="change-sent:SIGINT")
    assert r.returncode == by_signal(signal.SIGINT), (r.returncode, r.stderr)
    assert ("epochgc topic create: interrupted by SIGINT: create_topic 'zt' had been sent to "
            "node ") in r.stderr, r.stderr
    # newuser11 M11: not "created in full": a node stopped mid-create leaves part of it.
    assert "not answered: it may have been applied, in whole or in part" in r.stderr, r.stderr
    assert "in full" not in r.stderr, r.stderr
    # asyncio's "Future exception was never retrieved ... ConnectionError" (s25d): the
    # call's answer future, left waiting when the signal came, failed at the close.
    assert "never retrieved" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    asyncio.run(_until_topic_has(lc, "zt", 64))
    r = _epochgc("topic", "delete", "zt", "--data-dir", str(cluster),
                 hook="change-sent:SIGTERM")
    assert r.returncode == by_signal(signal.SIGTERM), (r.returncode, r.stderr)
    assert "delete_topic 'zt' had been sent to node " in r.stderr, r.stderr
    asyncio.run(_until_topic_has(lc, "zt", 0))


def test_status_flags_a_topic_short_of_what_its_unseen_create_asked_for(
        cluster: Path) -> None:
    """newuser11 M11: a `cluster stop` during `topic create big --partitions 1024` left 256
    partitions for good, and `cluster status` said nothing, exit 0. The short topic here is
    made the other way a create's unseen outcome leaves one: `zs/0..2` exist, and
    `topic create zs --partitions 8` is stopped once sent (the node refuses it: it exists;
    the command never reads that). Old code: no line, the exit code of the rest."""
    lc = LocalCluster(cluster)

    async def three() -> None:
        access = ProcClusterAccess(lc.client_addrs())
        try:
            for i in range(3):
                r = await access.controller_call(op="create", name=f"zs/{i}")
                assert r["status"] == "ok", r
        finally:
            await access.close()

    asyncio.run(three())
    r = _epochgc("topic", "create", "zs", "--partitions", "8", "--data-dir", str(cluster),
                 hook="change-sent:SIGINT")
    assert r.returncode == by_signal(signal.SIGINT), (r.returncode, r.stderr)
    asyncio.run(_until_topic_has(lc, "zs", 3))
    assert (cluster / "topics-asked.json").exists(), (r.stderr, list(cluster.iterdir()))
    r = _epochgc("cluster", "status", "--data-dir", str(cluster))
    line = (f"topic 'zs': 3 of the 8 partitions its create asked for (a create cut short, "
            f"or still running: `epochgc topic delete zs --data-dir {cluster}`, then create "
            "it again)")
    assert line in r.stdout.splitlines() and r.returncode == 1, (r.returncode, r.stdout)
    r = _epochgc("cluster", "status", "--data-dir", str(cluster), "--json")
    assert json.loads(r.stdout)["short_topics"] == {"zs": {"partitions": 3, "asked": 8}}
    r = _epochgc("topic", "delete", "zs", "--data-dir", str(cluster))
    assert r.returncode == 0, r.stderr
    r = _epochgc("cluster", "status", "--data-dir", str(cluster))
    assert "topic 'zs'" not in r.stdout, r.stdout  # its outcome seen: forgotten


def test_status_says_but_does_not_count_a_create_never_made(cluster: Path) -> None:
    """newuser16 S4: a create that failed before its request was sent (two creates at once
    on the old fixed temporary name) left `{"y3": 1}` in the ledger, no partition of y3
    anywhere, and every `cluster status` after it exited 1 (the README's `until cluster
    status` loop never ended). Now said, not counted; a `topic delete` clears it. Old code:
    exit 1, "0 of the 1 partitions"."""
    (cluster / "topics-asked.json").write_text('{"y3": 1}')
    r = _epochgc("cluster", "status", "--data-dir", str(cluster))
    assert "0 of the 1 partitions" not in r.stdout, r.stdout
    assert "topic 'y3': no partition of it exists; a `topic create` of it (1 partition(s)) " \
        "ended without seeing its outcome" in r.stdout, r.stdout
    r = _epochgc("cluster", "status", "--data-dir", str(cluster), "--json")
    doc = json.loads(r.stdout)
    assert (doc["short_topics"], doc["never_made"]) == ({}, {"y3": {"asked": 1}}), doc
    # Healthy as the rest of the cluster is (its M is reported a little after a start).
    assert doc["healthy"] == (doc["cluster"]["M"] is not None), doc
    _epochgc("topic", "delete", "y3", "--data-dir", str(cluster))  # refused: unknown
    assert not (cluster / "topics-asked.json").exists()


def test_a_barrier_stopped_by_a_signal_says_it_had_started(cluster: Path) -> None:
    """newuser11 M12: a Ctrl-C said "interrupted by SIGINT" only. Stopped once the
    controller answered with the candidate, it says the barrier started and how far it
    got."""
    r = _epochgc("barrier", "--data-dir", str(cluster), "--wait", "30",
                 hook="barrier-started:SIGINT")
    assert r.returncode == by_signal(signal.SIGINT), (r.returncode, r.stderr)
    assert "epochgc barrier: interrupted by SIGINT: the barrier had started (candidate " \
        in r.stderr, r.stderr
    assert "partition(s) had applied it, the others do on their leaders' own barrier " \
        "rounds" in r.stderr, r.stderr


def test_an_advance_stopped_by_a_signal_after_it_was_sent_says_so(cluster: Path) -> None:
    """L2's shape in `gc-admin advance-epoch` (a break-glass proposal on the partition's
    leader): stopped once its request was out, it said "interrupted by SIGINT" only."""
    r = _epochgc("gc-admin", "advance-epoch", "--data-dir", str(cluster), "--partition",
                 "t/0", hook="change-sent:SIGINT")
    assert r.returncode == by_signal(signal.SIGINT), (r.returncode, r.stderr)
    assert ("epochgc gc-admin advance-epoch: interrupted by SIGINT: the advance of t/0 had "
            "been sent to node ") in r.stderr, r.stderr


def test_cluster_status_asks_every_node_at_once(tmp_path: Path) -> None:
    """newuser10 L10: `cluster status` asked the nodes one after another, so a frozen node
    held the others' answers for its whole read bound (QUICK_S, 10 s each). Here every node
    is an endpoint that accepts and never answers (tests/store/blackhole.py): every one must
    be asked before the command gives up on any (old code: node 2 was asked only once it had
    given up on node 1, after 10 s). No timing: the holes say when a request arrived and
    when the client closed a connection."""
    from tests.store.blackhole import blackhole

    lc = LocalCluster(tmp_path / "c")
    lc.init(3, str(tmp_path / "store"), ["t/0"], 2.0)
    with blackhole() as h1, blackhole() as h2, blackhole() as h3:
        holes = [h1, h2, h3]
        lc.meta["client"] = {str(i): h.port for i, h in enumerate(holes, 1)}
        lc.save()
        proc = subprocess.Popen([sys.executable, "-m", "epochgc", "cluster", "status",
                                 "--data-dir", str(lc.dir)], env=ENV,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            for h in holes:  # bounded: a hang fails, it does not wait out the suite
                assert h.requested.wait(BOUND_S), [x.requested.is_set() for x in holes]
            # Every node asked while none had been given up on: asked at once.
            assert [h.given_up for h in holes] == [0, 0, 0], [h.given_up for h in holes]
        finally:
            proc.kill()
            proc.wait()


class _Spy(ProcClusterAccess):
    """A real access that notes each request it sends (node, op) and each `status` answer:
    which node a request went to first, and which leader the access knew then."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[int, str, Any]] = []

    async def call(self, nid: int, **req: Any) -> dict[str, Any]:
        answer = await super().call(nid, **req)
        leader = ((answer.get("data") or {}).get("controller") or {}).get("leader")
        self.sent.append((nid, str(req.get("op")), leader))
        return answer


def test_the_barrier_is_sent_to_the_controller_leader_first(cluster: Path) -> None:
    """newuser10 L10: the barrier's own request went to the first node (`via`) whatever the
    leader; a follower only says `not_leader` (and a frozen one held it 30 s). The access
    here starts at a follower: the barrier must go to the leader its status named."""
    lc = LocalCluster(cluster)
    asyncio.run(_until_led_by(lc, set(lc.ids)))  # an earlier test's frozen node continued

    async def go() -> list[tuple[int, str, Any]]:
        probe = ProcClusterAccess(lc.client_addrs())
        try:
            st = (await probe.call(1, op="status"))["data"]
        finally:
            await probe.close()
        follower = min(n for n in lc.ids if n != st["controller"]["leader"])
        spy = _Spy(lc.client_addrs(), via=follower)
        try:
            r = await spy.controller_call(op="barrier")
            assert r["status"] == "ok", r
        finally:
            await spy.close()
        return spy.sent

    sent = asyncio.run(go())
    barriers = [nid for nid, op, _ in sent if op == "barrier"]
    known = [leader for _, op, leader in sent if op == "status" and leader is not None]
    assert known and barriers[0] == known[-1], sent  # old code: no status, via first


def _stopped_at_change_sent(*argv: str) -> subprocess.Popen[str]:
    """`epochgc ARGV` stopped (SIGSTOP, by the hook point `change-sent`) once its change is
    written to its node: a command still running, its ledger entry written before it sent.
    Ordered by the hook's line, not by time."""
    p = subprocess.Popen([sys.executable, "-m", "epochgc", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env=dict(ENV, EPOCHGC_TEST_SIGNAL="change-sent:SIGSTOP"))
    assert p.stderr is not None
    seen = []
    for line in p.stderr:
        seen.append(line)
        if "test hook: SIGSTOP at change-sent" in line:
            return p
    p.wait(timeout=BOUND_S)
    pytest.fail(f"{argv} ended (rc {p.returncode}) before its change was sent: {seen}")


def _continued(p: subprocess.Popen[str]) -> tuple[str, str]:
    os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=BOUND_S)
    return out, err


def test_a_second_command_of_a_topic_whose_create_or_delete_runs_is_refused(
        cluster: Path) -> None:
    """newuser17 T1: `topic delete r4` run while `topic create r4 --partitions 12` was still
    proposing its partitions deleted the ones made so far; the create went on; both exit 0,
    r4/2..r4/11 left. T7: two deletes at once both exit 0 and print the same deletions. Now
    the ledger's entry of the running one (written under its lock before the request is
    sent) refuses the other, which sends nothing. Old code: the delete ran (exit 0, or
    "unknown topic" had none been made yet); the second delete exit 0 (or a raw refusal)."""
    lc = LocalCluster(cluster)
    create = _stopped_at_change_sent("topic", "create", "r4", "--partitions", "6",
                                     "--data-dir", str(cluster))
    try:
        r = _epochgc("topic", "delete", "r4", "--data-dir", str(cluster))
    finally:
        out, err = _continued(create)
    assert r.stderr.strip().splitlines()[-1:] == [
        f"epochgc topic delete: error: a create of 'r4' is running (pid {create.pid}); "
        "run the delete after it (nothing was done)"], (r.returncode, r.stdout, r.stderr)
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout)
    # Made whole. Its own answer is read on SIGCONT, unless the machine held the refused
    # delete past the create's 30 s bound (then said as sent, not answered: still true).
    assert (create.returncode, len(out.splitlines())) == (0, 6) or (
        create.returncode == 1 and "had been sent to node" in err), (create.returncode, err)
    asyncio.run(_until_topic_has(lc, "r4", 6))

    delete = _stopped_at_change_sent("topic", "delete", "r4", "--data-dir", str(cluster))
    try:
        r = _epochgc("topic", "delete", "r4", "--data-dir", str(cluster))
    finally:
        out, err = _continued(delete)
    assert r.stderr.strip().splitlines()[-1:] == [
        "epochgc topic delete: error: topic 'r4' is being deleted by another command "
        f"(`epochgc topic delete`, pid {delete.pid}): nothing was done by this one"], (
        r.returncode, r.stdout, r.stderr)
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout)
    assert (delete.returncode, len(out.splitlines())) == (0, 6) or (
        delete.returncode == 1 and "had been sent to node" in err), (delete.returncode, err)
    asyncio.run(_until_topic_has(lc, "r4", 0))
    if delete.returncode == 0:
        assert "r4" not in asked.everything(cluster)  # both outcomes seen: forgotten
    asked.settle(cluster, "r4")  # an unseen outcome's entry (its command has ended)


def test_a_topic_change_whose_connection_is_lost_once_sent_says_it_was_sent(
        cluster: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser17 T2: a create (or delete) whose node's connection ended after the request
    was written (`cluster stop` during it) said "no node of the cluster answered ... is it
    running?", though the node had carried it out (`serve_client` carries a change on when
    its client goes). Here the connection is really lost once the request is written (its
    socket aborted, as a node's stop ends it); the node carries the create out. Now: the
    signal path's words, sent once. Old code: sent again, and refused "already exists"."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.cluster.rpc import RpcClient

    real_call = RpcClient.call
    sent: list[str] = []

    async def lost_once_sent(self: RpcClient, timeout: float = 30.0,
                             **req: Any) -> dict[str, Any]:
        if req.get("op") != "create_topic":
            return await real_call(self, timeout, **req)
        sent.append(req["op"])
        answer = asyncio.ensure_future(real_call(self, timeout, **req))
        await asyncio.sleep(0)  # one loop turn: its first step has written the request
        if len(sent) == 1:
            self.writer.transport.abort()  # the connection lost, its answer never read
        return await answer

    lc = LocalCluster(cluster)
    # An earlier test's frozen node continued: a settled leader, so that the one create
    # sent goes to it (a follower would only answer `not_leader`, never read here).
    asyncio.run(_until_led_by(lc, set(lc.ids)))
    monkeypatch.setattr(RpcClient, "call", lost_once_sent)
    try:
        r = CliRunner().invoke(main, ["topic", "create", "zc", "--partitions", "4",
                                      "--data-dir", str(cluster)])
    finally:
        monkeypatch.undo()
        asked.settle(cluster, "zc")  # this process's entry (it lives on: not "cut short")
    line = r.output.strip().splitlines()[-1]
    assert r.exit_code == 1 and sent == ["create_topic"], (r.exit_code, sent, r.output)
    assert line.startswith("epochgc topic create: error: create_topic 'zc' had been sent "
                           "to node "), line
    assert (", not answered (broker connection closed): it may have been applied, in whole "
            "or in part (a node shows at least ") in line, line
    asyncio.run(_until_topic_has(lc, "zc", 4))
    r2 = _epochgc("topic", "delete", "zc", "--data-dir", str(cluster))
    assert r2.returncode == 0, r2.stderr


def test_status_flags_a_delete_cut_short_and_a_topic_deleted_below_a_partition(
        cluster: Path) -> None:
    """newuser17 T1/T2: a topic left with r4/2..r4/11 of 12 (a delete and a create
    crossed), and one left in part by a delete cut short (248 of 300): `cluster status`
    said neither, exit 0. The partitions are made and deleted one by one through the
    controller (what the crossing commands did); the cut delete is a ledger entry whose
    command has ended. Old code: no line, no JSON key."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main

    lc = LocalCluster(cluster)

    async def make() -> None:
        access = ProcClusterAccess(lc.client_addrs())
        try:
            for name in ["zh/0", "zh/1", "zh/2", "zh/3", "zk/0", "zk/1"]:
                assert (await access.controller_call(op="create", name=name))["status"] == "ok"
            for name in ["zh/0", "zh/1"]:
                assert (await access.controller_call(op="delete", name=name))["status"] == "ok"
        finally:
            await access.close()

    asyncio.run(make())
    asyncio.run(_until_topic_has(lc, "zh", 2))
    asyncio.run(_until_topic_has(lc, "zk", 2))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (cluster / asked.FILE).write_text(json.dumps(
        {"zk": {"partitions": 0, "pid": int(gone.stdout), "started": 1, "op": "delete"}}))
    r = CliRunner().invoke(main, ["cluster", "status", "--data-dir", str(cluster)])
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert (f"topic 'zk': 2 partition(s) left by a `topic delete` of it that ended without "
            f"seeing its outcome, or still runs (run `epochgc topic delete zk --data-dir "
            f"{cluster}` again)") in lines, r.output
    assert (f"topic 'zh': partition(s) zh/0, zh/1 were deleted while higher ones exist (a "
            f"delete and a create of it crossed, or a delete cut short: `epochgc topic delete "
            f"zh --data-dir {cluster}`, then create it again)") in lines, r.output
    r = CliRunner().invoke(main, ["cluster", "status", "--data-dir", str(cluster), "--json"])
    doc = json.loads(r.output)
    assert doc["deletes_cut_short"] == {"zk": {"partitions": 2}}, doc
    assert doc["deleted_below_existing"] == {"zh": ["zh/0", "zh/1"]}, doc
    for t in ("zh", "zk"):
        r2 = _epochgc("topic", "delete", t, "--data-dir", str(cluster))
        assert r2.returncode == 0, r2.stderr
    r = CliRunner().invoke(main, ["cluster", "status", "--data-dir", str(cluster)])
    assert "topic 'z" not in r.output, r.output


async def _until_not_controller_leader(lc: LocalCluster, nid: int) -> None:
    """Until node `nid` says it does not lead the controller (a bound, not a sleep)."""
    access = ProcClusterAccess({nid: lc.client_addrs()[nid]})
    try:
        async with asyncio.timeout(BOUND_S):
            while True:
                st = (await access.call(nid, op="status")).get("data")
                if st is not None and st["controller"]["leader"] != nid:
                    return
                await asyncio.sleep(0.2)
    finally:
        await access.close()


def test_the_barriers_request_is_bounded_whole_not_per_attempt(
        cluster: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser21 X9: `barrier --wait 5` ran 10 min 12 s with one node down and the
    controller's entry not committing: each attempt had its own 30 s and the client tried
    again round after round (the waiting lines repeated ~20 times). Here nodes 2 and 3 are
    stopped (SIGSTOP: their sockets still accept), so no barrier can commit; node 1 answers
    (once it no longer leads: a pending proposal is another path). The bound on the whole
    request (barrier_cli.ASK_S, 30 s) is cut to 2 s; the hang bound, 25 s, is under one
    old attempt: the old code cannot pass (seen: still waiting after 100 s)."""
    from epochgc.impl.cluster import barrier_cli

    lc = LocalCluster(cluster)
    pids = [int(lc.meta["pids"][n]) for n in ("2", "3")]
    monkeypatch.setattr(barrier_cli, "ASK_S", 2.0, raising=False)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        asyncio.run(_until_not_controller_leader(lc, 1))

        async def run() -> object:
            async with asyncio.timeout(25):
                return await barrier_cli._run(lc, 0.0, barrier_cli.BarrierProgress(
                    time.monotonic()))

        with pytest.raises(click.ClickException) as e:
            asyncio.run(run())
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    said = e.value.message
    assert said.startswith("no controller leader answered barrier within 2 s ("), said
    assert said.endswith("; the barrier may have started (a node was sent it and did not "
                         "answer): `epochgc cluster status --json` shows the controller's "
                         "barrier_candidate"), said
    asyncio.run(_until_led_by(lc, {1, 2, 3}))  # the module's next cases get a whole cluster


def test_the_leader_search_does_not_spend_the_barriers_bound(cluster: Path) -> None:
    """review41c C2: the controller-leader search asked the nodes one at a time (QUICK_S,
    10 s each) from the barrier's whole bound (barrier_cli.ASK_S, 30 s): 7 nodes, 3 frozen
    ordered first, a healthy majority, refused "the barrier was not started" in 30.3 s.
    Shrunk: node 1, asked first, frozen; nodes 2 and 3 lead. The bound given is QUICK_S
    itself, so node 1's status alone spends it in old code (deterministic: it fails
    whatever the load). Now the search asks every node at once, bounded on its own, and
    the bound is the request's once a leader is known."""
    from epochgc.impl.cluster import client

    lc = LocalCluster(cluster)
    pid = int(lc.meta["pids"]["1"])
    os.kill(pid, signal.SIGSTOP)
    try:
        asyncio.run(_until_led_by(lc, {2, 3}))

        async def run() -> dict[str, Any]:
            access = ProcClusterAccess(lc.client_addrs())
            assert access._order(access.via)[0] == 1  # the frozen node is asked first
            try:
                async with asyncio.timeout(BOUND_S):
                    return await access.controller_call(op="barrier",
                                                        within_s=client.QUICK_S)
            finally:
                await access.close()

        r = asyncio.run(run())
    finally:
        os.kill(pid, signal.SIGCONT)
    assert r["status"] == "ok" and int(r["candidate"]) > 0, r
    asyncio.run(_until_led_by(lc, {1, 2, 3}))  # the module's next cases get a whole cluster
