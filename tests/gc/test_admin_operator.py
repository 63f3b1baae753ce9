"""Issue 41 (newuser41 items 12 and 15, what was left): `gc-admin show` flags a lease whose
holder on this host is gone, a second `pause` does not silently replace the first one's
author and reason, a pause reason is bounded, the human `show` says when the last round's
listing counts are partial, `reset --force` says "at least" when journal entries were
unreadable, and `gc --pushgateway` is checked before the round."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.gc.journal import JOURNAL_PREFIX, START
from epochgc.impl.gc.lease import LEASE_KEY
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import AHEAD, NOW, lease_of_a_dead_driver
from tests.gc.test_admin_show import _invoke, _store
from tests.interrupted import by_signal

REPO = Path(__file__).parents[2]


def test_show_flags_a_live_lease_whose_holder_on_this_host_is_gone(tmp_path: Path) -> None:
    """Old code: `lease: held by round r-dead on host vm pid 9797 ... expires in 9m 59s`
    and nothing else, although the pid is on this host and gone."""
    root = _store(tmp_path)
    # A real process takes the lease and exits without releasing it (a driver that died).
    code = ("import sys; from epochgc.impl.gc.lease import Lease; "
            "from epochgc.impl.store.local import LocalStore; "
            f"Lease(lambda: LocalStore({str(root)!r}), 'r-dead').acquire(); "
            "import os; print(os.getpid())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120, check=True)
    pid = int(proc.stdout)
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert (f"holder pid {pid} on this host is not running: the round ended without "
            "releasing it") in out, out
    assert "gc-admin reset --force" in out, out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["lease"]["holder_running"] is False, out


def test_show_and_reset_say_a_dead_round_without_a_journal_deleted_nothing(
        tmp_path: Path) -> None:
    """newuser14 R7: a round killed in Spark's start-up (SIGQUIT) leaves its lease and no
    journal. Old code: `show` said "`gc-admin reset --force` removes the lease and records
    the round"; `reset --force` removed the lease, recorded nothing and said nothing of
    the round. A dead round is recorded from its journal (impl/gc/README.md): there is
    none, so both say it deleted nothing and has no record to write."""
    root = _store(tmp_path)
    lease_of_a_dead_driver(root, "r-dead")
    none = ("before its deletion journal started: nothing was deleted, and there is no "
            "record to write (a dead round is recorded from its journal)")
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    [lease] = [line for line in out.splitlines() if line.startswith("lease: ")]
    assert lease.endswith(f"the round ended without releasing it, {none}; `gc-admin reset "
                          "--force` removes the lease (or wait until it expires)"), lease
    code, out = _invoke("gc-admin", "reset", "--store", str(root), "--force")
    assert (code, out) == (0, f"gc-admin: reset: removed {LEASE_KEY}\ngc-admin: reset: "
                           f"round r-dead, which held it, ended {none}\n"), out
    store = LocalStore(root)
    assert store.head(LEASE_KEY) is None and not list(store.list_all(ROUNDS_PREFIX))
    lease_of_a_dead_driver(root, "r-dead2")
    code, out = _invoke("gc-admin", "reset", "--store", str(root), "--force", "--json")
    assert code == 0 and json.loads(out)["no_journal"] == ["r-dead2"], out


def test_show_promises_a_record_for_a_dead_round_with_a_journal(tmp_path: Path) -> None:
    """The other side of R7: a dead holder whose journal started is recorded by reset."""
    root = _store(tmp_path)
    lease_of_a_dead_driver(root, "r-dead")
    LocalStore(root).put(f"{JOURNAL_PREFIX}r-dead/{START}", b"{}")
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "`gc-admin reset --force` removes the lease and records the round" in out, out
    assert "nothing was deleted" not in out, out


def test_gc_and_reset_say_a_lease_holder_on_this_host_is_gone(tmp_path: Path) -> None:
    """newuser3 N11: with the holder known dead, `gc` said only "another GC round holds
    the store's lease ... expiring in 567s" and `reset` (no --force) "it may still be
    deleting; stop it first": only `show` said the holder was not running."""
    root = _store(tmp_path)
    code = ("from epochgc.impl.gc.lease import Lease; "
            "from epochgc.impl.store.local import LocalStore; "
            f"Lease(lambda: LocalStore({str(root)!r}), 'r-dead').acquire()")
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                   env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120, check=True)
    dead = ("its holder's process on this host is not running: the round ended without "
            "releasing it")
    code_, out = _invoke("gc", "--store", str(root), "-q")
    assert code_ == 1 and "holds the store's lease" in out and dead in out, out
    assert "gc-admin reset --force` removes the lease and records the round" in out, out
    code_, out = _invoke("gc-admin", "reset", "--store", str(root))
    assert code_ == 1 and dead in out and "pass --force" in out, out
    assert "it may still be deleting" not in out, out
    assert LocalStore(root).head(LEASE_KEY) is not None  # refused: nothing removed


