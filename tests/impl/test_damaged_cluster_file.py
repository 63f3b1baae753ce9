"""A damaged DATA_DIR/cluster.json (hand-edited, truncated, overwritten) is refused by every
command that reads it in one line naming the file and what is wrong, exit 65 (bad input
data), never a traceback (newuser10 L7: a missing key was a KeyError traceback from 8 of 8
commands; not JSON / not UTF-8 / a wrong type gave Python's text without the file's name).
No node is started here: each command refuses before it dials one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.local import LocalCluster

# Every command that reads cluster.json (its --data-dir), with the arguments it needs.
COMMANDS: dict[str, list[str]] = {
    "cluster status": ["cluster", "status"],
    "cluster start": ["cluster", "start", "--store", "STORE"],
    "cluster stop": ["cluster", "stop"],
    "cluster kill": ["cluster", "kill", "1"],
    "produce": ["produce", "--partition", "t/0", "--count", "1"],
    "consume": ["consume", "--partition", "t/0"],
    "barrier": ["barrier"],
    "topic create": ["topic", "create", "--partitions", "2", "u"],
    "gc-admin advance-epoch": ["gc-admin", "advance-epoch", "--partition", "t/0"],
}


def _good(tmp_path: Path) -> dict[str, object]:
    lc = LocalCluster(tmp_path / "good")
    lc.init(3, str(tmp_path / "store"), ["t/0", "t/1"], 1.0, [])
    return dict(lc.meta)


# (the file's bytes, what the one line must say about them)
def _damages(tmp_path: Path) -> dict[str, tuple[bytes, str]]:
    good = _good(tmp_path)
    whole = json.dumps(good, indent=1).encode()
    no_client = {k: v for k, v in good.items() if k != "client"}
    return {
        "missing key": (json.dumps(no_client).encode(), "missing field 'client'"),
        "only ids": (b'{"ids": [1,2,3]}', "missing field"),
        "empty object": (b"{}", "missing field 'ids'"),
        "truncated": (whole[:40], "not valid JSON"),
        "empty": (b"", "not valid JSON"),
        "not utf-8": (b"\xf2" + bytes(range(99)), "not UTF-8"),
        "wrong types": (b'{"ids": "x", "pids": 5}', "'ids'"),
        "not an object": (b"[1, 2]", "not a JSON object"),
        "bad port": (json.dumps({**good, "client": {"1": "x"}}).encode(), "'client'"),
    }


@pytest.mark.parametrize("damage", ["missing key", "only ids", "empty object", "truncated",
                                    "empty", "not utf-8", "wrong types", "not an object",
                                    "bad port"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_damaged_cluster_file_is_refused_in_one_line_naming_it(
        tmp_path: Path, command: str, damage: str) -> None:
    data, want = _damages(tmp_path)[damage]
    d = tmp_path / "c"
    d.mkdir()
    (d / "cluster.json").write_bytes(data)
    words = len(command.split())
    args = [a if a != "STORE" else str(tmp_path / "store") for a in COMMANDS[command]]
    r = CliRunner().invoke(main, [*args[:words], "--data-dir", str(d), *args[words:]])
    out = r.output.strip()
    assert r.exit_code == 65, (command, damage, r.exit_code, out[-400:])
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert str(d / "cluster.json") in out and want in out, out
    # `cluster start` over it started nothing and left the file as it was (not overwritten).
    assert (d / "cluster.json").read_bytes() == data
    assert not list(d.glob("n*"))


def test_stop_on_a_damaged_file_stops_the_nodes_it_finds_running(tmp_path: Path) -> None:
    """newuser11 M5: `cluster stop` refused a damaged cluster.json (65, right) and its advice
    ("move the data directory aside and start a new cluster") left the nodes running,
    holding their ports. Now the nodes running on DATA_DIR are found by their command lines
    (as `is_node` checks a pid), stopped and named; the damage is still refused, 65. A real
    1-node cluster. Old code: the node's pid alive after the stop."""
    import os
    import subprocess
    import sys

    from epochgc.impl.cluster.local import nodes_on

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    d = tmp_path / "c"
    subprocess.run([sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir", str(d),
                    "--store", str(tmp_path / "store"), "--nodes", "1", "--partitions", "t/0"],
                   env=env, check=True, capture_output=True, timeout=300)
    pid = json.loads((d / "cluster.json").read_text())["pids"]["1"]
    try:
        assert nodes_on(d) == {1: pid}
        assert nodes_on(tmp_path) == {}  # another directory's nodes are not its
        damaged = (d / "cluster.json").read_bytes()[:50]
        (d / "cluster.json").write_bytes(damaged)
        r = CliRunner().invoke(main, ["cluster", "stop", "--data-dir", str(d)])
        out = r.output.strip()
        assert r.exit_code == 65 and len(out.splitlines()) == 1, out
        assert f"{d / 'cluster.json'}: not valid JSON" in out, out
        assert f"stopped node 1 (pid {pid}), found running on {d} by their command lines" \
            in out, out
        assert nodes_on(d) == {}
        assert (d / "cluster.json").read_bytes() == damaged  # the file is left as it was
        r = CliRunner().invoke(main, ["cluster", "stop", "--data-dir", str(d)])
        assert r.exit_code == 65 and f"no node process runs on {d};" in r.output, r.output
    finally:
        for p in nodes_on(d).values():
            os.kill(p, 9)
