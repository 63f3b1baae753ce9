"""newuser18 U1: a store belongs to one cluster. `cluster start --data-dir c3 --store S`
succeeded while cluster c2 ran on S; both wrote S's `_cluster/` and GC computed M from c2's
reports and deleted c3's acknowledged, unreconciled object (50 records lost). Now the first
start names its cluster in the store (`_cluster/cluster-id.json`, a conditional create), a
start of another cluster on it is refused (64) before anything starts, and a local store
in, around or equal to a data directory is refused (64)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.owner import OWNER_KEY, Owner, claim, owner_for, read_owner
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.proctree import _stat
from epochgc.impl.signals import HOOK_ENV
from epochgc.impl.store.local import LocalStore

ROOT = Path(__file__).resolve().parents[2]
ONE_NODE = ("--nodes", "1", "--partitions", "t/0")


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def store_id(store: Path) -> str:
    return str(json.loads((store / OWNER_KEY).read_text())["cluster_id"])


def file_id(data: Path) -> str | None:
    got = json.loads((data / "cluster.json").read_text()).get("cluster_id")
    return None if got is None else str(got)


def test_a_second_cluster_on_a_store_is_refused_and_its_own_restart_passes(
        tmp_path: Path) -> None:
    c2, c3, store = tmp_path / "c2", tmp_path / "c3", tmp_path / "store"
    r = cli("cluster", "start", "--data-dir", str(c2), "--store", str(store), *ONE_NODE)
    assert r.exit_code == 0, r.output
    try:
        cid = store_id(store)
        assert file_id(c2) == cid and len(cid) == 32, cid
        r = cli("cluster", "start", "--data-dir", str(c3), "--store", str(store), *ONE_NODE)
        # Main: exit 0, "cluster ready" (c3's nodes on c2's store).
        assert r.exit_code == ExitCode.USAGE, r.output
        line = r.output.strip()
        assert "\n" not in line and "belongs to another cluster" in line, line
        assert str(store) in line and str(c2) in line and str(c3) in line, line
        assert "node 1: pid" not in r.output and not c3.exists()  # nothing started or left
        assert store_id(store) == cid
        # The same cluster's restart passes (its nodes run: nothing to start).
        r = cli("cluster", "start", "--data-dir", str(c2), "--store", str(store), *ONE_NODE)
        assert r.exit_code == 0 and "cluster ready" in r.output, r.output

        # A cluster made before stores named their cluster (no id in cluster.json, none in
        # the store) keeps working: its next start adopts the store.
        meta = json.loads((c2 / "cluster.json").read_text())
        del meta["cluster_id"]
        (c2 / "cluster.json").write_text(json.dumps(meta))
        (store / OWNER_KEY).unlink()
        r = cli("cluster", "start", "--data-dir", str(c2), "--store", str(store), *ONE_NODE)
        assert r.exit_code == 0, r.output
        adopted = file_id(c2)
        assert adopted is not None and adopted != cid and store_id(store) == adopted

        # ... but an old data directory (no id) on a store another cluster owns is refused.
        old = tmp_path / "old"
        old.mkdir()
        (old / "cluster.json").write_text(json.dumps(meta))
        r = cli("cluster", "start", "--data-dir", str(old), "--store", str(store), *ONE_NODE)
        assert r.exit_code == ExitCode.USAGE, r.output
        assert "made before stores named their cluster" in r.output, r.output
        assert file_id(old) is None  # nothing written
    finally:
        cli("cluster", "stop", "--data-dir", str(c2))


@pytest.mark.parametrize("data, store, said", [
    ("c5", "c5", "is the data directory itself"),
    ("c6", "c6/n1", "is inside the data directory"),
    ("c7/d", "c7", "contains the data directory"),
    ("c8", "other/n1", "another cluster's data directory"),
    ("owned/d", "s8", "a cluster's store"),
])
def test_a_local_store_in_around_or_equal_to_a_data_directory_is_refused(
        tmp_path: Path, data: str, store: str, said: str) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other/cluster.json").write_text("{}")  # another cluster's data directory
    (tmp_path / "owned/_cluster").mkdir(parents=True)
    (tmp_path / "owned" / OWNER_KEY).write_text("{}")  # another cluster's store
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    r = cli("cluster", "start", "--data-dir", str(tmp_path / data), "--store",
            str(tmp_path / store), *ONE_NODE)
    try:
        assert r.exit_code == ExitCode.USAGE, r.output
        assert said in r.output and r.output.count("\n") == 1, r.output
        assert "node 1: pid" not in r.output
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    finally:
        if r.exit_code == 0:  # the old code started it: stop it
            cli("cluster", "stop", "--data-dir", str(tmp_path / data))


def test_two_claims_racing_on_a_new_store_exactly_one_wins(tmp_path: Path) -> None:
    """Both have looked and found no owner; each then creates: one wins, the other is
    answered with the winner (a hard link on a local store: link(2) fails if the name
    exists)."""
    store = LocalStore(tmp_path / "s", create=True)
    gate = threading.Barrier(2)
    got: dict[str, Owner | None] = {}

    def start(name: str) -> None:
        assert read_owner(store) is None
        gate.wait(timeout=60)
        got[name] = claim(store, owner_for(name * 32, f"/d/{name}"))

    ts = [threading.Thread(target=start, args=(n,)) for n in "ab"]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    winner = read_owner(store)
    assert winner is not None
    losers = [n for n, found in got.items() if found is not None]
    assert len(got) == 2 and len(losers) == 1, got
    assert got[losers[0]] == winner and winner.cluster_id != losers[0] * 32


@pytest.mark.skipif(os.environ.get("EPOCHGC_SIGNALS") != "full",
                    reason="EPOCHGC_SIGNALS=full (tox -e signals): two starts, ~7 s; the "
                    "claim race itself runs in CI above")
def test_two_starts_racing_on_a_new_store_one_is_refused(tmp_path: Path) -> None:
    """`cluster start` end to end: the first start stops itself (SIGSTOP, the signal hook)
    at `claim`, after finding the store names no cluster; the second starts meanwhile and
    wins; the first, continued, must be refused (64) and leave no cluster file."""
    store = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def args(d: str) -> list[str]:
        return [sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir",
                str(tmp_path / d), "--store", store, *ONE_NODE]

    first = subprocess.Popen(args("a"), env={**env, HOOK_ENV: "claim:SIGSTOP"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while (st := _stat(first.pid)) is None or st[1] != "T":
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first start never reached its claim"
            time.sleep(0.05)
        second = subprocess.run(args("b"), env=env, capture_output=True, text=True,
                                timeout=300)
        os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
        cli("cluster", "stop", "--data-dir", str(tmp_path / "b"))
        cli("cluster", "stop", "--data-dir", str(tmp_path / "a"))
    assert second.returncode == 0, second.stderr
    assert first.returncode == ExitCode.USAGE, err
    assert "belongs to another cluster" in err and str(tmp_path / "b") in err, err
    assert "node 1: pid" not in out and not (tmp_path / "a/cluster.json").exists()
    assert store_id(Path(store)) == file_id(tmp_path / "b")


@pytest.mark.s3
def test_the_claim_on_s3_is_a_conditional_create(moto_endpoint: str) -> None:
    """S3: `PutObject If-None-Match: *` (moto server): a second claim does not overwrite
    the first; it is answered with the owner."""
    from epochgc.impl.store.s3 import S3Store
    from tests.store.s3server import new_bucket

    store = S3Store(new_bucket(moto_endpoint), "p", endpoint_url=moto_endpoint)
    try:
        store.require_conditional_writes()
        a, b = owner_for("a" * 32, "/d/a"), owner_for("b" * 32, "/d/b")
        assert read_owner(store) is None
        assert claim(store, a) is None
        assert claim(store, b) == a and read_owner(store) == a
        # A cluster's data is found by a one-key listing (review41a R1), the owner is not.
        from epochgc.impl.cluster.storeclaim import held_data

        assert held_data(store) is None
        store.put(OLD_DATA[2], b"x")
        assert held_data(store) == OLD_DATA[2]
    finally:
        store.close()


def test_chaos_on_a_store_that_names_a_cluster_is_refused(tmp_path: Path) -> None:
    """`epochgc chaos --store DIR` runs a new cluster and GC on DIR: on a live cluster's
    store its rounds would delete that cluster's data by the run's epochs. Refused (64)
    before the run begins (old code: the run started on it)."""
    store = LocalStore(tmp_path / "s", create=True)
    owner = owner_for("c" * 32, str(tmp_path / "c2"))
    assert claim(store, owner) is None
    r = cli("chaos", "--seconds", "10", "--gc-engine", "model", "--quiet", "--store",
            str(tmp_path / "s"), "--out", str(tmp_path / "out"))
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "belongs to another cluster" in r.output and str(tmp_path / "c2") in r.output
    assert not (tmp_path / "out").exists(), "the run began"
    assert read_owner(store) == owner


def test_chaos_names_its_cluster_in_the_store_it_is_given(tmp_path: Path) -> None:
    """The run's own cluster takes a store that names none, so a `cluster start` (or a
    second run) on it later is refused: a second claim, as a second run makes, finds the
    first and leaves it."""
    from epochgc.impl.cluster.storeclaim import claim_for_new_cluster
    from epochgc.impl.preflight import Refused
    from epochgc.impl.store.url import parse_store_url

    spec = parse_store_url(str(tmp_path / "s"))
    (tmp_path / "s").mkdir()
    claim_for_new_cluster(spec, "run one", print)
    first = read_owner(LocalStore(tmp_path / "s"))
    assert first is not None and first.data_dir == "run one"
    with pytest.raises(Refused, match="belongs to another cluster") as e:
        claim_for_new_cluster(spec, "run two", print)
    assert e.value.exit_code == ExitCode.USAGE
    assert read_owner(LocalStore(tmp_path / "s")) == first


@pytest.mark.parametrize("body, said", [
    (b"not json", "not a JSON document"),
    (b'{"cluster_id": "xyz", "data_dir": "/d", "host": "h", "created_at": 1}',
     "not 32 hexadecimal digits"),
])
def test_a_damaged_owner_document_is_refused_naming_it(
        tmp_path: Path, body: bytes, said: str) -> None:
    """Never taken for "no owner" (the start would then write over what named the store's
    cluster): bad input data (65), one line naming the key, nothing started or written."""
    (tmp_path / "s/_cluster").mkdir(parents=True)
    (tmp_path / "s" / OWNER_KEY).write_bytes(body)
    r = cli("cluster", "start", "--data-dir", str(tmp_path / "c"), "--store",
            str(tmp_path / "s"), *ONE_NODE)
    assert r.exit_code == ExitCode.DATAERR, r.output
    assert OWNER_KEY in r.output and said in r.output and r.output.count("\n") == 1, r.output
    assert not (tmp_path / "c").exists() and (tmp_path / "s" / OWNER_KEY).read_bytes() == body


def test_a_link_at_the_owner_key_is_damaged_not_absent(tmp_path: Path) -> None:
    """A local link there reads as no object (`head`); the claim then failed on the name,
    exit 1 after five tries, and left the new cluster's file (found writing this report)."""
    (tmp_path / "s/_cluster").mkdir(parents=True)
    (tmp_path / "s" / OWNER_KEY).symlink_to(tmp_path / "elsewhere.json")
    r = cli("cluster", "start", "--data-dir", str(tmp_path / "c"), "--store",
            str(tmp_path / "s"), *ONE_NODE)
    assert r.exit_code == ExitCode.DATAERR and "not an object" in r.output, r.output
    assert not (tmp_path / "c").exists()