def test_show_does_not_flag_a_live_holder(tmp_path: Path) -> None:
    from epochgc.impl.gc.lease import Lease

    root = _store(tmp_path)
    Lease(lambda: LocalStore(root), "r-live").acquire()  # this process: running
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "lease: held by round r-live" in out and "not running" not in out, out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["lease"]["holder_running"] is True, out


def test_show_cannot_tell_for_a_lease_without_the_holders_identity(tmp_path: Path) -> None:
    """A lease written before it named the driver's process identity (or on another
    machine): never called dead from a pid alone (another pid namespace may share the
    host name, and a pid is reused)."""
    root = _store(tmp_path)
    now = time.time()
    LocalStore(root).put(LEASE_KEY, json.dumps({
        "round": "r-old", "host": os.uname().nodename, "pid": 2 ** 22 + 7, "token": "t",
        "renewed_at": now, "expires_at": now + 600}).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "lease: held by round r-old" in out and "not running" not in out, out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["lease"]["holder_running"] is None, out


def test_a_second_pause_keeps_the_first_unless_replaced(tmp_path: Path) -> None:
    """Old code: the second pause silently replaced `paused by newuser (testing)` with
    `paused by root@vm (no reason given)`, exit 0."""
    root = _store(tmp_path)
    assert _invoke("gc-admin", "pause", "--store", str(root), "--by", "newuser",
                   "--reason", "testing")[0] == 0
    code, out = _invoke("gc-admin", "pause", "--store", str(root))
    assert code == 0, out
    assert "already paused by newuser" in out and "testing" in out, out
    assert "--replace" in out, out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    doc = json.loads(out)
    # the --reason given, as `pause --json` gives it (newuser23 F5: the refusal sentence)
    assert doc["paused_by"] == "newuser" and doc["paused_reason"] == "testing", doc
    code, out = _invoke("gc-admin", "pause", "--store", str(root), "--by", "alice",
                        "--reason", "disk swap", "--replace")
    assert code == 0 and "paused by alice (disk swap)" in out, out
    assert "replaces the pause by newuser" in out, out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["paused_by"] == "alice", out


def test_a_pause_reason_is_bounded(tmp_path: Path) -> None:
    """Old code: a 100,000-character --reason was accepted, stored (cut to 2 KiB) and
    echoed whole, exit 0."""
    root = _store(tmp_path)
    code, out = _invoke("gc-admin", "pause", "--store", str(root), "--reason", "x" * 100_000)
    assert code == 64 and "--reason" in out and "500" in out, out[:300]
    assert len(out) < 1000, len(out)
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["paused"] is False  # nothing written
    assert _invoke("gc-admin", "pause", "--store", str(root), "--reason", "y" * 500)[0] == 0
    code, out = _invoke("gc-admin", "pause", "--store", str(root), "--by", "z" * 300)
    assert code == 64 and "--by" in out, out


@pytest.mark.parametrize("by", ["", "  "])
def test_an_empty_pause_author_is_refused(tmp_path: Path, by: str) -> None:
    """newuser14 R5: `pause --by ''` paused "by root@vm" (the default author, put in place
    of the value given, without a word), exit 0. Now a usage error naming --by, nothing
    written; an empty --reason is its default, "no reason given", and stays allowed."""
    root = _store(tmp_path)
    code, out = _invoke("gc-admin", "pause", "--store", str(root), "--by", by)
    assert code == 64 and "error: --by is " in out and "leave --by out" in out, out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["paused"] is False  # nothing written
    code, out = _invoke("gc-admin", "pause", "--store", str(root), "--reason", "")
    assert code == 0 and "(no reason given)" in out, out


def _record(root: Path, **fields: object) -> None:
    doc = {"outcome": "interrupted", "exit_code": 143, "interrupted": "SIGTERM",
           "started_at": time.time() - 60, "seconds": 40.0, "M": 100,
           "counts": {"listed": 12585, "eligible": 12585, "deleted": 14585,
                      "bytes_deleted": 1458500, "errors": 0}, **fields}
    LocalStore(root).put(f"{ROUNDS_PREFIX}r-1.json", json.dumps(doc).encode())


def test_show_says_an_interrupted_rounds_listing_counts_are_partial(tmp_path: Path) -> None:
    """Old code: the human form had no word of `listing_complete` (the record of a round
    stopped mid-listing has listed 12,585 < deleted 14,585)."""
    root = _store(tmp_path)
    _record(root, listing_complete=False)
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "listed 12,585 key(s), eligible 12,585 (partial: the round stopped before its " \
           "listing finished)" in out, out
    _record(root, listing_complete=True)
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "listed 12,585 key(s), eligible 12,585\n" in out and "partial" not in out, out


@pytest.mark.parametrize("where", ["notahost.invalid", "http://:9091", "host:notaport",
                                   "ftp://h:9091"])
def test_a_bad_pushgateway_is_refused_before_the_round(tmp_path: Path, where: str) -> None:
    """Old code (`--pushgateway notahost`): the round ran, then `warning: metrics not
    exported`, exit 0."""
    root = _store(tmp_path)
    # Paused: on the old code the round is refused without Spark, then pushes (and warns).
    assert _invoke("gc-admin", "pause", "--store", str(root))[0] == 0
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q",
                        "--pushgateway", where)
    assert code == 64 and "--pushgateway" in out and where in out, out
    assert not list((root / "_cluster" / "gc").glob("rounds/*")), "a round ran"


