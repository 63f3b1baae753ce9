"""Replay conformance vectors through the model (format: spec/VECTORS.md).

A vector is JSON Lines: one step per line, run in order against one partition (its
replicated `PartitionState` plus each node's in-memory seen window) or against the
stateless cluster functions. Every step yields one result dict; a step's optional
`"expect"` lists result keys whose values must match, and a disagreement is recorded in the
result under `"mismatch"`. Input the format or the model refuses raises `ReplayError`,
which names the source, line, step and field.

Pure apart from `run`, which reads a file and writes lines through the callables it is
given (so the library works without click).
"""

from __future__ import annotations

import io
import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from epochgc.model import cluster, keys
from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.partition import (
    INITIAL,
    PartitionState,
    apply_advance_epoch,
    apply_advance_gc_epoch,
    apply_placeholder,
    apply_reconciled,
    inactive_epoch,
    window,
)
from epochgc.model.prodrules import follower_slide
from epochgc.model.variants import VARIANTS, Variant, variant

DEFAULT_NODE = "n0"
DEFAULT_VARIANT = "reference"
# `# variant: NAME` before the first step selects the variant (unless the caller chose one).
# Any comment of that shape is a header, so a malformed one is refused, not ignored.
_HEADER = re.compile(r"#\s*variant\s*:(.*)")
# Keys every step may carry besides its op's own fields.
_COMMON = ("op", "note", "expect")

# The values of `impl/exitcodes.py` (the model imports nothing of `impl`): 65 is BSD
# sysexits EX_DATAERR, "the input data was incorrect".
EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 65

# The longest line a vector may hold (spec/VECTORS.md "Files"), in characters, its end of
# line included. The longest shipped step is a few hundred; without a bound, input with no
# line end (`epochgc replay /dev/zero`) was gathered into one line until memory ran out
# (an outside tester: 13 GB in 45 s).
MAX_LINE = 1 << 20


class ReplayError(ValueError):
    """A step the format or the model refuses. `str()` is one line:
    `SOURCE:LINE: step N: FIELD: message`, leaving out the parts that are unknown."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        step: int | None = None,
        line: int | None = None,
        source: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.step = step
        self.line = line
        self.source = source

    def located(self, *, line: int, source: str) -> ReplayError:
        return ReplayError(
            self.message, field=self.field, step=self.step, line=line, source=source
        )

    def __str__(self) -> str:
        parts = []
        if self.source is not None:
            parts.append(self.source if self.line is None else f"{self.source}:{self.line}")
        if self.step is not None:
            parts.append(f"step {self.step}")
        if self.field is not None:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)


class _Bad(Exception):
    """A field check failed; `Replayer.step` adds the step number."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# -- field checks: each returns the value or raises _Bad ------------------------------------

Check = Callable[[str, Any], Any]


def _int(minimum: int) -> Check:
    def check(name: str, v: Any) -> int:
        # bool is an int in Python but never a valid epoch or offset.
        if not isinstance(v, int) or isinstance(v, bool):
            raise _Bad(name, f"must be an integer, got {json.dumps(v)}")
        if v < minimum:
            raise _Bad(name, f"must be >= {minimum}, got {v}")
        return v

    return check


_nat = _int(0)
_offset_or_none = _int(-1)  # -1 = nothing reconciled yet (and M(p) of a floor at 0)


def _opt(check: Check) -> Check:
    return lambda name, v: None if v is None else check(name, v)


