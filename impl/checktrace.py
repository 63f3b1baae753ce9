"""`epochgc check-trace FILE`: replay an NDJSON trace (impl/trace.py) against the model.

1. Parse every line strictly; anything malformed is exit 65 (bad input data) with FILE:LINE.
2. Per partition, collect the committed command at each log index from every node's `apply`
   records (two nodes with different commands at one index is a divergence: state-machine
   safety), and replay them in index order through `model.partition` from the initial state.
3. Walk the records in file order: each `apply` must report the model's state after its
   index (and, for a placeholder, the model's accept/reject decision); each `fence` must be
   `model.fence.fence` of its logged inputs, deciding on an applied state the model's replay
   reaches; within one node run, a partition's applied indices must increase.
The first record that disagrees is reported with the records before it for that partition
(exit 1); a conforming trace exits 0.
"""

from __future__ import annotations

import bisect
import json
import sys
from collections import defaultdict, deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, fields
from typing import Any, BinaryIO, NoReturn

import click

from epochgc.impl import errorline, signals
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.signals import NOTHING_YET, checkpoint
from epochgc.model import partition as mp
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.partition import PartitionState
from epochgc.model.replay import (
    MAX_LINE,
    STDIN,
    cannot_read,
    malformed_json,
    not_utf8,
    too_many_digits,
)

_STATE_FIELDS = {f.name for f in fields(PartitionState)}
_COMMON = {"v", "kind", "node", "run", "seq", "partition"}
_KINDS = {
    "apply": {"index", "command", "accepted", "state"},
    "fence": {"term", "epoch", "admitted", "decision", "window", "seen_before", "seen_after",
              "applied"},
}
_CMD_FIELDS = {
    "placeholder": {"epoch", "key", "start", "end", "count"},
    "advance_epoch": {"epoch"},
    "advance_reconciled": {"lro", "lrlo", "l1_key", "l1_base", "l1_count"},
    "set_start_offset": {"start_offset"},
    "barrier": set(),
    "advance_gc_epoch": {"epoch"},
}
# The epoch barrier's fields (R36-R38) are absent from traces written before them.
_OPTIONAL_STATE = {"barrier_epoch", "barrier_offset", "gc_safe_epoch"}


class Malformed(ValueError):
    pass


@dataclass
class Rec:
    line: int
    doc: dict[str, Any]

    def __getitem__(self, k: str) -> Any:
        return self.doc[k]


def _int(v: object, what: str, minimum: int | None = 0) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or (minimum is not None and v < minimum):
        raise Malformed(f"{what} must be an integer >= {minimum}, got {v!r}")
    return v


def _state(v: object, what: str) -> PartitionState:
    if not isinstance(v, dict) or not _STATE_FIELDS - _OPTIONAL_STATE <= set(v) <= _STATE_FIELDS:
        raise Malformed(f"{what} must be an object with fields {sorted(_STATE_FIELDS)}")
    for k, x in v.items():
        if x is not None:
            _int(x, f"{what}.{k}", -1)
    s = PartitionState(**v)
    if not mp.well_formed(s):
        raise Malformed(f"{what} is not a well-formed window state: {s}")
    return s


def _seen(v: object, what: str) -> SeenWindow | None:
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 3:
        raise Malformed(f"{what} must be [term, previous, max] or null")
    return SeenWindow(*(_int(x, what) for x in v))


def _window(v: object, what: str) -> tuple[int, int] | None:
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 2:
        raise Malformed(f"{what} must be [lo, hi] or null")
    return (_int(v[0], what), _int(v[1], what))


