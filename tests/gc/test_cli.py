"""`epochgc gc` end to end through click: exit codes, one clear message, nothing deleted."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from epochgc.impl.cli import main
from epochgc.impl.gc.summary import JSON_KEYS
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import (
    AHEAD,
    HOUR,
    NOW,
    all_keys,
    put_local,
    simple_cluster,
    write_partitions,
)


def run(*args: str) -> Any:
    return CliRunner().invoke(main, ["gc", "--now", str(NOW), *AHEAD, "-q", *args])


def small_store(root: Path) -> set[str]:
    simple_cluster(LocalStore(root, create=True), 50)
    old = {format_key(p, 40, "old") for p in (0, 7)}
    for k in old:
        put_local(root, k, age=13 * HOUR)
    put_local(root, format_key(7, 60, "new"), age=13 * HOUR)
    put_local(root, format_key(7, 45, "young"), age=HOUR)
    return old


@pytest.mark.spark
def test_json_summary_and_metrics_file(spark: Any, tmp_path: Path) -> None:
    old = small_store(tmp_path / "s")
    metrics = tmp_path / "gc.prom"
    r = run("--store", f"file://{tmp_path / 's'}", "--json", "--metrics-file", str(metrics))
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert tuple(summary) == JSON_KEYS
    assert {k: summary[k] for k in ("M", "blocked", "eligible", "deleted")} == {
        "M": 50,
        "blocked": None,
        "eligible": 2,
        "deleted": 2,
    }
    assert (summary["skipped_too_new"], summary["skipped_too_young"]) == (1, 1)
    assert not old & all_keys(LocalStore(tmp_path / "s"))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(metrics.read_text())
        for s in f.samples
    }
    assert samples[("epochgc_gc_objects", (("outcome", "deleted"),))] == 2
    assert samples[("epochgc_gc_safe_epoch", ())] == 50
    assert samples[("epochgc_gc_round_blocked", ())] == 0


def test_blocked_round_exits_2_without_spark(tmp_path: Path) -> None:
    small_store(tmp_path)
    write_partitions(LocalStore(tmp_path), 100, ["t/0", "t/1", "late/0"])
    before = all_keys(LocalStore(tmp_path))
    r = run("--store", str(tmp_path), "--json")
    assert r.exit_code == 2
    assert json.loads(r.stdout)["blocked"] == "no inactive epoch reported for: late/0"
    assert all_keys(LocalStore(tmp_path)) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grace", "12x"], "'12x' is not a duration"),
        (["--grace", "٥h"], "is not a duration"),  # issue 12: an Arabic-Indic five was 5h
        (["--grace", "30m"], "below the 1h safety minimum"),
        (["--max-report-age", "0s"], "max report age must be > 0"),
        # newuser13 Q5: taken, and the staleness check was then off
        (["--max-report-age", "99999999999d"], "'99999999999d' is longer than 365d"),
        (["--store", "gs://bucket/x"], "unsupported store URL scheme 'gs'"),
        (["--store", "s3://Bad_Bucket/x"], "not a valid bucket name"),
        (["--store", "s3://b", "--s3-endpoint", "http://key:secret@h:1"], "must not carry"),
        (["--s3-endpoint", "http://127.0.0.1:9"], "only applies to s3:// stores"),
        # Issue 41 F10: "Error: ValueError: Invalid IPv6 URL", exit 1; and a codec error at
        # the first request, exit 1.
        (["--store", "s3://b/x", "--s3-endpoint", "http://[::1"],
         "S3 endpoint 'http://[::1' is not a valid URL"),
        (["--store", "s3://gcb/p\udcff", "--s3-endpoint", "http://127.0.0.1:9"],
         "has a prefix that is not valid UTF-8"),
        (["--delete-batch-size", "1001"], "1001 is not in the range"),
        # The hidden clock override: every age would be NaN or infinite (review, issue 12).
        (["--now", "nan"], "'nan' is not a time in unix seconds"),
        (["--now", "inf"], "'inf' is not a time in unix seconds"),
        (["--now", "1e400"], "'1e400' is not a time in unix seconds"),
        (["--now", "-5"], "'-5' is not a time in unix seconds"),
        (["--now", "٥"], "is not a time in unix seconds"),
        (["--now", "253402300800"], "is not a time in unix seconds"),  # after year 9999
        # Issue 29: these silently ran on /d/st.
        (["--store", "file:///d/st#ore"], "has a query or fragment"),
        (["--store", "file:///d/st?ore"], "has a query or fragment"),
        (["--store", "file:///d/st?"], "has a query or fragment"),
    ],
)
def test_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    small_store(tmp_path)
    before = all_keys(LocalStore(tmp_path))
    r = run("--store", str(tmp_path), *args)
    assert r.exit_code == 64, r.output
    assert message in r.output and "secret" not in r.output
    assert all_keys(LocalStore(tmp_path)) == before


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf", "1e9", "601"])
def test_a_bad_setting_is_a_usage_error_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """newuser13 Q5: a bad EPOCHGC_CONTROL_READ_TIMEOUT_S exited 1 (the table's 64 is
    "usage error ... nothing done"), and 1e9 s a read was taken (a hang on a silent
    store); at most the GC lease's 600 s (`patience.MOST_WAIT_S`). `gc` and `gc-admin`
    refuse it before anything is written."""
    small_store(tmp_path)
    before = all_keys(LocalStore(tmp_path))
    monkeypatch.setenv("EPOCHGC_CONTROL_READ_TIMEOUT_S", value)
    want = (f"environment variable EPOCHGC_CONTROL_READ_TIMEOUT_S={value!r} is not a number "
            "of seconds above 0 and at most 600")
    r = run("--store", str(tmp_path))
    assert r.exit_code == 64 and want in r.output, r.output
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(tmp_path)])
    assert r.exit_code == 64 and want in r.output, r.output
    assert all_keys(LocalStore(tmp_path)) == before
    assert not list(LocalStore(tmp_path).list_all("_cluster/gc/")), "a round was started"


def test_progress_goes_to_stderr(tmp_path: Path) -> None:
    small_store(tmp_path)
    write_partitions(LocalStore(tmp_path), 100, ["t/0", "t/1", "late/0"])
    r = CliRunner().invoke(
        main, ["gc", "--now", str(NOW), *AHEAD, "--store", str(tmp_path), "--json"]
    )
    assert r.exit_code == 2
    assert "gc: no collection this round (no inactive epoch reported for: late/0)" in r.stderr
    assert json.loads(r.stdout)["blocked"]


def test_short_grace_allowed_when_forced(tmp_path: Path) -> None:
    small_store(tmp_path)
    write_partitions(LocalStore(tmp_path), 100, ["t/0", "t/1", "late/0"])  # stays blocked
    r = run("--store", str(tmp_path), "--grace", "30m", "--i-know-grace-is-short")
    assert r.exit_code == 2, r.output


def test_unreadable_store(tmp_path: Path) -> None:
    r = run("--store", str(tmp_path / "missing"))
    assert r.exit_code == 1
    assert r.output.count("\n") == 1 and "does not exist or is not a directory" in r.output
    # newuser13 Q8: its JSON said `"listing_complete": true` (nothing was listed); so did
    # a directory that is no store (the round's own check, before any listing).
    (tmp_path / "plain").mkdir()
    for where in ("missing", "plain"):
        r = run("--store", str(tmp_path / where), "--json")
        doc = json.loads(r.stdout)
        assert r.exit_code == 1 and doc["outcome"] == "error", r.output
        assert doc["listing_complete"] is False and doc["listed"] == 0, doc


def test_malformed_report_file(tmp_path: Path) -> None:
    small_store(tmp_path)
    LocalStore(tmp_path).put("_cluster/health/n2.json", b'{"node": "n2", "written_at": 1}')
    before = all_keys(LocalStore(tmp_path))
    r = run("--store", str(tmp_path))
    # Issue 41: blocked (2), as the fault table and the monitor have it; was `error`, 1.
    assert r.exit_code == 2
    assert r.output.strip() == (
        "gc: round blocked, nothing deleted: safety monitor: cluster health unknown: the "
        "reports cannot be read: _cluster/health/n2.json: missing field 'replicas'"
    )
    assert all_keys(LocalStore(tmp_path)) == before


def test_unreachable_s3_store_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.store.s3server import free_port, set_dummy_aws_env

    set_dummy_aws_env()
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # boto3's own setting: keep the test short
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    r = CliRunner().invoke(
        main, ["gc", "-q", "--store", "s3://nobucket/x", "--s3-endpoint", endpoint]
    )
    assert r.exit_code == 1
    assert "cannot read _cluster/partitions.json" in r.output and r.output.count("\n") == 1


@pytest.mark.parametrize("deleted", [0, 7])
def test_a_round_stopped_at_a_tasks_reread_says_what_it_deleted(deleted: int) -> None:
    # Each task re-reads M before its own first delete: a round whose later tasks found it
    # blocked (or M moved back) may have deleted with the earlier ones' verdicts.
    from epochgc.impl.gc.summary import GcSummary

    why = "on re-check before deleting: no inactive epoch reported for: t/2"
    for s in (GcSummary(M=100, blocked=why, deleted=deleted),
              GcSummary(M=100, refused="M moved backwards from 100 to 90", deleted=deleted)):
        text = "\n".join(s.lines())
        if deleted:
            assert "deleted=7" in text and "nothing deleted" not in text
            assert "the tasks that saw it deleted nothing" in text
        else:
            assert "nothing deleted" in text
        assert (s.blocked or s.refused or "") in text


def test_now_ahead_of_the_real_clock_is_refused_unless_forced(tmp_path: Path) -> None:
    # The found defect (issue 29): --now 11h55m ahead with --grace 12h deleted a
    # 10-minute-old object; spark.epochgc.now (the same option) too.
    from epochgc.impl.gc.cli import gc
    from epochgc.impl.gc.submit import conf_defaults

    small_store(tmp_path)
    before = all_keys(LocalStore(tmp_path))
    ahead = f"{time.time() + 11 * HOUR + 55 * 60:.0f}"
    r = CliRunner().invoke(main, ["gc", "--now", ahead, "-q", "--store", str(tmp_path)])
    assert r.exit_code == 64 and "ahead of the real clock" in r.output, r.output
    conf = {"spark.epochgc.now": ahead, "spark.epochgc.store": str(tmp_path)}
    r = CliRunner().invoke(gc, [], default_map=conf_defaults(conf, gc))
    assert r.exit_code == 64 and "--i-know-now-is-ahead" in r.output, r.output
    assert all_keys(LocalStore(tmp_path)) == before


def test_a_round_blocked_by_nodes_that_stopped_reporting_says_so(tmp_path: Path) -> None:
    """newuser12 P7: after `cluster stop` the round said only "no collection this round
    (no inactive epoch reported for: t/0, ...)", exit 2; `gc-admin show` said the cause.
    Now the round says it in show's words, and the exit code stays 2. Old code: no
    "stopped reporting" in the line or the record."""
    from tests.gc.helpers import write_health

    store = LocalStore(tmp_path, create=True)
    write_partitions(store, 100, ["t/0", "t/1"])
    for node in ("n1", "n2"):  # a day old: beyond the default age limit
        write_health(store, node, NOW - 24 * HOUR, [("t/0", 50), ("t/1", 50)])
    r = CliRunner().invoke(main, ["gc", "--now", str(NOW), *AHEAD, "--store", str(tmp_path),
                                  "--json"])
    assert r.exit_code == 2, r.output
    cause = "node(s) n1, n2 stopped reporting (their reports are older than the age limit)"
    assert (f"gc: no collection this round ({cause}; no inactive epoch reported for: t/0, "
            "t/1)") in r.stderr, r.stderr
    assert json.loads(r.stdout)["blocked"].startswith(cause)


@pytest.mark.parametrize("why", ["blocked", "paused"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_round_whose_record_cannot_be_written_says_so_and_exits_1(
        tmp_path: Path, why: str, as_json: bool) -> None:
    """newuser18 U3: a blocked round on a store it could not write exited 2 ("retry later")
    with `"record": null` and not a word; a real round said "deletion record not written".
    Every round whose record fails now says it (stdout's lines, or stderr with --json) and
    exits 1: a retry on that store never records. U3b: no lease was taken, so the line does
    not send the operator to `gc-admin reset --force` to remove one. The store refuses the
    record for root too: `_cluster/gc/rounds` is a regular file (ENOTDIR)."""
    small_store(tmp_path)
    if why == "blocked":
        write_partitions(LocalStore(tmp_path), 100, ["t/0", "t/1", "late/0"])
    else:
        r = CliRunner().invoke(main, ["gc-admin", "pause", "--store", str(tmp_path),
                                      "--by", "ops", "--reason", "u3"])
        assert r.exit_code == 0, r.output
    rounds = tmp_path / "_cluster" / "gc" / "rounds"
    rounds.parent.mkdir(parents=True, exist_ok=True)
    rounds.write_text("not a directory\n")
    before = all_keys(LocalStore(tmp_path))
    r = run("--store", str(tmp_path), *(["--json"] if as_json else []))
    assert r.exit_code == 1, r.output
    said = r.stderr if as_json else r.stdout
    [warning] = [ln for ln in said.splitlines() if "deletion record not written" in ln]
    assert warning.startswith("gc: warning: deletion record not written: cannot write "
                              "'_cluster/gc/rounds/"), warning
    assert "Not a directory" in warning and "reset --force" not in warning, warning
    assert warning.endswith("nothing was deleted and no lease was taken: nothing to clean "
                            "up; this output is the round's only account"), warning
    if as_json:
        out = json.loads(r.stdout)
        assert (out["outcome"], out["record"], out["exit_code"]) == (why, None, 1), out
        # review41a R5: the object says why too, not only stderr's line.
        assert "Not a directory" in out["record_error"], out
    assert before <= all_keys(LocalStore(tmp_path))  # nothing deleted
