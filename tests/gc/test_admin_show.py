"""Issue 41 item 7: `gc-admin show` for people (ISO times, durations, no Python reprs, no
`M: None`) and `--json`; `--max-report-age 5m` as `epochgc gc` takes it; a pause names the
operator, not the pid of the short-lived gc-admin process; bad arguments exit 64."""

from __future__ import annotations

import getpass
import json
import os
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.lease import Lease
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import AHEAD, NOW, simple_cluster, write_partitions

_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())
    return root


def test_show_prints_times_and_durations_not_reprs(tmp_path: Path) -> None:
    """Old code: `lease: live, held by {'round': 'r-live', 'host': ..., 'expires_at':
    1796...}` (a Python dict with raw Unix timestamps)."""
    root = _store(tmp_path)
    assert _invoke("gc-admin", "pause", "--store", str(root), "--reason", "disk swap")[0] == 0
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q")
    assert code == 3, out  # a paused round: its record, no Spark
    Lease(lambda: LocalStore(root), "r-live").acquire()
    code, out = _invoke("gc-admin", "show", "--store", str(root))
    assert code == 3, out  # paused, as the round's own code
    assert "{" not in out and "'" not in out and "None" not in out, out
    assert re.search(r"lease: held by round r-live on host \S+ pid \d+, renewed "
                     + _ISO.pattern + r" \(.+ ago\), expires " + _ISO.pattern
                     + r" \(in (9m|10m)", out), out
    assert re.search(r"paused: yes by \S+@\S+ since " + _ISO.pattern, out), out
    # A paused round is a refusal, shown apart from the rounds that ran (issue 41 F5).
    assert "last round: none recorded" in out, out
    assert re.search(r"last refusal \(not a round: nothing listed or deleted\): "
                     r"_cluster/gc/rounds/\S+ \(#1\), " + _ISO.pattern
                     + r" \(.+\), exit code 3: GC is paused", out), out


def test_show_without_m_says_why_not_none(tmp_path: Path) -> None:
    """Old code: `M: None (blocked: partition t/2 has no fresh report ...)`."""
    root = _store(tmp_path)
    write_partitions(LocalStore(root), 10**6, ["t/0", "t/1", "t/2"])
    code, out = _invoke("gc-admin", "show", "--store", str(root))
    assert code == 2, out  # blocked: old code exited 0 (issue 41 item 6)
    assert "None" not in out and out.startswith("M: none, GC is blocked: "), out
    assert "  t/2: none (no fresh report)" in out, out


def test_show_takes_max_report_age_as_a_duration(tmp_path: Path) -> None:
    """Old code: `Invalid value for '--max-report-age': '5m' is not a valid float.`"""
    root = _store(tmp_path)
    code, out = _invoke("gc-admin", "show", "--store", str(root), "--max-report-age", "5m",
                        "--json")
    assert code == 0, out
    assert json.loads(out)["health"]["state"] == "healthy"


def test_a_pause_names_the_operator_not_the_admin_process(tmp_path: Path) -> None:
    """Old code: `by` was "<host> pid <the gc-admin process's pid>", a process that exits
    at once."""
    root = _store(tmp_path)
    assert _invoke("gc-admin", "pause", "--store", str(root))[0] == 0
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    by = json.loads(out)["paused_by"]
    assert by.startswith(getpass.getuser() + "@") and f"pid {os.getpid()}" not in by, by
    assert _invoke("gc-admin", "pause", "--store", str(root), "--by", "alice (INC-42)",
                   "--replace")[0] == 0
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "paused: yes by alice (INC-42) since" in out, out


def test_bad_arguments_exit_64(tmp_path: Path) -> None:
    """Old code: click's 2, which `epochgc gc` uses for a blocked round."""
    root = _store(tmp_path)
    assert _invoke("gc-admin", "show")[0] == 64  # --store missing
    assert _invoke("gc-admin", "show", "--store", str(root), "--max-report-age", "soon")[0] == 64
    assert _invoke("gc-admin", "nosuch")[0] == 64
    assert _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "0")[0] == 64


def test_show_exits_as_a_round_would(tmp_path: Path) -> None:
    """Issue 41 item 6: `gc-admin show` exited 0 while M was blocked. Now 0 when a round
    may run, 2 when it is blocked, 3 when it is paused (the table in impl/exitcodes.py)."""
    root = _store(tmp_path)
    assert _invoke("gc-admin", "show", "--store", str(root), "--json")[0] == 0
    write_partitions(LocalStore(root), 10**6, ["t/0", "t/1", "t/2"])
    code, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert code == 2 and json.loads(out)["M"] is None, out
    assert _invoke("gc-admin", "pause", "--store", str(root))[0] == 0
    assert _invoke("gc-admin", "show", "--store", str(root), "--json")[0] == 3