def _validate(doc: object) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise Malformed("a record must be a JSON object")
    if "kind" not in doc:  # newuser8 I7: "unknown record kind None"
        raise Malformed("missing field 'kind'")
    kind = doc["kind"]
    if kind not in _KINDS:
        raise Malformed(f"unknown record kind {kind!r}")
    want = _COMMON | _KINDS[kind]
    missing, extra = sorted(want - doc.keys()), sorted(doc.keys() - want)
    if missing:
        raise Malformed(f"missing field {missing[0]!r}")
    if extra:
        raise Malformed(f"unknown field {extra[0]!r}")
    if doc["v"] != 1:
        raise Malformed(f"unsupported trace version {doc['v']!r}")
    _int(doc["node"], "node")
    _int(doc["seq"], "seq")
    if not isinstance(doc["run"], str) or not isinstance(doc["partition"], str):
        raise Malformed("run and partition must be strings")
    out = dict(doc)
    if kind == "apply":
        _int(doc["index"], "index", 1)
        cmd = doc["command"]
        if not isinstance(cmd, dict) or cmd.get("type") not in _CMD_FIELDS:
            raise Malformed(f"command must be an object with a known type, got {cmd!r}")
        if set(cmd) - {"type"} != _CMD_FIELDS[cmd["type"]]:
            raise Malformed(f"command {cmd['type']} has fields {sorted(cmd)}")
        if doc["accepted"] not in (True, False, None):
            raise Malformed("accepted must be true, false or null")
        out["state"] = _state(doc["state"], "state")
    else:
        _int(doc["term"], "term")
        _int(doc["epoch"], "epoch")
        if not isinstance(doc["admitted"], bool):
            raise Malformed("admitted must be a boolean")
        if doc["decision"] not in ("in_window", "above_window", "below_window"):
            raise Malformed(f"unknown fence decision {doc['decision']!r}")
        out["window"] = _window(doc["window"], "window")
        out["seen_before"] = _seen(doc["seen_before"], "seen_before")
        out["seen_after"] = _seen(doc["seen_after"], "seen_after")
        out["applied"] = _state(doc["applied"], "applied")
    return out


def _lines(path: str) -> AbstractContextManager[BinaryIO]:
    """`-` is stdin, as for `replay` (newuser8 I7: "-: cannot read: No such file")."""
    if path == "-":
        return nullcontext(sys.stdin.buffer)
    return open(path, "rb")


def _bounded(f: BinaryIO, source: str) -> Iterator[bytes]:
    """The lines of `f`, each at most MAX_LINE bytes, as `replay` bounds its lines
    (model/replay.py): input without a line end (`check-trace /dev/zero`, a core file) was
    gathered into one line until memory ran out (newuser16 S3: 7.7 GB in 12 s, then a
    MemoryError traceback). A longer line is malformed input once MAX_LINE + 1 bytes of it
    were read, not after the whole of it."""
    n = 0
    while raw := f.readline(MAX_LINE + 1):
        n += 1
        if len(raw) > MAX_LINE:
            raise Malformed(f"{source}:{n}: line longer than {MAX_LINE} bytes")
        yield raw


@dataclass
class Progress:
    """How far a check got, for its interrupted line (newuser16 S10: "nothing was written
    yet", true but not how far): counts, bumped as it goes."""

    read: int = 0
    checked: int = 0

    def said(self) -> str:
        return (f"{NOTHING_YET}; {self.read:,} record(s) read, {self.checked:,} checked "
                "against the model")


# How impl/trace.py's records begin (json.dumps with sort_keys: the first key of each kind).
_RECORD_STARTS = ('{"accepted":', '{"admitted":')


def glued(line: str) -> str | None:
    """What a line that is not JSON holds when it is a torn record with another node's whole
    record appended after it (impl/trace.py: a node's write failed part-way and another node
    appended before the torn bytes could be cut; that node's status says "a torn record is
    left at byte B"), in words; None when it is not that. The trace cannot be checked past a
    record cut in two, so the line stays malformed (65), but the error says which it is."""
    body = line.rstrip("\r\n")
    for first in _RECORD_STARTS:
        at = body.find(first, 1)
        while at > 0:
            try:
                doc, end = json.JSONDecoder().raw_decode(body, at)
            except ValueError:
                doc, end = None, -1
            if end == len(body) and isinstance(doc, dict) and "node" in doc and "seq" in doc:
                return (f"a torn record: its first {at:,} bytes are what a node's failed trace "
                        f"write left (`cluster status`: 'a torn record is left at byte ...'), "
                        f"and node {doc['node']}'s record {doc['seq']} was appended after "
                        "them on this line")
            at = body.find(first, at + 1)
    return None