def test_a_cluster_file_with_a_bad_cluster_id_is_damaged(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    meta = {"ids": [1], "raft": {"1": 1}, "client": {"1": 2}, "metrics": {"1": 3},
            "store": str(tmp_path / "s"), "partitions": ["t/0"], "mint_interval": 3.0,
            "extra": [], "pids": {}, "cluster_id": "not-an-id"}
    (tmp_path / "c/cluster.json").write_text(json.dumps(meta))
    r = cli("cluster", "start", "--data-dir", str(tmp_path / "c"), "--store",
            str(tmp_path / "s"), *ONE_NODE)
    assert r.exit_code == ExitCode.DATAERR and "'cluster_id'" in r.output, r.output


# review41a R1: a store that names no owner but holds a cluster's data is a cluster's made
# before stores named their cluster (every live cluster at the upgrade): only that cluster's
# own data directory (cluster.json, no id) adopts it; a new one, and chaos, are refused.
OLD_DATA = [
    "_cluster/partitions.json",
    "_cluster/health/n1.json",
    "level_zero/data/863/000000000000000002/121212dea30c4c73aedbd1f1a7af994b",
    "level_one/t/000000/00000000000000000000-00000000000000000009-t1",
]


def _old_store(root: Path, key: str) -> Path:
    store = root / "s"
    (store / key).parent.mkdir(parents=True)
    (store / key).write_bytes(b"{}")
    return store


@pytest.mark.parametrize("key", OLD_DATA)
def test_a_new_cluster_on_an_unnamed_store_holding_data_is_refused(
        tmp_path: Path, key: str) -> None:
    store = _old_store(tmp_path, key)

    def files() -> list[Path]:  # the preflight's probe leaves its empty directory (s29b)
        return sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if not p.is_dir())

    before = files()
    r = cli("cluster", "start", "--data-dir", str(tmp_path / "b"), "--store", str(store),
            *ONE_NODE)
    try:
        # Main: exit 0, "cluster ready": b claimed the older cluster's store.
        assert r.exit_code == ExitCode.USAGE, r.output
        assert r.output.count("\n") == 1 and key in r.output, r.output
        assert "holds a cluster's data" in r.output and "operations.md" in r.output, r.output
        assert files() == before and not (tmp_path / "b").exists()
    finally:
        if r.exit_code == 0:
            cli("cluster", "stop", "--data-dir", str(tmp_path / "b"))