@contextlib.contextmanager
def _refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound and held (no one else takes it) but
    not listening, so a connect is answered RST (ECONNREFUSED) at once."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def test_a_pushgateway_that_cannot_be_connected_to_is_said_before_the_round_which_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser18 U6. Old code: the round ran (3,124 deleted), then `warning: metrics not
    exported: <urlopen error [Errno 111] Connection refused>`, exit 0, nothing said before.
    review41a R4: a refusal (64) stopped GC whenever the gateway was down a moment; the
    metrics are not what the round's safety needs: said before it, the round runs (here,
    paused: 3, its record written), and the push after it warns again."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    root = _store(tmp_path)
    assert _invoke("gc-admin", "pause", "--store", str(root))[0] == 0
    with _refusing_port() as port:
        where = f"127.0.0.1:{port}"
        code, out = _invoke("gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q",
                            "--pushgateway", where)
    assert code == 3, out
    before = (f"epochgc gc: warning: --pushgateway {where}: cannot connect to 127.0.0.1 port "
              f"{port}: Connection refused; the round runs")
    after = f"epochgc gc: warning: metrics not pushed to --pushgateway {where}: "
    assert before in out and after in out and out.index(before) < out.index(after), out
    assert list((root / "_cluster" / "gc").glob("rounds/*")), "no round ran"


def test_a_pushgateway_reached_through_a_proxy_is_not_connected_to_directly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """review41a R4: behind an HTTP proxy (prometheus_client pushes with urllib, which
    obeys http_proxy / no_proxy) the gateway need not be reachable, nor its name
    resolvable, from this machine: the check says nothing; without the proxy it is said."""
    from epochgc.impl.preflight import pushgateway_address, pushgateway_unreachable

    with _refusing_port() as port:
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:3128")
        monkeypatch.setenv("no_proxy", "")
        assert pushgateway_unreachable(f"127.0.0.1:{port}") is None
        assert pushgateway_address("gateway.internal.invalid:9091") == \
            "gateway.internal.invalid:9091"
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert "Connection refused" in (pushgateway_unreachable(f"127.0.0.1:{port}") or "")


def test_a_push_that_fails_after_the_round_names_the_gateway_and_the_reason(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The gateway gone between the check and the push: the warning names it and says why
    in words. Old code: `metrics not exported: <urlopen error [Errno 111] Connection
    refused>` (the URLError's repr, no target)."""
    from epochgc.impl.gc.cli import _export
    from epochgc.impl.gc.summary import GcSummary

    with _refusing_port() as port:
        _export(GcSummary(), None, f"127.0.0.1:{port}")
    err = capsys.readouterr().err
    assert err == (f"epochgc gc: warning: metrics not pushed to --pushgateway 127.0.0.1:{port}: "
                   "Connection refused\n"), err


def test_reset_of_a_damaged_journal_says_at_least(tmp_path: Path) -> None:
    """Old code: `recorded dead round ...: killed, 4 key(s) deleted` while 6 keys had left
    the store (one intent torn in half): the count is a lower bound and `show` said so,
    `reset` did not."""
    from epochgc.impl.gc.journal import START, journal_prefix, write_marker
    from epochgc.impl.gc.record import new_round_id
    from epochgc.model.keys import format_key
    from tests.gc.helpers import put_local

    root = _store(tmp_path)
    store = LocalStore(root)
    rid = new_round_id(time.time() - 100)
    prefix = journal_prefix(rid)
    write_marker(store, prefix, START, {"round": rid})
    for seq, name in enumerate(("a", "b")):
        keys = [format_key(seq + 1, 5, f"{name}{i}") for i in range(4)]
        for k in keys:
            put_local(root, k, age=10**5, now=time.time())
        base = f"{prefix}p0000-s0-a0-t1/{seq:08d}"
        store.put(f"{base}.intent.json", json.dumps(
            {"keys": keys, "sizes": [1] * 4, "ages": [1.0] * 4}).encode())
        store.delete_batch(keys)
        store.put(f"{base}.done.json", b'{"gone": [], "changed": [], "errors": {}}')
    intent = f"{prefix}p0000-s0-a0-t1/00000001.intent.json"
    raw = store.get(intent)
    store.put(intent, raw[: raw.index(b"b2") + 1])  # torn: names b0, b1 only
    code, out = _invoke("gc-admin", "reset", "--store", str(root), "--force")
    assert code == 0, out
    # b0, b1: named by the torn intent, found gone, no answer readable for them (review
    # rev38v finding 3): apart from deleted.
    assert f"recorded dead round {rid}: driver-gone, at least 4 key(s) deleted, 2 more left " \
           "the store in batches with no answer saying the round deleted them (its requests' or " \
           "another writer's) (1 journal entr(ies) unreadable)" in out, out


def _gc_proc(root: Path, *args: str, merged: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now", str(NOW),
         *AHEAD, *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_json_is_the_only_output_where_stdout_and_stderr_are_one_stream(
        tmp_path: Path) -> None:
    """newuser41 item 13: under spark-submit (whose PythonRunner merges the driver's stderr
    into its stdout, as `stderr=STDOUT` does here) `--json` printed the `gc: ...` lines
    first, and stdout was not one JSON object. Old code: `json.loads` failed on
    `gc: GC is paused on this store ...` before the object."""
    root = _store(tmp_path)
    assert _invoke("gc-admin", "pause", "--store", str(root), "--reason", "r")[0] == 0
    p = _gc_proc(root, "--json", merged=True)
    assert p.returncode == 3, p.stdout
    assert json.loads(p.stdout)["outcome"] == "paused", p.stdout  # the whole stream
    # Two streams: the lines still go to stderr, the object alone to stdout.
    p = _gc_proc(root, "--json", merged=False)
    assert p.returncode == 3 and json.loads(p.stdout)["outcome"] == "paused", p.stdout
    assert "gc: GC is paused on this store" in (p.stderr or ""), p.stderr


def test_an_interrupted_reset_says_it_removed_the_lease(tmp_path: Path) -> None:
    """newuser3 N11: `gc-admin reset --force` stopped by SIGINT after it had removed the
    lease said only "gc-admin: interrupted by SIGINT"."""
    from epochgc.impl.gc.lease import Lease
    from epochgc.impl.signals import HOOK_ENV

    root = _store(tmp_path)
    Lease(lambda: LocalStore(root), "r-held").acquire()  # held by this (running) process
    p = subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "reset", "--store",
                        str(root), "--force", "--even-if-running"], capture_output=True,
                       text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(REPO),
                                **{HOOK_ENV: "reset-removed:SIGINT"}))
    assert p.returncode == by_signal(signal.SIGINT), p.stderr
    assert LocalStore(root).head(LEASE_KEY) is None
    assert f"gc-admin: reset: removed {LEASE_KEY} before it was stopped" in p.stderr, p.stderr


_HOSTILE_REASON = "x\x1b]0;t\x07\r\nfake line"
_HOSTILE_BY = "a\tb"


def _raw_controls(text: str) -> list[str]:
    """Control characters in `text` other than the line ends the command wrote."""
    return [hex(ord(c)) for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7f]


def test_a_pause_reason_and_author_are_escaped_on_every_line(tmp_path: Path) -> None:
    """newuser9 K6. Old code: `pause`'s echo and gc's refusal (and a dry run's note) wrote
    the reason and `--by` raw: OSC `ESC ] 0;t BEL` set the terminal's title, CR/LF forged a
    `fake line`, TAB came through; `show` escaped them (`a\\x09b`). Now every line escapes
    them as `show` does (`printable`); the store keeps them as given."""
    root = _store(tmp_path)
    code, out = _invoke("gc-admin", "pause", "--store", str(root), "--by", _HOSTILE_BY,
                        "--reason", _HOSTILE_REASON)
    assert code == 0, out
    assert _raw_controls(out) == [], repr(out)
    assert "paused by a\\x09b (x\\x1b]0;t\\x07\\x0d\\x0afake line)" in out, repr(out)
    code, out = _invoke("gc-admin", "pause", "--store", str(root))  # already paused
    assert code == 0 and _raw_controls(out) == [], repr(out)
    # The dry run runs on a paused store and ends blocked here (no epoch reported): 2.
    for args, exit_code in ((), 3), (("--dry-run",), 2):
        p = _gc_proc(root, "--max-report-age", "30d", *args, merged=False)
        assert p.returncode == exit_code, p.stdout + p.stderr
        assert _raw_controls(p.stdout + p.stderr) == [], repr(p.stdout + p.stderr)
        assert "by a\\x09b: x\\x1b]0;t\\x07\\x0d\\x0afake line" in p.stdout + p.stderr, \
            repr(p.stdout + p.stderr)
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["paused_by"] == _HOSTILE_BY, out  # kept as given