def test_show_into_a_closed_pipe_says_nothing_more(tmp_path: Path) -> None:
    """An outside tester: `gc-admin show ... | head -4` printed `Error: BrokenPipeError:
    [Errno 32] Broken pipe` (exit 1). Now: no message on a pipe nobody reads, exit 1."""
    import subprocess
    import sys

    root = _store(tmp_path)
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first line: every write fails (EPIPE)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "epochgc", "gc-admin", "show", "--store", str(root)],
            stdout=w, stderr=subprocess.PIPE, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])))
    finally:
        os.close(w)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "BrokenPipe" not in err and "Traceback" not in err, err


_GOOD_RECORD = {"outcome": "done", "exit_code": 0, "started_at": "2026-11-29T18:00:00+00:00",
                "seconds": 12.5, "M": 7, "seq": 3, "listing_complete": True,
                "counts": {"listed": 5, "eligible": 4, "deleted": 4, "bytes_deleted": 400,
                           "errors": 0}}


@pytest.mark.parametrize(("doc", "why"), [
    ({}, "field outcome is missing"),
    (None, "not a JSON object"),
    ({"counts": [], "outcome": 5, "started": "abc"}, "field outcome"),
    ({**_GOOD_RECORD, "counts": {"deleted": "lots"}}, "field counts.deleted is not a count"),
    ({**_GOOD_RECORD, "seconds": "x"}, "field seconds is not a duration"),
    ({**_GOOD_RECORD, "M": {"a": 1}}, "field M is not an epoch"),
    ({**_GOOD_RECORD, "started_at": None}, "field started_at is missing or not a time"),
    ({**_GOOD_RECORD, "exit_code": True}, "field exit_code"),
    ({**_GOOD_RECORD, "error": ["x"]}, "field error is not a text"),
    ({**_GOOD_RECORD, "counts": {"deleted": -1}}, "field counts.deleted is not a count"),
    ({**_GOOD_RECORD, "listing_complete": "yes"}, "field listing_complete"),
])
def test_show_names_a_round_record_of_the_wrong_shape(tmp_path: Path, doc: object,
                                                      why: str) -> None:
    """newuser3 N9: valid JSON of the wrong shape was shown as a round: `{}` gave
    "outcome: none, exit code none / started None / ... deleted 0 key(s)", and
    `{"counts": {"deleted": "lots"}, ...}` "deleted lots key(s)". Now named as damaged."""
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = _store(tmp_path)
    key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000a.json"
    LocalStore(root).put(key, json.dumps(doc).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert f"last round: cannot read the round record {key}: " in out, out
    assert why in out and "started None" not in out, out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    last = json.loads(out)["last_round"]
    assert list(last) == ["error"] and why in last["error"], last


def test_show_prints_a_round_record_of_the_right_shape(tmp_path: Path) -> None:
    """The boundary of the check above: a record as `record.py` writes it is a round."""
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = _store(tmp_path)
    key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000a.json"
    LocalStore(root).put(key, json.dumps(_GOOD_RECORD).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert f"last round: {key} (#3)" in out and "outcome: done, exit code 0" in out, out
    assert "started 2026-11-29T18:00:00Z" in out and "deleted 4 key(s) (400 bytes)" in out


def test_show_json_names_the_lease_holders_boot_without_a_newline(tmp_path: Path) -> None:
    """newuser3 N11: `"boot_id": "5afea7ac-...-2195e39c7b27\\n"` (the kernel file's
    newline, kept)."""
    root = _store(tmp_path)
    Lease(lambda: LocalStore(root), "r-live").acquire()
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    lease = json.loads(out)["lease"]
    boot = lease["holder"]["driver"]["boot_id"]
    assert boot and boot == boot.strip(), boot
    assert lease["holder_running"] is True, lease  # this process, told by its boot id too


def test_show_says_a_dead_rounds_duration_is_its_journals_span(tmp_path: Path) -> None:
    """newuser3 N11: a round killed ~13 s after it started showed "took 9.0s": a dead
    round's record holds its journal's span (START to its last entry), a lower bound."""
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = _store(tmp_path)
    key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000b.json"
    doc = {**_GOOD_RECORD, "outcome": "killed", "exit_code": 137, "seconds": 9.0,
           "recovered_by": "gc-admin show"}  # as recorded before newuser13 Q3
    LocalStore(root).put(key, json.dumps(doc).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "ran at least 9.0s (its journal's first to last entry; its driver's end unseen)" \
        in out, out
    assert "took" not in out, out
    assert "outcome: killed, exit code 137" in out, out  # a record from before Q3: as it says


def test_a_dead_rounds_record_without_an_exit_code_is_a_round_not_damaged(
        tmp_path: Path) -> None:
    """newuser13 Q3: a round recorded after its driver ended has exit code null (how the
    driver ended is not known); only such a record (`recovered_by`) may lack one."""
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = _store(tmp_path)
    key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000b.json"
    doc = {**_GOOD_RECORD, "outcome": "driver-gone", "exit_code": None, "seconds": 9.0,
           "recovered_by": "gc-admin reset"}
    LocalStore(root).put(key, json.dumps(doc).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "outcome: driver-gone, exit code unknown (its driver ended without" in out, out
    assert "damaged" not in out, out
    LocalStore(root).put(key, json.dumps({**doc, "recovered_by": None}).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "field exit_code is missing or not an integer" in out, out


def test_a_spark_submit_round_whose_jvm_ended_has_no_exit_code_and_is_not_damaged(
        tmp_path: Path) -> None:
    """s27a (newuser13 Q11's SIGKILL case): spark-submit SIGKILLed mid-round exits 137,
    which its Python driver, left running, cannot see; its record said exit 1 (the
    driver's). Now null, shown as unknown and why (its record is no damaged one)."""
    from epochgc.impl.gc.record import ROUNDS_PREFIX, record_document
    from epochgc.impl.gc.summary import SPARK_STOPPED, GcSummary

    summary = GcSummary(started_at=NOW, round_id="20261129T180000.000Z-0000000c",
                        interrupted=SPARK_STOPPED, exit_unseen=True)
    doc = record_document(summary, {})
    assert doc["exit_code"] is None and summary.exit_code == 1, doc  # the driver's own: 1
    root = _store(tmp_path)
    key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000c.json"
    LocalStore(root).put(key, json.dumps({**_GOOD_RECORD, "outcome": "interrupted",
                                          "interrupted": SPARK_STOPPED,
                                          "exit_code": None}).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert ("outcome: interrupted, exit code unknown (spark-submit's: its JVM ended under "
            "the round") in out, out
    assert "damaged" not in out, out


def test_show_names_the_last_rounds_malformed_keys_escaped_and_json_safe(
        tmp_path: Path) -> None:
    """newuser5 G7: after a `--skip-malformed` round, `show` did not mention its malformed
    key, and `show --json` carried it as `bad\\udcff\\udcfename` (lone surrogates, which
    strict JSON consumers reject: RFC 8259 section 8.2). Now the human form names it
    escaped (`text.printable`: an undecodable byte as `\\xNN`), and --json gives such a
    string in that escaped form, listed under `escaped` (JSON Pointers, RFC 6901)."""
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = _store(tmp_path)
    key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000b.json"
    bad = os.fsdecode(b"level_zero/bad\xff\xfename")  # as a local store lists it
    record = {**_GOOD_RECORD, "counts": {**_GOOD_RECORD["counts"], "malformed": 1},
              "samples": {"malformed": [bad, "level_zero/plain"], "refused_entries": [],
                          "errors": []}}
    LocalStore(root).put(key, json.dumps(record).encode())  # as record.py writes it
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert ("  malformed keys: 1 (never deleted), e.g. level_zero/bad\\xff\\xfename, "
            "level_zero/plain") in out.splitlines(), out
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    out.encode("utf-8")  # strict UTF-8
    doc = json.loads(out)
    assert "\\udc" not in out and doc["last_round"]["samples"]["malformed"] == [
        "level_zero/bad\\xff\\xfename", "level_zero/plain"], out
    assert doc["escaped"] == ["/last_round/samples/malformed/0"], doc["escaped"]


def test_show_and_expire_print_counts_with_thousands_separators(tmp_path: Path) -> None:
    """newuser7 (the rest of H3): `gc` says "3,000 deleted" while `show` said "deleted 3000
    key(s) (300000 bytes)", "listed 4845 key(s)" and `expire` "870738 bytes"."""
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = _store(tmp_path)
    key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000a.json"
    counts = {"listed": 4845, "eligible": 3000, "deleted": 3000, "bytes_deleted": 300000,
              "errors": 1200}
    LocalStore(root).put(key, json.dumps({**_GOOD_RECORD, "counts": counts}).encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "deleted 3,000 key(s) (300,000 bytes), errors 1,200" in out, out
    assert "listed 4,845 key(s), eligible 3,000" in out, out
    from epochgc.impl.gc.expire import ExpirePlan

    for applied in (False, True):
        plan = ExpirePlan(applied, 0.0, 0, ["r1"], objects=1234, bytes=870738, removed=1234)
        assert "(1,234 object(s), 870,738 bytes)" in plan.lines()[0], plan.lines()