def test_chaos_on_an_unnamed_store_holding_data_is_refused(tmp_path: Path) -> None:
    store = _old_store(tmp_path, OLD_DATA[2])
    r = cli("chaos", "--seconds", "10", "--gc-engine", "model", "--quiet", "--store",
            str(store), "--out", str(tmp_path / "out"))
    assert r.exit_code == ExitCode.USAGE, r.output  # main: the run began on it
    assert "holds a cluster's data" in r.output and OLD_DATA[2] in r.output, r.output
    assert not (tmp_path / "out").exists() and not (store / OWNER_KEY).exists()


def test_chaos_accepts_its_own_claim_found_after_a_lost_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """review41a R2: the create is applied but its answer is lost; botocore's retry of the
    same request is answered 412 (exists): `create_if_absent` says None and the read finds
    this run's own document. Main refused it as another cluster's (64) and left the store
    named by a run that never ran."""
    from epochgc.impl.cluster.storeclaim import claim_for_new_cluster
    from epochgc.impl.store.url import parse_store_url

    real = LocalStore.create_if_absent

    def answer_lost(self: LocalStore, key: str, data: bytes) -> str | None:
        real(self, key, data)  # applied; its answer never arrives
        return real(self, key, data)  # the retry: exists (None)

    monkeypatch.setattr(LocalStore, "create_if_absent", answer_lost)
    (tmp_path / "s").mkdir()
    claim_for_new_cluster(parse_store_url(str(tmp_path / "s")), "run one", print)
    got = read_owner(LocalStore(tmp_path / "s"))
    assert got is not None and got.data_dir == "run one"