def _name(name: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise _Bad(name, f"must be a non-empty string, got {json.dumps(v)}")
    return v


def _text(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise _Bad(name, f"must be a string, got {json.dumps(v)}")
    return v


def _seconds(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise _Bad(name, f"must be a number >= 0, got {json.dumps(v)}")
    return v


def _names(name: str, v: Any) -> list[str]:
    if not isinstance(v, list):
        raise _Bad(name, f"must be a list, got {json.dumps(v)}")
    return [_name(f"{name}[{i}]", x) for i, x in enumerate(v)]


_REPORT_FIELDS: dict[str, Check] = {
    "partition": _name,
    "replica": _name,
    "inactive_epoch": _opt(_offset_or_none),
}


def _reports(name: str, v: Any) -> list[cluster.Report]:
    if not isinstance(v, list):
        raise _Bad(name, f"must be a list, got {json.dumps(v)}")
    out = []
    for i, r in enumerate(v):
        where = f"{name}[{i}]"
        if not isinstance(r, dict):
            raise _Bad(where, f"must be an object, got {json.dumps(r)}")
        f = _fields(r, _REPORT_FIELDS, {}, prefix=f"{where}.")
        out.append(cluster.Report(f["partition"], f["replica"], f["inactive_epoch"]))
    return out


def _fields(
    obj: Mapping[str, Any],
    required: Mapping[str, Check],
    optional: Mapping[str, Check],
    *,
    prefix: str = "",
    allowed: Iterable[str] = (),
) -> dict[str, Any]:
    """Check an object's fields: all required present, nothing unknown (typos must not
    pass silently), each value of its kind."""
    known = {*required, *optional, *allowed}
    for k in obj:
        if k not in known:
            raise _Bad(f"{prefix}{k}", f"unknown field (expected: {', '.join(sorted(known))})")
    out: dict[str, Any] = {}
    for k, check in required.items():
        if k not in obj:
            raise _Bad(f"{prefix}{k}", "missing")
        out[k] = check(f"{prefix}{k}", obj[k])
    for k, check in optional.items():
        if k in obj:
            out[k] = check(f"{prefix}{k}", obj[k])
    return out


# -- results --------------------------------------------------------------------------------


def _pair(w: tuple[int, int] | None) -> list[int] | None:
    return None if w is None else [w[0], w[1]]


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: unlike Python's ==, `true` is not `1`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


@dataclass(frozen=True)
class _Op:
    required: Mapping[str, Check]
    optional: Mapping[str, Check]
    results: tuple[str, ...]  # result keys besides "step" and "op" (what expect may list)
    run: Callable[[Replayer, dict[str, Any]], dict[str, Any]]


class Replayer:
    """One partition's replicated state, each node's seen window, and the steps on them."""

    def __init__(self, variant_or_name: Variant | str = DEFAULT_VARIANT) -> None:
        self.variant = (
            resolve_variant(variant_or_name)
            if isinstance(variant_or_name, str)
            else variant_or_name
        )
        self.state: PartitionState = INITIAL
        self.seen: dict[str, SeenWindow | None] = {}
        # Log offsets only grow: every apply comes after the previous one and after LRLO
        # (the reconciler never passes the log end, spec A4). The model itself only checks
        # against the window offset, which a non-sliding apply does not move.
        self.last_offset = -1
        self.deleted = False  # spec R32-R34: the partition was deleted (until re-created)

    def step(self, obj: Mapping[str, Any], index: int) -> dict[str, Any]:
        """Run one step; the result always has "step": index and "op"."""
        try:
            if not isinstance(obj, Mapping):
                raise _Bad("op", f"a step must be a JSON object, got {json.dumps(obj)}")
            if "op" not in obj:
                raise _Bad("op", "missing")
            name = obj["op"]
            op = OPS.get(name) if isinstance(name, str) else None
            if op is None:
                raise _Bad("op", f"unknown op {json.dumps(name)} (known: {', '.join(OPS)})")
            args = _fields(obj, op.required, op.optional, allowed=_COMMON)
            if "note" in obj:
                _text("note", obj["note"])
            expect = _expect(obj["expect"], op.results) if "expect" in obj else {}
            result: dict[str, Any] = {"step": index, "op": name, **op.run(self, args)}
        except _Bad as e:
            raise ReplayError(e.message, field=e.field, step=index) from None
        except ModelError as e:
            # `where` may carry a path after the function name ("gc_epoch reports[1]").
            _, _, path = e.where.partition(" ")
            field = f"{path}.{e.field}" if path else e.field
            raise ReplayError(e.message, field=field, step=index) from None
        if expect:
            mismatch = {
                k: {"expected": v, "actual": result.get(k)}
                for k, v in expect.items()
                if not json_equal(v, result.get(k))  # `crashed`: assert-at-apply only
            }
            if mismatch:
                result["mismatch"] = mismatch
        return result

    # -- partition ops --

    def _check_log_order(self, offset: int) -> None:
        floor = max(self.last_offset, self.state.last_reconciled_log_offset)
        if offset <= floor:
            raise _Bad(
                "offset",
                f"log offsets must increase: {offset} is not after {floor} (the last "
                "applied offset or the last reconciled log offset)",
            )

    def _fence(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.deleted:  # R34: refused, nothing changes
            return {"admitted": False, "window": None}
        node = a.get("node", DEFAULT_NODE)
        r = fence(self.seen.get(node), self.state, a["term"], a["epoch"], self.variant)
        self.seen[node] = r.seen
        return {"admitted": r.admitted, "window": _pair(r.window)}

    def _apply_placeholder(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.deleted:  # R34: refused, nothing logged
            return {"accepted": False, "applied_window": None}
        self._check_log_order(a["offset"])
        r = apply_placeholder(self.state, a["epoch"], a["offset"], self.variant)
        if r.crashed:
            # assert-at-apply: the replica crashed on this entry; nothing was applied, and
            # its replay (the same offset again) crashes again.
            return {"accepted": False, "applied_window": _pair(window(self.state)),
                    "crashed": True}
        self.state, self.last_offset = r.state, a["offset"]
        if self.variant.followers_slide:  # every node slides its seen window on apply
            self.seen = {n: follower_slide(w, a["epoch"]) for n, w in self.seen.items()}
        out: dict[str, Any] = {"accepted": r.accepted,
                               "applied_window": _pair(window(self.state))}
        if self.variant.assert_at_apply:
            out["crashed"] = False
        return out

    def _apply_advance_epoch(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.deleted:
            return {"applied_window": None}
        self._check_log_order(a["offset"])
        self.state = apply_advance_epoch(self.state, a["epoch"], a["offset"], self.variant)
        self.last_offset = a["offset"]
        return {"applied_window": _pair(window(self.state))}

    def _apply_advance_gc_epoch(self, a: dict[str, Any]) -> dict[str, Any]:
        """R36: the epoch barrier's command; pending until LRLO reaches its offset."""
        if self.deleted:
            return {"barrier_epoch": None, "gc_safe_epoch": None, "inactive_epoch": None}
        self._check_log_order(a["offset"])
        self.state = apply_advance_gc_epoch(self.state, a["epoch"], a["offset"])
        self.last_offset = a["offset"]
        s = self.state  # -1 (none) is null in the results
        return {"barrier_epoch": s.barrier_epoch if s.barrier_epoch >= 0 else None,
                "gc_safe_epoch": s.gc_safe_epoch if s.gc_safe_epoch >= 0 else None,
                "inactive_epoch": inactive_epoch(self.state, self.variant)}

    def _apply_reconciled(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.deleted:
            return {"min_epoch_lower_bound": None, "inactive_epoch": None}
        self.state = apply_reconciled(self.state, a["lrlo"], a.get("lro"))
        return {
            "min_epoch_lower_bound": self.state.min_epoch_lower_bound,
            "inactive_epoch": inactive_epoch(self.state, self.variant),
        }

    def _delete_partition(self, a: dict[str, Any]) -> dict[str, Any]:
        """R32: the partition's state and every node's seen window are dropped."""
        if self.deleted:
            raise _Bad("op", "the partition is already deleted (create_partition first)")
        self.state, self.seen, self.last_offset, self.deleted = INITIAL, {}, -1, True
        return {}

    def _create_partition(self, a: dict[str, Any]) -> dict[str, Any]:
        """R35: a new incarnation after a delete_partition: no state, a new log."""
        if not self.deleted:
            raise _Bad("op", "the partition exists (create_partition follows delete_partition)")
        self.deleted = False
        return {}

    def _restart(self, a: dict[str, Any]) -> dict[str, Any]:
        if "node" in a:
            self.seen[a["node"]] = None
        else:
            self.seen = {n: None for n in self.seen}
        return {}

    def _state(self, a: dict[str, Any]) -> dict[str, Any]:
        s = self.state
        return {
            "max_applied_epoch": s.max_applied_epoch,
            "previous_applied_epoch": s.previous_applied_epoch,
            "min_epoch_lower_bound": s.min_epoch_lower_bound,
            "window_offset": s.window_offset,
            "last_reconciled_log_offset": s.last_reconciled_log_offset,
            "last_reconciled_offset": s.last_reconciled_offset,
            "inactive_epoch": inactive_epoch(s, self.variant),
        }

    # -- cluster ops (stateless) --

    def _gc_epoch(self, a: dict[str, Any]) -> dict[str, Any]:
        g = cluster.gc_epoch(a["snapshot_revision"], a["partitions"], a["reports"], self.variant)
        best = cluster.partition_epochs(a["partitions"], a["reports"])
        # `missing` is the structured form of `blocked`: its wording is not part of the format.
        missing = [p for p, v in best.items() if v is None]
        return {"M": g.M, "blocked": g.blocked, "missing": missing}

    def _gc_eligible(self, a: dict[str, Any]) -> dict[str, Any]:
        e = keys.gc_eligible(a["key"], a["age_s"], a["M"], a["grace_s"])
        try:
            epoch: int | None = keys.parse_key(a["key"]).epoch
        except ModelError:
            epoch = None
        return {"eligible": e.eligible, "error": e.error, "epoch": epoch}


def _expect(v: Any, results: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _Bad("expect", f"must be an object, got {json.dumps(v)}")
    allowed = ("step", "op", *results)
    for k in v:
        if k not in allowed:
            raise _Bad(f"expect.{k}", f"not a result of this op (results: {', '.join(allowed)})")
    return v


_NODE: dict[str, Check] = {"node": _name}

OPS: dict[str, _Op] = {
    "fence": _Op(
        {"term": _nat, "epoch": _nat}, _NODE, ("admitted", "window"), Replayer._fence
    ),
    "apply_placeholder": _Op(
        {"epoch": _nat, "offset": _nat},
        {},
        ("accepted", "applied_window", "crashed"),
        Replayer._apply_placeholder,
    ),
    "apply_advance_epoch": _Op(
        {"epoch": _nat, "offset": _nat}, {}, ("applied_window",), Replayer._apply_advance_epoch
    ),
    "apply_advance_gc_epoch": _Op(
        {"epoch": _nat, "offset": _nat},
        {},
        ("barrier_epoch", "gc_safe_epoch", "inactive_epoch"),
        Replayer._apply_advance_gc_epoch,
    ),
    "apply_reconciled": _Op(
        {"lrlo": _offset_or_none},
        {"lro": _offset_or_none},
        ("min_epoch_lower_bound", "inactive_epoch"),
        Replayer._apply_reconciled,
    ),
    "restart": _Op({}, _NODE, (), Replayer._restart),
    "delete_partition": _Op({}, {}, (), Replayer._delete_partition),
    "create_partition": _Op({}, {}, (), Replayer._create_partition),
    "state": _Op(
        {},
        {},
        (
            "max_applied_epoch",
            "previous_applied_epoch",
            "min_epoch_lower_bound",
            "window_offset",
            "last_reconciled_log_offset",
            "last_reconciled_offset",
            "inactive_epoch",
        ),
        Replayer._state,
    ),
    "gc_epoch": _Op(
        {"snapshot_revision": _nat, "partitions": _names, "reports": _reports},
        {},
        ("M", "blocked", "missing"),
        Replayer._gc_epoch,
    ),
    "gc_eligible": _Op(
        {"key": _text, "age_s": _seconds, "M": _opt(_offset_or_none), "grace_s": _seconds},
        {},
        ("eligible", "error", "epoch"),
        Replayer._gc_eligible,
    ),
}


# -- files ---------------------------------------------------------------------------------


def resolve_variant(name: str) -> Variant:
    try:
        return variant(name)
    except ModelError as e:
        raise ReplayError(e.message, field="variant") from None


def variant_from_filename(path: str | Path) -> str | None:
    """`...-NAME.jsonl` or `NAME.jsonl` for a known variant NAME (longest name wins)."""
    stem = Path(path).name.removesuffix(".jsonl")
    hits = [n for n in VARIANTS if stem == n or stem.endswith(f"-{n}")]
    return max(hits, key=len) if hits else None


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Bad(k, "appears twice in one object")
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise _Bad("json", f"{name} is not valid JSON")


def parse_step(text: str) -> Any:
    """One line of JSON, strictly: no NaN/Infinity, no duplicate keys."""
    try:
        return json.loads(
            text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as e:
        raise _Bad("json", malformed_json(e)) from None
    except RecursionError:
        # Deeper than the interpreter's recursion limit: json's C scanner counts each
        # array/object level as one recursive call (newuser8 I3: "Error: RecursionError").
        raise _Bad("json", "malformed JSON: nested too deeply") from None
    except ValueError as e:
        raise _Bad("json", too_many_digits(e)) from None


def malformed_json(e: json.JSONDecodeError) -> str:
    """"malformed JSON: Expecting value at column 7", for one line (replay, check-trace:
    newuser23 F5, check-trace said Python's "Expecting value: line 1 column 1 (char 0)").
    Two of Python's messages end in "at" ("Unterminated string starting at", "Invalid
    control character at"; Lib/json/decoder.py), written to be followed by the place:
    newuser15 S7 read "starting at at column 2". The place is said once."""
    return f"malformed JSON: {e.msg.removesuffix(' at')} at column {e.colno}"


def too_many_digits(e: ValueError) -> str:
    """The one ValueError json.loads raises that is not a JSONDecodeError: an integer
    longer than CPython's bound on int(str) ("Integer string conversion length
    limitation", docs.python.org library/stdtypes.html#int-max-str-digits: 4300 digits by
    default), which said "Exceeds the limit (4300 digits) for integer string conversion
    ... use sys.set_int_max_str_digits()" with exit 1 (s28f, found beside newuser16 S3).
    Any other is named as it is."""
    limit = sys.get_int_max_str_digits()
    if f"({limit} digits)" in str(e):
        return f"an integer longer than {limit} digits (the longest that is read)"
    return f"malformed JSON: {e}"


STDIN = "<stdin>"  # how `-` is named in messages


def not_utf8(raw: bytes, start: int) -> str:
    """Bytes that are not UTF-8, as `replay` and `check-trace` both say it (newuser8 I7:
    one said "'utf-8' codec can't decode byte 0xff in position 0", the other this)."""
    return _not_utf8_at(raw[start], start)


def _not_utf8_at(byte: int, start: int) -> str:
    return f"not UTF-8 (byte {byte:#04x} at column {start + 1})"


# A byte that is not UTF-8, read with errors="surrogateescape": a lone surrogate
# U+DC80..U+DCFF (PEP 383), which UTF-8 text itself never holds.
_ESCAPED = re.compile("[\udc80-\udcff]")


def _escaped_byte(found: re.Match[str]) -> int:
    return ord(found.group()) - 0xDC00


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _whole_file_utf8(path: str, source: str) -> None:
    """VECTORS.md "Files": invalid UTF-8 makes the FILE unreadable (65): checked before any
    step is replayed, as the Node port's fatal decoder refuses such a file before its first
    answer (a check a line at a time printed the steps before the bad line). ReplayError
    names the first bad byte's line and column. A regular file only: a FIFO or a device
    cannot be read twice, and is checked a line at a time as it comes."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
    except OSError:
        return  # the replay's own open says why
    line, column = 1, 0  # column: bytes of the current line so far
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        while chunk := f.read(1 << 16):
            bad = _ESCAPED.search(chunk)
            head = chunk if bad is None else chunk[:bad.start()]
            ends = head.count("\n")
            line += ends
            column = _utf8_len(head[head.rfind("\n") + 1:]) + (0 if ends else column)
            if bad is not None:
                raise ReplayError(_not_utf8_at(_escaped_byte(bad), column), line=line,
                                  source=source)


def cannot_read(source: str, e: OSError) -> str:
    """A file that cannot be read (missing, a directory, no permission): one wording for
    `replay` and `check-trace` (newuser8 I7)."""
    return f"{source}: cannot read: {e.strerror or e}"


def _decoded(raw: str) -> str:
    """A line read with errors="surrogateescape", refused at its first byte that is not
    UTF-8 (`_ESCAPED`)."""
    bad = _ESCAPED.search(raw)
    if bad is not None:
        raise ReplayError(_not_utf8_at(_escaped_byte(bad), _utf8_len(raw[:bad.start()])))
    return raw


def bounded_lines(f: TextIO, source: str) -> Iterator[str]:
    """The lines of `f`, one at a time, each at most MAX_LINE characters: a longer line is
    bad input (ReplayError naming the source and the line) once MAX_LINE + 1 characters of
    it were read, not after the whole of it."""
    line_no = 0
    while True:
        raw = f.readline(MAX_LINE + 1)
        if not raw:
            return
        line_no += 1
        if len(raw) > MAX_LINE:
            raise ReplayError(f"line longer than {MAX_LINE} characters", line=line_no,
                              source=source)
        try:
            text = _decoded(raw)
        except ReplayError as e:
            raise e.located(line=line_no, source=source) from None
        yield text


class OutputError(Exception):
    """Writing a result failed (`epochgc replay FILE | head -1`: the reader went away).
    Not the input's fault, so never reported as bad input: `run` raises `error` itself."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def iter_replay(
    lines: Iterable[str],
    variant_name: str | None = None,
    *,
    source: str = "<input>",
    default: str = DEFAULT_VARIANT,
) -> Iterator[dict[str, Any]]:
    """Replay lines lazily, yielding one result per step. The variant is `variant_name`,
    else the file's `# variant: NAME` header, else `default`. Blank lines and `#` comments
    are skipped but counted; steps are numbered from 1. Raises ReplayError (located)."""
    replayer: Replayer | None = None
    header: str | None = None
    index = 0
    for line_no, raw in enumerate(lines, start=1):
        text = raw.strip()
        try:
            if not text or text.startswith("#"):
                m = _HEADER.fullmatch(text)
                if m is not None:
                    # A late or repeated header would silently not apply: refuse it.
                    if replayer is not None:
                        raise ReplayError("the variant header must come before the first step",
                                          field="variant")
                    if header is not None:
                        raise ReplayError("the variant header is given twice", field="variant")
                    header = m.group(1).strip()
                    resolve_variant(header)
                continue
            index += 1
            if replayer is None:
                replayer = Replayer(variant_name or header or default)
            try:
                obj = parse_step(text)
            except _Bad as e:
                raise ReplayError(e.message, field=e.field, step=index) from None
            result = replayer.step(obj, index)
        except ReplayError as e:
            raise e.located(line=line_no, source=source) from None
        yield result


def replay_lines(
    lines: Iterable[str], variant_name: str | None = None, *, source: str = "<input>",
    default: str = DEFAULT_VARIANT,
) -> list[dict[str, Any]]:
    return list(iter_replay(lines, variant_name, source=source, default=default))


def replay_file(path: str | Path, variant_name: str | None = None) -> list[dict[str, Any]]:
    """Replay a vector file with `variant_name`, else its header, else its file name."""
    default = variant_from_filename(path) or DEFAULT_VARIANT
    with open(path, encoding="utf-8") as f:
        return replay_lines(bounded_lines(f, str(path)), variant_name, source=str(path),
                            default=default)


def mismatched(results: Iterable[Mapping[str, Any]]) -> list[int]:
    """Step numbers whose expect disagreed."""
    return [r["step"] for r in results if "mismatch" in r]


class _WritesBeforeWaiting(io.RawIOBase):
    """stdin's bytes, read by `os.read`, with `before_wait()` called first whenever the read
    would wait (poll(2) finds nothing to read yet): `run` writes the result it holds for the
    next step then, so a driver that sends a step and waits for its result gets it, however
    the next bytes arrive (review41b B2; review41c C3: a blank line, a comment or part of a
    line arriving while a step was replayed made a "ready" test hold the result for ever)."""

    def __init__(self, fd: int, before_wait: Callable[[], None]) -> None:
        super().__init__()
        self._fd = fd
        self._before_wait = before_wait

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, b: Any) -> int:
        if not select.select([self._fd], [], [], 0)[0]:
            self._before_wait()
        data = os.read(self._fd, len(b))
        b[: len(data)] = data
        return len(data)


def _open(path: str, stdin: TextIO | None,
          before_wait: Callable[[], None]) -> AbstractContextManager[TextIO]:
    # surrogateescape: a byte that is not UTF-8 is named with its line by `bounded_lines`
    # (a strict decoder fails on a whole chunk, which says neither line nor column).
    # newline=None: universal newlines, as a file is opened (VECTORS.md "Files": a line
    # ends at \n, \r\n or a lone \r). Python opens stdin with newline="\n" on POSIX (i41y:
    # a lone \r ended a line of a file, not of stdin).
    if path == "-":
        f = stdin or sys.stdin
        if stdin is None and isinstance(f, io.TextIOWrapper):
            try:
                fd = f.fileno()
            except (OSError, ValueError, io.UnsupportedOperation):  # in memory: never waits
                f.reconfigure(errors="surrogateescape", newline=None)
                return nullcontext(f)
            raw = _WritesBeforeWaiting(fd, before_wait)  # never closes fd 0: the caller's
            return nullcontext(io.TextIOWrapper(io.BufferedReader(raw), encoding=f.encoding,
                                                errors="surrogateescape", newline=None))
        return nullcontext(f)  # stdin is the caller's to close
    # The caller's `with` closes it. A file never waits: its results are held to its end.
    return open(path, encoding="utf-8", errors="surrogateescape")


# Bad input is an error, said in the shape every `epochgc` command's error has (impl/
# errorline.py: `epochgc CMD: error: MESSAGE`; the model imports nothing of impl/, and
# tests/impl/test_error_lines.py holds the two to one shape); a disagreement is a verdict.
ERROR_HEAD = "epochgc replay: error: "


def _unguarded(_code: int) -> AbstractContextManager[object]:
    return nullcontext()


def run(
    path: str,
    variant_name: str | None,
    out: Callable[[str], None],
    err: Callable[[str], None],
    stdin: TextIO | None = None,
    finishing: Callable[[int], AbstractContextManager[object]] = _unguarded,
) -> int:
    """The `epochgc replay` command without click: print one compact JSON line per step,
    return the exit code (0 ok, 1 an expect disagreed, 65 bad input or no steps).

    The run's last output (the last step's result, then its summary or error) is written
    under `finishing(code)`, its code decided: the CLI's `signals.finishing` (newuser20 W3:
    a signal right after the last result ended a complete replay "interrupted"). Which
    step is the last is known only once the input has ended, so a result is held until
    the next step's is ready or the input has ended, and written before a read of stdin
    would wait (`_WritesBeforeWaiting`): from a stdin held open each result is out before
    replay waits for more, and a signal while it waits ends the run as interrupted, its
    results so far written."""
    source = STDIN if path == "-" else path
    default = DEFAULT_VARIANT if path == "-" else variant_from_filename(path) or DEFAULT_VARIANT
    bad: list[int] = []
    steps = 0
    held: list[str] = []  # the latest step's result, not written yet

    def write_held() -> None:
        try:
            for line in held:
                out(line)
        except OSError as e:
            raise OutputError(e) from e
        held.clear()

    def last(code: int, said: str | None = None) -> int:
        with finishing(code):
            for line in held:
                out(line)  # an OSError here is the caller's, as `OutputError`'s is
            if said is not None:
                err(said)
        return code

    try:
        if variant_name is not None:
            resolve_variant(variant_name)
        if path != "-":
            _whole_file_utf8(path, source)
        with _open(path, stdin, write_held) as f:
            for r in iter_replay(bounded_lines(f, source), variant_name, source=source,
                                 default=default):
                steps += 1
                if "mismatch" in r:
                    bad.append(r["step"])
                write_held()
                held.append(json.dumps(r, separators=(",", ":")))
    except OutputError as e:
        # The caller's to handle (`epochgc`'s group: a closed pipe ends quietly, exit 1).
        raise e.error from None
    except ReplayError as e:
        return last(EXIT_BAD_INPUT, f"{ERROR_HEAD}{e}")
    except OSError as e:
        return last(EXIT_BAD_INPUT, f"{ERROR_HEAD}{cannot_read(source, e)}")
    except UnicodeDecodeError as e:  # a stdin given as text that could not be decoded
        return last(EXIT_BAD_INPUT, f"{ERROR_HEAD}{source}: {not_utf8(e.object, e.start)}")
    if not steps:
        # Nothing was checked: an empty capture must not pass as a replay that agreed.
        return last(EXIT_BAD_INPUT,
                    f"{ERROR_HEAD}{source}: no steps (the file is empty or holds only comments)")
    if bad:
        listed = ", ".join(map(str, bad))
        return last(EXIT_MISMATCH, f"epochgc replay: {source}: {len(bad)} of {steps} steps "
                                   f"disagree with expect (steps {listed})")
    return last(EXIT_OK)
