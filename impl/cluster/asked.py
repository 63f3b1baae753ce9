"""The partition counts `topic create` asked for, kept while a create's outcome is not known
(issue 41, newuser11 M11).

The controller leader creates a topic's partitions one controller entry each
(`Broker.create_topic`); a node stopped or killed in between leaves the topic with part of
its partitions, and nothing resumes the create after a restart. The controller's table
knows partitions, not what a create asked for, so the command keeps it here:
`DATA_DIR/topics-asked.json` maps a topic to the count asked (and the asking command's pid
and start time), written before the request is sent and removed once its outcome is known
(answered, refused, or never sent). What remains is a create whose outcome nobody saw (a
signal, no answer in time, a crash of the command); `cluster status` compares it with the
partitions the nodes show and flags a topic short of its count (`short_topics`). A create
still running shows as short too: it is.

Several commands may run at once (newuser16 S4: six `topic create` in parallel shared the
fixed name `topics-asked.json.tmp`; one renamed another's, which failed with ENOENT after
its topic was created, or before its request was sent, leaving an entry for a topic never
made). So every change is a read-modify-write under an exclusive flock(2) of
`topics-asked.json.lock` (flock(2): the lock belongs to the open file description, so two
processes, or two opens in one, exclude each other), and the new file is written under a
unique name (mkstemp in the directory) and renamed over the old one (rename(2): atomic
within a file system). A damaged file is read as empty: it only adds a warning to `cluster
status`, never changes a partition.

A delete is kept here too, and one command at a time per topic (issue 41, newuser17 T1, T7):
a `topic delete` run while a `topic create` of the same name was still proposing its
partitions one by one deleted the ones made so far; the create went on, and both exited 0
with a topic of 10 of its 12 partitions (r4/2..r4/11) left; two deletes at once both printed
the same deletions. So `begin` notes the command's entry (create or delete, with its pid)
under the lock, and refuses while the entry of another live command of that topic is there
(`Busy`); an entry whose command has ended is replaced. A delete entry left (the command
cut short) is flagged by `cluster status` while partitions of the topic remain.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from epochgc.impl import proctree
from epochgc.impl.controller.topics import topic_names

FILE = "topics-asked.json"
LOCK = FILE + ".lock"


@dataclass(frozen=True)
class Asked:
    """One create (or delete) whose outcome is not known: the count asked, and which command asked
    (pid and its start time; None for an entry written before they were kept)."""
    partitions: int
    pid: int | None = None
    started: int | None = None
    op: str = "create"  # or "delete" (partitions 0: a delete asks for none)

    def running(self) -> bool:
        """The asking command still runs (the same process: pid and start time)."""
        return self.pid is not None and proctree.started(self.pid) == self.started


def _path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / FILE


def _entry(v: object) -> Asked | None:
    if type(v) is int:  # the older form: the count alone
        return Asked(v) if v > 0 else None
    if not isinstance(v, dict):
        return None
    n, pid, started = v.get("partitions"), v.get("pid"), v.get("started")
    op = v.get("op", "create")
    if op not in ("create", "delete") or type(n) is not int or n < (op == "create"):
        return None
    return Asked(n, pid if type(pid) is int else None,
                 started if type(started) is int else None, op)


class Busy(RuntimeError):
    """Another live command of the same topic holds its entry: nothing was sent."""

    def __init__(self, topic: str, mine: str, theirs: Asked) -> None:
        self.topic, self.mine, self.theirs = topic, mine, theirs
        if theirs.op == mine:
            super().__init__(f"topic {topic!r} is being {mine}d by another command "
                             f"(`epochgc topic {mine}`, pid {theirs.pid}): nothing was done "
                             f"by this one")
        else:
            super().__init__(f"a {theirs.op} of {topic!r} is running (pid {theirs.pid}); "
                             f"run the {mine} after it (nothing was done)")


def entries(data_dir: str | os.PathLike[str]) -> dict[str, Asked]:
    """Topic -> the create whose outcome is not known."""
    return {t: a for t, a in everything(data_dir).items() if a.op == "create"}


def deletes(data_dir: str | os.PathLike[str]) -> dict[str, Asked]:
    """Topic -> the delete whose outcome is not known (cut short, or still running)."""
    return {t: a for t, a in everything(data_dir).items() if a.op == "delete"}


def everything(data_dir: str | os.PathLike[str]) -> dict[str, Asked]:
    """Topic -> the create or delete whose outcome is not known."""
    try:
        doc = json.loads(_path(data_dir).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    found = {t: _entry(v) for t, v in doc.items() if isinstance(t, str)}
    return {t: a for t, a in found.items() if a is not None}


def asked(data_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Topic -> partitions asked, for the creates whose outcome is not known."""
    return {t: a.partitions for t, a in entries(data_dir).items()}