def parse(path: str, progress: Progress | None = None) -> list[Rec]:
    progress = progress if progress is not None else Progress()
    recs = []
    source = STDIN if path == "-" else path
    # Bytes, decoded a line at a time: a file that is not UTF-8 is malformed input (65,
    # naming its line), as `replay` says it (newuser8 I2: "Error: UnicodeDecodeError", 1).
    with _lines(path) as f:
        for n, raw in enumerate(_bounded(f, source), 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Malformed(f"{source}:{n}: {not_utf8(raw, e.start)}") from None
            if not line.strip():
                continue
            try:
                recs.append(Rec(n, _validate(json.loads(line))))
                progress.read += 1
                if progress.read == 1:
                    checkpoint("record")  # the signal tests' point
            except json.JSONDecodeError as e:
                raise Malformed(f"{source}:{n}: {glued(line) or malformed_json(e)}") from None
            except (Malformed, TypeError) as e:
                raise Malformed(f"{source}:{n}: {e}") from None
            except ValueError as e:  # after its subclass JSONDecodeError: int(str)'s bound
                raise Malformed(f"{source}:{n}: {too_many_digits(e)}") from None
            except RecursionError:
                # Deeper than the interpreter's recursion limit (json's C scanner recurses
                # once per array/object level): newuser8 I3 gave "Error: RecursionError".
                raise Malformed(f"{source}:{n}: nested too deeply") from None
    return recs


def _replay(state: PartitionState, cmd: dict[str, Any], index: int) -> tuple[PartitionState, Any]:
    t = cmd["type"]
    if t == "placeholder":
        r = mp.apply_placeholder(state, cmd["epoch"], index)
        return r.state, r.accepted
    if t == "advance_epoch":
        return mp.apply_advance_epoch(state, cmd["epoch"], index), None
    if t == "advance_reconciled":
        return mp.apply_reconciled(state, cmd["lrlo"], cmd["lro"]), None
    if t == "set_start_offset":
        return mp.apply_set_start_offset(state, cmd["start_offset"]), None
    if t == "advance_gc_epoch":
        return mp.apply_advance_gc_epoch(state, cmd["epoch"], index), None
    return state, None


@dataclass
class Result:
    records: int  # read (all of them, also past a divergence)
    applies: int  # checked: a divergence stops the check at its record (newuser16 S9)
    fences: int
    partitions: int
    divergence: str | None = None

    @property
    def checked(self) -> int:
        return self.applies + self.fences


def check(path: str, context: int = 5, progress: Progress | None = None) -> Result:
    """Raises Malformed (with FILE:LINE) on bad input."""
    progress = progress if progress is not None else Progress()
    recs = parse(path, progress)
    # 1. the committed command at each index, agreed by every node
    logs: dict[str, dict[int, Rec]] = defaultdict(dict)
    n_apply = 0
    for r in recs:
        if r["kind"] == "apply":
            n_apply += 1
            first = logs[r["partition"]].setdefault(r["index"], r)
            if first["command"] != r["command"]:
                return Result(len(recs), n_apply, 0, len(logs), (
                    f"{path}:{r.line}: node {r['node']} applied {r['command']} at"
                    f" {r['partition']} index {r['index']}, but node {first['node']} applied"
                    f" {first['command']} there ({path}:{first.line}): state-machine safety"))
    # 2. the model's replay per partition
    model: dict[str, tuple[list[int], list[PartitionState], dict[int, Any]]] = {}
    reached: dict[str, set[PartitionState]] = {}
    for p, log in logs.items():
        idx, states, decisions = [0], [mp.INITIAL], {}
        s = mp.INITIAL
        for i in sorted(log):
            s, d = _replay(s, log[i]["command"], i)
            idx.append(i)
            states.append(s)
            decisions[i] = d
        model[p] = (idx, states, decisions)
        reached[p] = set(states)
    # 3. every record, in file order
    recent: dict[str, deque[Rec]] = defaultdict(lambda: deque(maxlen=context))
    last_index: dict[tuple[int, str, str], int] = {}
    n_apply = n_fence = 0

    def fail(r: Rec, msg: str) -> Result:
        ctx = "\n".join(f"  {path}:{q.line}: {json.dumps(_plain(q.doc), sort_keys=True)}"
                        for q in recent[r["partition"]])
        where = f"{path}:{r.line}: node {r['node']} partition {r['partition']}"
        text = f"{where}: {msg}"
        if ctx:
            text += f"\ncontext (previous records for {r['partition']}):\n{ctx}"
        return Result(len(recs), n_apply, n_fence, len(logs), text)

    for r in recs:
        p = r["partition"]
        if r["kind"] == "apply":
            n_apply += 1
            key = (r["node"], r["run"], p)
            if r["index"] <= last_index.get(key, 0):
                return fail(r, f"applied index {r['index']} after {last_index[key]} in one run")
            last_index[key] = r["index"]
            idx, states, decisions = model[p]
            want = states[bisect.bisect_right(idx, r["index"]) - 1]
            if r["state"] != want:
                return fail(r, f"after {r['command']} at index {r['index']} the node's state is"
                               f" {r['state']}, the model's is {want}")
            if r["command"]["type"] == "placeholder" and r["accepted"] != decisions[r["index"]]:
                before = states[bisect.bisect_left(idx, r["index"]) - 1]
                return fail(r, f"placeholder epoch {r['command']['epoch']} under window"
                               f" {mp.window(before)}: node accepted={r['accepted']}, model"
                               f" accepted={decisions[r['index']]}")
        else:
            n_fence += 1
            applied = r["applied"]
            if p in reached and applied not in reached[p]:
                return fail(r, f"fence decided on applied state {applied}, which the model's"
                               " replay of the committed log never reaches")
            m = fence(r["seen_before"], applied, r["term"], r["epoch"])
            got = (r["admitted"], r["window"], r["seen_after"])
            want_f = (m.admitted, m.window, m.seen)
            if got != want_f:
                return fail(r, f"fence of epoch {r['epoch']} in term {r['term']} (seen"
                               f" {r['seen_before']}, applied window {mp.window(applied)}):"
                               f" node (admitted, window, seen) = {got}, model = {want_f}")
        recent[p].append(r)
        progress.checked += 1
        if progress.checked == 1:
            checkpoint("checked")  # the signal tests' point
    return Result(len(recs), n_apply, n_fence, len(logs))


def _plain(doc: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in doc.items():
        if isinstance(v, PartitionState):
            v = {f: getattr(v, f) for f in sorted(_STATE_FIELDS)}
        elif isinstance(v, SeenWindow):
            v = [v.term, v.previous, v.max]
        elif isinstance(v, tuple):
            v = list(v)
        out[k] = v
    return out


def _say(line: str) -> None:
    """A verdict on stderr, with the command's name first, as `replay` says its own (i41y:
    "adir: cannot read: Is a directory" had no "epochgc check-trace:")."""
    click.echo(f"epochgc check-trace: {line}", err=True)


def _refuse(line: str) -> NoReturn:
    """Input that cannot be checked: an error, in every command's shape (impl/errorline.py;
    newuser13 Q9: it had no word saying it was one), and exit 65. The error is the
    command's result: written under `signals.finishing`, so that a signal that comes with
    it no longer changes the exit code (newuser23 F6: a SIGINT right after it turned 65
    into 130, with an "interrupted ... nothing was written yet" line after the error)."""
    with signals.finishing(ExitCode.DATAERR):
        click.echo(errorline.line("check-trace", line), err=True)
    raise SystemExit(ExitCode.DATAERR)


# Records of context kept per partition at most: far more than a reader takes in, and
# bounded so that a deque's maximum (a C ssize_t) is never what refuses the value.
MAX_CONTEXT = 1_000_000


@click.command("check-trace")
# Not click.Path(dir_okay=False): a directory is input that cannot be read (65), as for
# `replay`, not a usage error (newuser8 I7: 64 here, 65 there).
@click.argument("trace", metavar="TRACE")
# Bounded in the option's type, so out of range is a usage error (64) naming the option:
# -1 was "error: maxlen must be non-negative" (the deque's words, exit 1), 10^20 an
# OverflowError traceback (newuser16 S2).
@click.option("--context", default=5, show_default=True,
              type=click.IntRange(0, MAX_CONTEXT),
              help="Records of context to show before a divergence.")
def check_trace(trace: str, context: int) -> None:
    """Replay a cluster trace (NDJSON, `epochgc cluster start --trace`; `-` for stdin)
    against the model."""
    progress = Progress()
    signals.doing(progress.said)
    try:
        res = check(trace, context, progress)
    except OSError as e:
        _refuse(cannot_read(STDIN if trace == "-" else trace, e))
    except Malformed as e:
        _refuse(str(e))  # SOURCE:LINE: what, as `replay` words bad input
    if res.records == 0:
        # An empty file, a truncated copy or `-` with nothing piped is not a pass: nothing was
        # compared with the model (newuser12 P3: "conforms: 0 records", exit 0).
        _refuse(f"{STDIN if trace == '-' else trace}: the trace holds no record: nothing was "
                "checked")
    # The verdict is the command's result: once written, a signal no longer changes the
    # exit code (newuser19 V2: "nothing was written yet" after it, exit 130).
    if res.divergence is not None:
        with signals.finishing(ExitCode.FAILED):
            _say(f"trace diverges from the model: {res.divergence}")
            # How far the check got, not what was read: it stops at the divergence.
            click.echo(f"checked: {res.checked:,} of {res.records:,} records "
                       f"({res.applies:,} apply, {res.fences:,} fence; stopped at the first "
                       f"divergence) over {res.partitions} partitions", err=True)
        raise SystemExit(ExitCode.FAILED)
    with signals.finishing(ExitCode.OK):
        click.echo(f"trace conforms to the model: {res.records} records ({res.applies} "
                   f"apply, {res.fences} fence) over {res.partitions} partitions")
