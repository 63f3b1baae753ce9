"""DATA_DIR/acked.jsonl: `produce`'s append-only record of acknowledged batches (one JSON
object per line, an `AckedRun`), which `consume --verify` and the demo check against.

A torn write is treated as the Raft disk log treats one (impl/raft/disklog.py): tolerated
only where a crash leaves it, never taken for data. A last line without its newline is an
append cut short (a crash or a full disk before the fsync: the produce that wrote it never
said those records were recorded): the reader skips it with a warning naming FILE:LINE. Any
other line that is not a run is damage: refused naming FILE:LINE (newuser10 L8: a wrong-shape
line was a TypeError traceback, a bad one JSON's own text naming neither file nor line).

The next append does not glue its line to a torn tail (it did: both lines were lost): under
an exclusive flock(2) (every append takes it, so a tail without a newline is not another
produce's line being written) it ends the torn line with a newline and writes a marker line
`{"torn_line": N}`, so the torn line stays readable as what it is, line N, and the reader
still refuses an unexplained damaged line in the middle."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from epochgc.impl.cluster.payload import AckedRun

MANIFEST = "acked.jsonl"
TORN_KEY = "torn_line"


class ManifestError(ValueError):
    """A line of acked.jsonl that is neither a run nor a torn line: bad input data (65)."""


@dataclass(frozen=True)
class Manifest:
    runs: list[AckedRun]
    warnings: list[str]  # one per torn line skipped, naming FILE:LINE


def _field_ok(name: str, v: object) -> bool:
    if name in ("partition", "producer", "key"):
        return isinstance(v, str)
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _run(obj: object) -> AckedRun:
    """obj as an AckedRun, else ManifestError saying what is wrong (no file, no line)."""
    if not isinstance(obj, dict):
        raise ManifestError(f"not a JSON object (a {type(obj).__name__})")
    names = [f.name for f in fields(AckedRun)]
    missing = [n for n in names if n not in obj]
    if missing:
        raise ManifestError(f"missing field(s) {', '.join(map(repr, missing))}")
    for name in names:
        if not _field_ok(name, obj[name]):
            raise ManifestError(f"field {name!r} has a wrong value: {obj[name]!r:.40}")
    extra = sorted(set(obj) - set(names))
    if extra:
        raise ManifestError(f"unknown field {extra[0]!r}")
    return AckedRun(**obj)


def _parse(line: bytes) -> object:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(f"not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ManifestError(f"not valid JSON: {e}") from None


def _torn_mark(obj: object) -> int | None:
    if isinstance(obj, dict) and set(obj) == {TORN_KEY} and isinstance(obj[TORN_KEY], int):
        return int(obj[TORN_KEY])
    return None


def read_manifest(data_dir: str | os.PathLike[str]) -> Manifest:
    path = Path(data_dir) / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Manifest([], [])
    except OSError as e:
        raise ManifestError(f"{path}: {e.strerror or e}") from None
    lines = raw.split(b"\n")
    tail = lines.pop()  # b"" when the file ends in a newline, else a torn last line
    runs: list[AckedRun] = []
    warnings: list[str] = []
    pending: tuple[int, ManifestError] | None = None  # a damaged line: excused by a marker?
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = _parse(line)
        except ManifestError as e:
            if pending is not None:
                break
            pending = (n, e)
            continue
        mark = _torn_mark(obj)
        if pending is not None:
            if mark != pending[0]:
                break
            warnings.append(f"{path}:{pending[0]}: a torn line (an append cut short, marked "
                            f"by the next produce on line {n}): skipped")
            pending = None
            continue
        try:
            runs.append(_run(obj))
        except ManifestError as e:
            what = (f"a marker for a torn line {mark}, but that line is not damaged"
                    if mark is not None else str(e))
            raise ManifestError(f"{path}:{n}: {what}") from None
    if pending is not None:
        n, why = pending
        raise ManifestError(f"{path}:{n}: {why} (not at the file's end: not a torn append; "
                            "restore the file or remove the line)")
    if tail.strip():
        warnings.append(f"{path}:{len(lines) + 1}: a torn last line (no newline: an append "
                        "cut short by a crash or a full disk; its records were never reported "
                        "recorded): skipped")
    return Manifest(runs, warnings)


def unappendable(data_dir: str | os.PathLike[str]) -> str | None:
    """Why `append_manifest` could not append to DATA_DIR/acked.jsonl, else None: asked
    before `produce` sends anything (newuser18 U2: the records were sent and acknowledged,
    then "could not be recorded ...: Permission denied", two orphan records in two runs).
    Opened for append as `append_manifest` opens it (open(2) answers for this user, root's
    permissions too, unlike access(2)'s real-uid answer), not created: a missing file is
    made by the first append, and its directory (the cluster's, which holds cluster.json)
    is tried by creating and removing a file in it. A file that is not a regular file
    (a directory, /dev/full through a symlink) takes no record: refused too."""
    path = Path(data_dir) / MANIFEST
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        try:
            fd, probe = tempfile.mkstemp(prefix=".acked-probe-", dir=path.parent)
        except OSError as e:
            return f"{path}: cannot be created: {e.strerror or e}"
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
        return None
    except OSError as e:
        return f"{path}: cannot be opened for append: {e.strerror or e}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"{path}: is not a regular file (records cannot be appended to it)"
    finally:
        os.close(fd)
    return None


def append_manifest(data_dir: str | os.PathLike[str], runs: list[AckedRun]) -> str | None:
    """Append one line per run, durably (fsync before return: the caller then says they
    are recorded). Returns a warning naming a torn line found at the end, else None."""
    path = Path(data_dir) / MANIFEST
    body = b"".join(json.dumps(asdict(r), sort_keys=True).encode() + b"\n" for r in runs)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # appends one at a time: a torn tail is really torn
        said = None
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            n = _count_newlines(fd, size) + 1
            body = b"\n" + json.dumps({TORN_KEY: n}).encode() + b"\n" + body
            said = (f"{path}:{n}: a torn last line (an earlier append cut short): kept as it "
                    f"is and marked on line {n + 1}; consume --verify skips it")
        # write(2) may write less than asked (a file-size limit or a nearly full disk:
        # newuser16 S6, a torn line reported recorded); the rest is written, or fails.
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return said
    finally:
        os.close(fd)  # releases the lock


def _count_newlines(fd: int, size: int) -> int:
    count, off = 0, 0
    while off < size:
        chunk = os.pread(fd, 1 << 20, off)
        if not chunk:
            break
        count += chunk.count(b"\n")
        off += len(chunk)
    return count