@contextlib.contextmanager
def _locked(data_dir: str | os.PathLike[str]) -> Iterator[None]:
    """The ledger's lock, waited for (a change holds it for one small file's write)."""
    fd = os.open(Path(data_dir) / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write(data_dir: str | os.PathLike[str], doc: dict[str, Asked]) -> None:
    """Under the lock: `doc` replaces the ledger whole (or the ledger is removed)."""
    path = _path(data_dir)
    if not doc:
        path.unlink(missing_ok=True)
        return
    body = json.dumps({t: {"partitions": a.partitions, "pid": a.pid, "started": a.started,
                           "op": a.op}
                       for t, a in doc.items()}, indent=1, sort_keys=True).encode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{FILE}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)  # the rename itself durable
    finally:
        os.close(dfd)


def begin(data_dir: str | os.PathLike[str], topic: str, op: str, partitions: int = 0) -> None:
    """Before a create or delete of `topic` is sent by this process: its entry written,
    or `Busy` raised (nothing written) if another live command of `topic` holds one. The
    look and the write are one step under the lock: of two commands at once, one sees the
    other's entry."""
    me = Asked(partitions, os.getpid(), proctree.started(os.getpid()), op)
    with _locked(data_dir):
        doc = everything(data_dir)
        held = doc.get(topic)
        if held is not None and held.pid != me.pid and held.running():
            raise Busy(topic, op, held)
        _write(data_dir, {**doc, topic: me})


def settle(data_dir: str | os.PathLike[str], topic: str) -> None:
    """`topic`'s create (or delete) had an outcome the command saw: forgotten (unless the
    entry is another live command's)."""
    if topic not in everything(data_dir):
        return  # nothing to change: no lock, no file made
    with _locked(data_dir):
        doc = everything(data_dir)
        held = doc.get(topic)
        if held is not None and (held.pid == os.getpid() or not held.running()):
            del doc[topic]
            _write(data_dir, doc)


def short_topics(asked_for: dict[str, int], partitions: Iterable[str]) -> dict[str, int]:
    """Topic -> partitions it has, for each topic with fewer than its create asked for."""
    names = set(partitions)  # each node shows each partition it holds: counted once
    have = {t: len(topic_names(names, t)) for t in asked_for}
    return {t: n for t, n in have.items() if n < asked_for[t]}


def never_made(short: dict[str, int], ledger: dict[str, Asked]) -> set[str]:
    """The short topics of which no partition exists and whose asking command has ended:
    a create that was never applied, most likely (newuser16 S4: such an entry made `cluster
    status` exit 1 for good). Not removed (its request may have been sent: were it applied
    late, the topic is flagged again), but not counted against the cluster's health."""
    return {t for t, n in short.items()
            if n == 0 and t in ledger and not ledger[t].running()}


def cut_deletes(ledger: dict[str, Asked], partitions: Iterable[str]) -> dict[str, int]:
    """Topic -> partitions it still has, for each topic whose `topic delete` entry is left
    (its outcome not seen: cut short, or still running) while partitions of it remain
    (newuser17 T2: a delete cut by `cluster stop` left 248 of 300, flagged nowhere)."""
    names = set(partitions)
    have = {t: len(topic_names(names, t)) for t, a in ledger.items() if a.op == "delete"}
    return {t: n for t, n in have.items() if n > 0}


def holes(partitions: Iterable[str], deleted: Iterable[str]) -> dict[str, list[str]]:
    """Topic -> its deleted partitions numbered below one of it that exists, for each topic
    with such holes (newuser17 T1: a delete run during a create left r4/2..r4/11 of 12). A
    name both deleted and existing (a topic deleted, then created again) is no hole; nor is
    a number never created (`cluster start --partitions t/0,t/5`): only deleted ones are."""
    live = set(partitions)
    top: dict[str, int] = {}  # topic -> its highest partition number that exists
    for name in live:
        topic, _, num = name.rpartition("/")
        if num.isdigit():
            top[topic] = max(top.get(topic, -1), int(num))
    out: dict[str, list[str]] = {}
    for name in set(deleted) - live:
        topic, _, num = name.rpartition("/")
        if num.isdigit() and int(num) < top.get(topic, -1):
            out.setdefault(topic, []).append(name)
    return {t: topic_names(ns, t) for t, ns in out.items()}
