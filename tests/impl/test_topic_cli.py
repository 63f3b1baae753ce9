"""`epochgc topic create|delete` on a real 3-process cluster (issue 13, SPEC R32-R35): bad
input refused with a clear error and nothing changed; a deleted topic's groups leave every
node (memory and disk); a write to it is refused naming the partition; its stranded L0
objects are collected by GC rounds over the store while an object that also feeds a live
partition stays until that partition no longer needs it; re-creation is a new incarnation."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.client import ProcClusterAccess
from epochgc.impl.cluster.demo_checks import in_use_keys
from epochgc.impl.cluster.gcround import gc_round
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import DATA_PREFIX


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def meta(lc: LocalCluster) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        access = ProcClusterAccess(lc.client_addrs())
        try:
            return await access.controller_call(op="meta")
        finally:
            await access.close()

    return asyncio.run(go())


def in_use(lc: LocalCluster) -> set[str]:
    async def go() -> set[str]:
        access = ProcClusterAccess(lc.client_addrs())
        try:
            per = await in_use_keys(access, lc.ids)
        finally:
            await access.close()
        return set().union(*per.values()) if per else set()

    return asyncio.run(go())


def controller_table(lc: LocalCluster) -> tuple[Any, ...]:
    """What a create or delete changes, once every node agrees on it: the live partitions
    with their creation revisions and the deleted incarnations. The revision alone is no
    witness: the periodic mint advances it every `--mint-interval`."""
    def agreed() -> tuple[Any, ...] | None:
        async def go() -> set[str]:
            access = ProcClusterAccess(lc.client_addrs())
            try:
                out = set()
                for n in lc.ids:
                    st = (await access.call(n, op="status"))["data"]
                    live = {p: d["creation_revision"] for p, d in st["partitions"].items()}
                    out.add(json.dumps([live, st["controller"]["deleted"]], sort_keys=True))
                return out
            finally:
                await access.close()
        tables = asyncio.run(go())
        return tuple(json.loads(tables.pop())) if len(tables) == 1 else None
    return wait_for(agreed)


def wait_for(pred: Any, timeout: float = 300.0) -> Any:
    """`pred()` once truthy; `timeout` is a bound for a hang, not a timing assumption (30 s
    was one: a loaded machine's cluster may take longer)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise TimeoutError("condition not reached")


def produced(r: Any) -> dict[str, dict[str, Any]]:
    assert r.exit_code == 0, r.output
    return {d["partition"]: d for d in map(json.loads, r.stdout.splitlines())}


@pytest.mark.slow
def test_topic_delete_recreate_bad_input_and_stranded_gc(tmp_path: Path) -> None:
    data, store_dir = str(tmp_path / "c"), tmp_path / "store"
    r = cli("cluster", "start", "--data-dir", data, "--store", str(store_dir),
            "--partitions", "t/0", "--mint-interval", "0.5")
    assert r.exit_code == 0, r.output
    lc = LocalCluster(data)
    store = LocalStore(store_dir)
    try:
        r = cli("topic", "create", "u", "--partitions", "2", "--data-dir", data)
        assert r.exit_code == 0, r.output
        created = {d["partition"]: d["creation_revision"]
                   for d in map(json.loads, r.stdout.splitlines())}
        assert sorted(created) == ["u/0", "u/1"]
        wait_for(lambda: all((meta(lc)["partitions"].get(p) or {}).get("leader")
                             for p in created))

        # Bad input: a clear error naming what, exit non-zero, nothing changed (the table;
        # the revision moves on with every mint, so comparing it raced them: CI, session 6).
        before = controller_table(lc)
        assert sorted(before[0]) == ["t/0", "u/0", "u/1"]
        for args, says in [
            (("create", "u", "--partitions", "3"), "topic 'u' already exists"),
            (("delete", "nope"), "unknown topic 'nope'"),
            (("create", "9lives", "--partitions", "1"), "invalid topic name '9lives'"),
            (("create", "a/b", "--partitions", "1"), "invalid topic name 'a/b'"),
            (("delete", "has space"), "invalid topic name 'has space'"),
            (("create", "v", "--partitions", "0"), "0 is not in the range"),
        ]:
            r = cli("topic", *args, "--data-dir", data)
            assert r.exit_code != 0 and says in r.output, (args, r.output)
        assert controller_table(lc) == before
        assert sorted(meta(lc)["partitions"]) == ["t/0", "u/0", "u/1"]

        shared = produced(cli("produce", "--data-dir", data, "--partition", "t/0",
                              "--partition", "u/0", "--count", "3"))
        only_u = produced(cli("produce", "--data-dir", data, "--partition", "u/1"))
        shared_key, stranded_key = shared["t/0"]["key"], only_u["u/1"]["key"]
        groups = {p: 1000 + rev_ for p, rev_ in created.items()}

        r = cli("topic", "delete", "u", "--data-dir", data)
        assert r.exit_code == 0, r.output
        deleted = {d["partition"]: d["deletion_revision"]
                   for d in map(json.loads, r.stdout.splitlines())}
        assert sorted(deleted) == ["u/0", "u/1"] and min(deleted.values()) > max(created.values())

        # Every node stops and removes the groups: memory (status) and disk (the log dirs).
        def gone() -> bool:
            for n in lc.ids:
                for g in groups.values():
                    if (lc.dir / f"n{n}" / f"g{g}").exists():
                        return False
                    if not (lc.dir / f"n{n}" / "removed" / f"g{g}").exists():
                        return False
            return not any(p.startswith("u/") for p in meta(lc)["partitions"])
        wait_for(gone)

        # A write to a deleted partition: refused, naming it; nothing uploaded or acked.
        before = {i.key for i in store.list_all(DATA_PREFIX)}
        r = cli("produce", "--data-dir", data, "--partition", "u/0")
        assert r.exit_code != 0 and "partition deleted: 'u/0'" in r.output, r.output
        assert {i.key for i in store.list_all(DATA_PREFIX)} == before
        r = cli("consume", "--data-dir", data, "--partition", "u/0")
        # The deletion's revision, the one `topic delete` printed (newuser18's notes: the
        # controller's current revision was said).
        assert r.exit_code != 0 and f"partition 'u/0' was deleted at controller revision " \
            f"{deleted['u/0']}: nothing to read" in r.output, r.output
        r = cli("topic", "delete", "u", "--data-dir", data)  # twice: unknown now
        assert r.exit_code != 0 and "unknown topic 'u' (deleted at revision" in r.output

        # GC rounds over the store: the stranded object goes once M passes its epoch; the
        # shared one never while t/0 still references it (checked on every round).
        deleted_keys: set[str] = set()

        def collected() -> bool:
            referenced = in_use(lc)
            res = gc_round(store, time.time(), grace_s=0.0, max_report_age_s=30.0)
            deleted_keys.update(res.deleted)
            assert not (deleted_keys & referenced), "GC deleted an object in use"
            return stranded_key in deleted_keys and shared_key in deleted_keys
        wait_for(collected)

        r = cli("consume", "--data-dir", data, "--partition", "t/0", "--verify")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["acked_checked"] == 3

        # Re-creation: a new incarnation, above the deletion's revision, starting empty; the
        # old incarnation's acknowledged runs are not expected in it.
        r = cli("topic", "create", "u", "--partitions", "1", "--data-dir", data)
        assert r.exit_code == 0, r.output
        crev = json.loads(r.stdout)["creation_revision"]
        assert crev > max(deleted.values())
        wait_for(lambda: (meta(lc)["partitions"].get("u/0") or {}).get("leader"))
        new = produced(cli("produce", "--data-dir", data, "--partition", "u/0", "--count", "2"))
        assert new["u/0"]["base"] == 0 and new["u/0"]["epoch"] >= crev
        r = cli("consume", "--data-dir", data, "--partition", "u/0", "--verify")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout) == {"partition": "u/0", "records": 2, "acked_checked": 2}
        # a restart waits only for partitions that still exist
        lc.kill(1)
        r = cli("cluster", "start", "--data-dir", data, "--store", str(store_dir))
        assert r.exit_code == 0, r.output
    finally:
        cli("cluster", "stop", "--data-dir", data)


def test_meta_names_each_deleted_partitions_deletion_revision(tmp_path: Path) -> None:
    """What `consume` of a deleted partition says comes from `meta`. Old code: only the
    names, so `consume` said the controller's current revision (620) where `topic delete`
    had printed `deletion_revision` 615. On the simulated cluster, the revision moved on
    after the deletion (an epoch minted)."""
    from epochgc.impl.cluster.rpc import handle
    from epochgc.impl.sim.cluster import SimCluster

    c = SimCluster(seed=3, partitions=("t/0", "u/0"), store=LocalStore(tmp_path, create=True))
    try:
        c.bootstrap()
        first = c.delete_partition("u/0")
        c.create_partition("u/0")
        again = c.delete_partition("u/0")  # the latest deletion of the name is said
        c.mint()
        m = c.wait(handle(c.brokers[1], {"op": "meta"}))
        assert first < again < m["revision"], (first, again, m["revision"])
        assert m["deleted"] == ["u/0"] and m["deletions"] == {"u/0": again}, m
    finally:
        c.close()