def test_a_cluster_made_with_the_store_inside_its_data_directory_restarts(
        tmp_path: Path) -> None:
    """review41a R3: the old README made `--data-dir run --store run/store`; main refused
    its restart (store inside the data directory) and any other --store (a changed option):
    no command started it again. An existing cluster restarts, with one warning line; the
    refusal stays for new clusters (test above). It also adopts its store, which names no
    cluster (R1: its own data directory may)."""
    from epochgc.impl.cluster.local import LocalCluster

    run = tmp_path / "run"
    store = run / "store"
    lc = LocalCluster(str(run))  # what the old start wrote: no cluster_id
    lc.init(1, str(store), ["t/0"], 3.0, [])
    lc.meta["s3_endpoint"] = None
    lc.save()
    (store / "_cluster/health").mkdir(parents=True)
    (store / "_cluster/health/n9.json").write_text("{}")  # data from its earlier life
    r = cli("cluster", "start", "--data-dir", str(run), "--store", str(store), *ONE_NODE)
    try:
        assert r.exit_code == 0 and "cluster ready" in r.output, r.output
        warned = [ln for ln in r.output.splitlines() if "inside the data directory" in ln]
        assert len(warned) == 1 and "warning" in warned[0], r.output
        assert file_id(run) is not None and store_id(store) == file_id(run)
    finally:
        cli("cluster", "stop", "--data-dir", str(run))


def test_a_store_made_in_this_data_directory_before_it_was_replaced_says_so(
        tmp_path: Path) -> None:
    """newuser20 W5: after `rm -rf c8`, `cluster start --data-dir c8` on c8's old store said
    "is cluster X's (data directory /p/c8), not the one under /p/c8": a contradiction to the
    reader. It says the store was made in this data directory, which no longer holds it, and
    where the way out is written."""
    data, store = tmp_path / "c8", tmp_path / "s8"
    store.mkdir()
    assert claim(LocalStore(store), owner_for("a" * 32, str(data))) is None
    r = cli("cluster", "start", "--data-dir", str(data), "--store", str(store), *ONE_NODE)
    assert r.exit_code == ExitCode.USAGE, r.output
    line = r.output.strip()
    assert f"made in this data directory ({data}), which no longer holds it" in line, line
    assert "not the one under" not in line and "docs/operations.md" in line, line
    assert not data.exists() or not (data / "cluster.json").exists()
