"""Reads the cluster's published reports and computes M with the model (one source of truth).

`_cluster/partitions.json` = {"revision": int, "partitions": ["topic/N", ...],
    "created": {"topic/N": int, ...}}
`_cluster/health/{node}.json` = {"node": str, "written_at": unix_seconds,
    "replicas": [{"partition": "topic/N", "term": int, "inactive_epoch": int | null,
                  "created": int}]}

`created` is a partition's creation revision: it names the incarnation (SPEC R35). The
snapshot's `created` has exactly one entry per listed partition, each at most `revision`
(a partition is created by a command at or before the snapshot). A replica entry whose
`created` differs from the snapshot's for its partition is a report of another incarnation
(one written before a deletion and re-creation, still fresh): it is ignored, so the new
incarnation is missing (F4, the round blocks) until its own replicas report. Both fields
are required: a document without them (written before incarnations were published) is
refused naming the field, never read as "any incarnation"; every writer in the repo
writes them.

Validation is strict (unknown fields too), because a report we misread could raise M.
Non-finite numbers (NaN, Infinity, 1e400), integers beyond the key space and names given
twice in one object (json keeps the last; another reader may keep the first) are refused in
every document, naming the file and the field.

A health file older than the maximum report age counts as absent: a stale observer can only
lower M, but an absent one blocks, which is the safe reading of "we do not know". A report's
age is the older of its own `written_at` and the store's timestamp of the file (mtime or
LastModified), so a node whose clock runs ahead cannot keep its report fresh.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.pools import submitter
from epochgc.impl.gc.text import cut, json_kind
from epochgc.impl.store.base import ObjectInfo, ObjectStore, StoreError
from epochgc.model.cluster import GcEpoch, Report, gc_epoch
from epochgc.model.errors import ModelError
from epochgc.model.keys import MAX_EPOCH

PARTITIONS_KEY = "_cluster/partitions.json"
HEALTH_PREFIX = "_cluster/health/"
_CLUSTER_PREFIX = "_cluster/"
assert HEALTH_PREFIX < PARTITIONS_KEY  # `_list_watched` lists from one to the other
_PARTITION = re.compile(r"[^/\s]+/[0-9]+")  # ASCII digits: `\d` also matches "٥"
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Revisions and epochs share one number line with the 18-digit epochs of keys (spec R20).
MAX_REVISION = MAX_EPOCH
MAX_TERM = 2**63 - 1
MAX_WRITTEN_AT = 253402300799.0  # 9999-12-31T23:59:59Z
# Issue 29: bounds on what a document may make the reader do. The published documents
# nest 3 levels deep; the largest (the snapshot) holds two entries per partition.
MAX_NESTING = 32
MAX_DOCUMENT_BYTES = 64 << 20
_MAX_INT_DIGITS = 40  # longer integer literals are refused before int() (which stops at 4300)


@dataclass(frozen=True)
class HealthReport:
    node: str
    written_at: float
    reports: tuple[Report, ...]
    created: tuple[int, ...] = ()  # creation revision of reports[i]'s incarnation
    stored_at: float | None = None  # the store's own timestamp of the file
    age_s: float = 0.0  # the older of the two, as the reader saw it


@dataclass(frozen=True)
class ClusterView:
    """What one read of the reports saw, and the M the model computes from it."""

    revision: int
    partitions: tuple[str, ...]
    fresh: tuple[HealthReport, ...]
    stale_nodes: tuple[str, ...] = field(default=())
    created: tuple[tuple[str, int], ...] = field(default=())  # the snapshot's incarnations
    report_keys: tuple[str, ...] = field(default=())  # every node report read, fresh or not

    def counted(self) -> list[Report]:
        """The fresh reports of the snapshot's incarnations (R35): a replica report naming
        another creation revision is not one of them. Reports of partitions outside the
        snapshot pass through; the model ignores them (R16)."""
        incarnation = dict(self.created)
        return [
            r
            for h in self.fresh
            for r, crev in zip(h.reports, h.created, strict=True)
            if incarnation.get(r.partition, crev) == crev
        ]

    def gc_epoch(self) -> GcEpoch:
        reports = self.counted()
        try:
            return gc_epoch(self.revision, list(self.partitions), reports)
        except ModelError as e:  # validated already; a model refusal is still a clear error
            raise ReportError(f"reports refused by the model: {e}") from e


# Report reads a GC task keeps in flight (`readers`): the snapshot and the report listing
# take one round trip together, then every report another one together, instead of one
# round trip each (issue 12: four latencies before a task's first delete).
REPORT_READERS = 8


def read_cluster_view(
    store: ObjectStore,
    now: float,
    max_report_age_s: float,
    readers: int = 1,
    expect: tuple[str, ...] = (),
    pool: Executor | None = None,
    seen: SeenDocs | None = None,
) -> ClusterView:
    """What the store's reports say now. `pool`: a long-lived pool of `readers` workers to
    borrow (`impl.gc.pools`). With `readers` > 1 the snapshot is read while the
    reports are listed and the reports named in `expect` (those an earlier read found) are
    read, `readers` at a time (the store must be thread-safe); a report the listing finds
    that was not expected is read after it. So a re-read whose node set did not change
    costs one round trip. Only the listing decides which reports count: an expected one it
    does not find is ignored, read or not. The view and the error raised (the first in
    snapshot, listing, report order) are the same as with 1 reader, which reads one after
    another in this thread.

    A report read before the listing answered is still a version of it from within this
    read: combined with the listing's timestamp its age is the older of the two versions'
    (`report_age`), never younger than either.

    `seen` (the in-round watch's, `watch.py`): one listing names the reports and the
    snapshot with their versions, and only those whose version changed since the previous
    look are read (`SeenDocs`), one after another."""
    if seen is not None:
        return _read_seen_view(store, now, max_report_age_s, seen)
    if readers <= 1:  # each read when its result is needed, as before
        return _read_view(store, now, max_report_age_s, functools.partial, ())
    with submitter(pool, readers, "epochgc-reports") as submit:

        def start(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
            return submit(fn, *args).result

        return _read_view(store, now, max_report_age_s, start, expect)


def _read_view(
    store: ObjectStore,
    now: float,
    max_report_age_s: float,
    start: Callable[..., Callable[[], Any]],
    expect: tuple[str, ...],
) -> ClusterView:
    snapshot = start(_read_json, store, PARTITIONS_KEY)
    listing = start(_list_health, store)
    early = {key: start(_read_json, store, key) for key in dict.fromkeys(expect)}
    revision, partitions, created = parse_partitions(snapshot(), PARTITIONS_KEY)
    try:
        infos, refused = listing()
    except StoreError as e:
        raise ReportError(f"cannot list {HEALTH_PREFIX}: {e}") from e
    nodes = _node_reports(infos, refused)
    docs = [early.get(info.key) or start(_read_json, store, info.key) for info in nodes]
    return _view(revision, partitions, created, now, max_report_age_s,
                 [(info, doc()) for info, doc in zip(nodes, docs, strict=True)])


def _view(revision: int, partitions: tuple[str, ...], created: dict[str, int], now: float,
          max_report_age_s: float, reports: list[tuple[ObjectInfo, Any]]) -> ClusterView:
    """The view from the snapshot and each listed report's document, fresh or stale."""
    fresh: list[HealthReport] = []
    stale: list[str] = []
    for info, doc in reports:
        report = parse_health(doc, info.key)
        age = report_age(now, report.written_at, info.mtime)
        report = replace(report, stored_at=info.mtime, age_s=age)
        if age > max_report_age_s:
            stale.append(report.node)
        else:
            fresh.append(report)
    keys = tuple(info.key for info, _ in reports)
    return ClusterView(
        revision, partitions, tuple(fresh), tuple(stale), tuple(created.items()), keys
    )


@dataclass
class SeenDocs:
    """The documents the watch read at its previous look, by key: (the version the listing
    gave, the parsed JSON). A look lists `_cluster/health/` and `_cluster/partitions.json`
    in one request and reads only what changed: a report a node has not rewritten since
    is the same bytes (S3's ETag, a local store's inode, mtime and size name one version),
    so reading it again told nothing new (issue 38, S3 at the limit: the snapshot and the
    report were 2 of the 4 requests of each look). A listing that gives no version, and
    anything that fails, reads as before; what the listing no longer shows is forgotten."""

    docs: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def read(self, store: ObjectStore, key: str, info: ObjectInfo | None) -> Any:
        version = info.version if info is not None else ""
        held = self.docs.get(key)
        if version and held is not None and held[0] == version:
            return held[1]
        doc = _read_json(store, key)
        if version:
            self.docs[key] = (version, doc)
        return doc


def _read_seen_view(store: ObjectStore, now: float, max_report_age_s: float,
                    seen: SeenDocs) -> ClusterView:
    """`_read_view` with one listing for the reports and the snapshot (`SeenDocs`)."""
    try:
        infos, refused = _list_watched(store)
    except StoreError as e:
        raise ReportError(f"cannot list {HEALTH_PREFIX}: {e}") from e
    by_key = {info.key: info for info in infos}
    seen.docs = {k: v for k, v in seen.docs.items() if k in by_key}
    # Absent from the listing: read it anyway (the read says why it is missing, as before).
    revision, partitions, created = parse_partitions(
        seen.read(store, PARTITIONS_KEY, by_key.get(PARTITIONS_KEY)), PARTITIONS_KEY)
    nodes = _node_reports(infos, refused)
    return _view(revision, partitions, created, now, max_report_age_s,
                 [(info, seen.read(store, info.key, info)) for info in nodes])


def _node_reports(infos: list[ObjectInfo], refused: list[tuple[str, str]]
                  ) -> list[ObjectInfo]:
    """The node reports among listed objects: `_cluster/health/<node>.json`. ReportError
    on an entry under `_cluster/health/` the listing refused."""
    for key, why in refused:
        if key.startswith(HEALTH_PREFIX):
            # A link (or special file) where a report belongs: never followed, and not
            # silently treated as an absent node either; the round stops and names it.
            raise ReportError(f"{key}: {why}; refusing to read reports through it")
    # Not a node report (e.g. a subdirectory's entries): never guessed at.
    return [
        info
        for info in infos
        if info.key.startswith(HEALTH_PREFIX)
        if "/" not in info.key[len(HEALTH_PREFIX) :] and info.key.endswith(".json")
    ]


def _list_watched(store: ObjectStore) -> tuple[list[ObjectInfo], list[tuple[str, str]]]:
    """Every key from `_cluster/health/` to `_cluster/partitions.json`, in one request while
    they fit a page: they are neighbours under `_cluster/` (`gc/` sorts before them)."""
    infos: list[ObjectInfo] = []
    refused: list[tuple[str, str]] = []
    # "_cluster/h": after `gc/` and before `health/` both in key order and in SeaweedFS's
    # component order (a start after "_cluster/health" skipped the directory's keys there)
    start = HEALTH_PREFIX[: len(_CLUSTER_PREFIX) + 1]
    while True:
        page = store.list_page(_CLUSTER_PREFIX, start, until=PARTITIONS_KEY)
        infos += [o for o in page.objects if o.key <= PARTITIONS_KEY]
        refused += [(k, why) for k, why in page.refused if k <= PARTITIONS_KEY]
        if not page.truncated or not page.objects or page.objects[-1].key >= PARTITIONS_KEY:
            return infos, refused
        start = page.objects[-1].key


def _list_health(store: ObjectStore) -> tuple[list[ObjectInfo], list[tuple[str, str]]]:
    infos: list[ObjectInfo] = []
    refused: list[tuple[str, str]] = []
    start: str | None = None
    while True:
        page = store.list_page(HEALTH_PREFIX, start)
        infos += page.objects
        refused += page.refused
        if not page.truncated or not page.objects:
            return infos, refused
        start = page.objects[-1].key


def report_age(now: float, written_at: float, stored_at: float) -> float:
    """The older of the writer's claim and the store's timestamp: one lying clock (the
    node's, ahead) cannot make a report look younger than the store saw it arrive."""
    return max(now - written_at, now - stored_at)


class _Huge(str):
    """An integer literal too long to be a real value; refused with its field's name."""


def _parse_int(text: str) -> int | _Huge:
    return _Huge(text) if len(text.lstrip("-")) > _MAX_INT_DIGITS else int(text)


class _Repeated(dict[str, Any]):
    """A JSON object with a name given twice: json keeps the last value, another reader may
    keep the first, and a NaN given first is never seen; refused with the name."""

    name = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    repeated: str | None = None
    for k, v in pairs:
        if k in doc and repeated is None:
            repeated = k
        doc[k] = v
    if repeated is None:
        return doc
    out = _Repeated(doc)
    out.name = repeated
    return out


def _read_json(store: ObjectStore, key: str) -> Any:
    try:
        raw = store.get(key, 0, MAX_DOCUMENT_BYTES + 1)  # never more than the limit
    except StoreError as e:
        raise ReportError(f"cannot read {key}: {e}") from e
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise ReportError(f"{key}: larger than {MAX_DOCUMENT_BYTES} bytes; refused")
    check_nesting(raw, key)
    try:
        # RFC 8259 section 8.1: JSON between systems MUST be UTF-8; json.loads would guess
        # UTF-16/32 from the first bytes and say "Expecting value" (newuser5 G7).
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReportError(f"{key}: not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        doc = json.loads(raw, parse_int=_parse_int, object_pairs_hook=_object)
    except ValueError as e:  # JSONDecodeError is a ValueError
        raise ReportError(f"{key}: not valid JSON: {e}") from e
    check_numbers(doc, key)
    return doc


# Issue 38 item 5: the nesting check was a regex substitution of every string over the
# whole document, `"(?:[^"\\]|\\.)*"`: on a document cut off inside a string of escaped
# quotes every quote starts a match that runs to the end and fails, so it was quadratic
# (8 KB 0.7 s, 120 KB > 45 s, 1 MB hours), in one C call that held off Ctrl-C and
# `--deadline`. Now one pass, a two-state machine (outside a string / inside one) whose
# every step consumes the bytes it examined and never looks back: outside, the run up to
# the next quote (its brackets summed in C); inside, the rest of the string in one
# possessive match (`*+`, `++`: Python 3.11's no-backtracking quantifiers; the two
# branches start with disjoint bytes). Each byte is examined once; documents are at most
# MAX_DOCUMENT_BYTES, which bounds the time (on this project's machines 64 MiB of
# brackets ~3 s, of short strings ~10 s); between steps Python runs signal handlers.
_STRING_REST = re.compile(rb'(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_DELTA = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))


@dataclass(frozen=True)
class NestingScan:
    deepest: int  # the deepest bracket nesting seen (the scan stops once past the limit)
    examined: int  # bytes consumed: the whole document unless it stopped early
    steps: int  # loop turns: one per string (and one more), at most one per byte


def scan_nesting(raw: bytes, limit: int = MAX_NESTING) -> NestingScan:
    """The bracket nesting of a JSON(-like) document outside its strings, stopping once it
    exceeds `limit`. A string left open (a truncated document) runs to the end, as a JSON
    reader would read it until it fails there."""
    depth = deepest = steps = 0
    pos, end = 0, len(raw)
    while pos < end:
        steps += 1
        quote = raw.find(b'"', pos)
        stop = end if quote < 0 else quote
        brackets = raw[pos:stop].translate(None, _NOT_BRACKET)
        if brackets:
            deepest = max(deepest, max(accumulate(map(_DELTA.__getitem__, brackets),
                                                  initial=depth)))
            depth += (brackets.count(b"[") + brackets.count(b"{")) * 2 - len(brackets)
            if deepest > limit:
                return NestingScan(deepest, stop, steps)
        if quote < 0:
            pos = end
            break
        s = _STRING_REST.match(raw, quote + 1)  # through the closing quote
        pos = end if s is None else s.end()
    return NestingScan(deepest, pos, steps)


def check_nesting(raw: bytes, key: str) -> None:
    """Refuse a document nested deeper than MAX_NESTING, naming the file, before any
    recursive reader sees it (json and `check_numbers` would raise RecursionError). Time
    linear in the document's size (`scan_nesting`)."""
    if scan_nesting(raw).deepest > MAX_NESTING:
        raise ReportError(f"{key}: nested deeper than {MAX_NESTING} levels; refused")


# Review rev38z12 finding 1: JSON allows an integer of any length (RFC 8259 section 6:
# "This specification allows implementations to set limits on the range and precision of
# numbers accepted"), and Python's json reads a 401-digit one as an int that `float()` and
# `math.isfinite` refuse with OverflowError, an ArithmeticError that every parser's
# `except ValueError` let escape: one such stored number failed every round, `show` and
# `reset`. No stored GC document holds an integer past this bound (times are seconds since
# 1970, counts, terms and epochs are below 2**63, the round sequence's numbers have 20
# digits: `sequence.LAST`), so one past it is damage, refused here, where
# every stored document is parsed (`load_bounded`), so no parser sees it. A float cannot do
# this: json reads 1e400 as inf, which the parsers refuse field by field (`isfinite`), as
# they do NaN and Infinity, so that one damaged field of START does not cost its bound
# (rev38z10 finding 1); the strict loader (`admin.load_strict`) refuses those too.
MAX_STORED_INT = 10**20 - 1  # every float holds it (as a near value): no OverflowError
_MAX_STORED_INT_DIGITS = len(str(MAX_STORED_INT))


def _stored_int(text: str) -> int:
    # Length first: int() of a 5000-digit literal is itself refused (ValueError, Python's
    # 4300-digit limit) and quadratic below it.
    if len(text.lstrip("-")) <= _MAX_STORED_INT_DIGITS:
        v = int(text)
        if -MAX_STORED_INT <= v <= MAX_STORED_INT:
            return v
    raise ValueError(f"integer {cut(text, 24)} is out of range (more than 20 digits)")


def finite_float(text: str) -> float:
    """A `parse_float` hook refusing what reads as infinite (1e400, a huge exponent)."""
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {cut(text, 24)} is out of range")
    return v


def load_bounded(raw: bytes, key: str, **hooks: Any) -> Any:
    """The JSON document `raw` (object `key`): ReportError if it nests deeper than
    MAX_NESTING, ValueError if it is not JSON or holds an integer of more than 20 digits
    (`MAX_STORED_INT`). The one
    loader of the GC's stored documents (lease, admin state, journal entries, START/END,
    records, sequence markers, probes): every number it returns converts to float without
    raising. `hooks` are further `json.loads` arguments (the strict loader's)."""
    check_nesting(raw, key)  # json would raise RecursionError past ~1000 deep
    return json.loads(raw, parse_int=_stored_int, **hooks)


def check_numbers(doc: Any, key: str, path: str = "") -> None:
    """Refuse NaN, Infinity, 1e400 (which Python's json reads as inf), integer literals of
    more than 40 digits and names given twice in one object anywhere in a document, naming
    the field."""
    if isinstance(doc, _Repeated):
        name = f"{path}.{doc.name}" if path else doc.name
        raise ReportError(f"{key}: field {name!r} is given twice in one object")
    if isinstance(doc, dict):
        for k, v in doc.items():
            check_numbers(v, key, f"{path}.{k}" if path else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            check_numbers(v, key, f"{path}[{i}]")
    elif isinstance(doc, _Huge):
        raise ReportError(f"{key}: field {path!r} is an integer of {len(doc)} digits")
    elif isinstance(doc, float) and not math.isfinite(doc):
        raise ReportError(f"{key}: field {path!r} must be a finite number, got {doc!r}")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fields(doc: object, where: str, expected: set[str]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ReportError(f"{where}: must be a JSON object, got {json_kind(doc)}")
    missing = sorted(expected - doc.keys())
    extra = sorted(doc.keys() - expected)
    if missing:
        raise ReportError(f"{where}: missing field {missing[0]!r}")
    if extra:
        raise ReportError(f"{where}: unknown field {extra[0]!r}")
    return doc


def parse_partitions(doc: object, key: str) -> tuple[int, tuple[str, ...], dict[str, int]]:
    """(revision, partitions, creation revision by partition)."""
    if isinstance(doc, dict) and "created" not in doc and {"revision", "partitions"} <= doc.keys():
        raise ReportError(
            f"{key}: missing field 'created' (each partition's creation revision, R35): "
            "written by a publisher that predates incarnations; republish the partition table"
        )
    d = _fields(doc, key, {"revision", "partitions", "created"})
    revision = d["revision"]
    if not _is_int(revision) or not 0 <= revision <= MAX_REVISION:
        raise ReportError(
            f"{key}: field 'revision' must be an integer in 0..{MAX_REVISION}, got {revision!r}"
        )
    parts = d["partitions"]
    if not isinstance(parts, list):
        raise ReportError(f"{key}: field 'partitions' must be a list")
    seen: set[str] = set()
    for i, p in enumerate(parts):
        if not isinstance(p, str) or not _PARTITION.fullmatch(p):
            raise ReportError(f"{key}: partitions[{i}] must be 'topic/N', got {p!r}")
        if p in seen:
            raise ReportError(f"{key}: partitions[{i}] {p!r} is listed twice")
        seen.add(p)
    created = d["created"]
    if not isinstance(created, dict):
        raise ReportError(f"{key}: field 'created' must be an object of creation revisions")
    for p in parts:
        if p not in created:
            raise ReportError(f"{key}: field 'created' has no entry for partition {p!r}")
    for p, crev in created.items():
        if p not in seen:
            raise ReportError(f"{key}: field 'created' names {p!r}, which is not listed")
        if not _is_int(crev) or not 0 <= crev <= revision:
            raise ReportError(
                f"{key}: field 'created[{p!r}]' must be an integer in 0..{revision} (the "
                f"snapshot revision), got {crev!r}"
            )
    return revision, tuple(parts), dict(created)


def parse_health(doc: object, key: str) -> HealthReport:
    d = _fields(doc, key, {"node", "written_at", "replicas"})
    node = d["node"]
    if not isinstance(node, str) or not _NODE.fullmatch(node):
        raise ReportError(f"{key}: field 'node' must be a node name, got {node!r}")
    if key != f"{HEALTH_PREFIX}{node}.json":
        raise ReportError(f"{key}: field 'node' is {node!r}, which does not match the file name")
    written = d["written_at"]
    if (
        isinstance(written, bool)
        or not isinstance(written, int | float)
        or not 0 <= written <= MAX_WRITTEN_AT
    ):
        raise ReportError(f"{key}: field 'written_at' must be unix seconds, got {written!r}")
    replicas = d["replicas"]
    if not isinstance(replicas, list):
        raise ReportError(f"{key}: field 'replicas' must be a list")
    reports: list[Report] = []
    incarnations: list[int] = []
    seen: set[str] = set()
    for i, r in enumerate(replicas):
        where = f"{key}: replicas[{i}]"
        rd = _fields(r, where, {"partition", "term", "inactive_epoch", "created"})
        p, term, epoch, crev = rd["partition"], rd["term"], rd["inactive_epoch"], rd["created"]
        if not isinstance(p, str) or not _PARTITION.fullmatch(p):
            raise ReportError(f"{where}: field 'partition' must be 'topic/N', got {p!r}")
        if p in seen:
            raise ReportError(f"{where}: partition {p!r} is reported twice by this node")
        seen.add(p)
        if not _is_int(term) or not 0 <= term <= MAX_TERM:
            raise ReportError(
                f"{where}: field 'term' must be an integer in 0..{MAX_TERM}, got {term!r}"
            )
        # M(p) = min_epoch_lower_bound - 1, so -1 is a real value (lower bound 0).
        if epoch is not None and (not _is_int(epoch) or not -1 <= epoch <= MAX_EPOCH):
            raise ReportError(
                f"{where}: field 'inactive_epoch' must be an integer in -1..{MAX_EPOCH} or "
                f"null, got {epoch!r}"
            )
        if not _is_int(crev) or not 0 <= crev <= MAX_REVISION:
            raise ReportError(
                f"{where}: field 'created' must be an integer in 0..{MAX_REVISION}, got {crev!r}"
            )
        reports.append(Report(p, node, epoch))
        incarnations.append(crev)
    return HealthReport(node, float(written), tuple(reports), tuple(incarnations))
