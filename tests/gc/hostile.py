"""Hostile stores for the GC job: generators, a full-tree fingerprint and the checks every
round must pass (used by tests/gc/test_hostile*.py).

A store is planned as a list of entries, then made on the real disk: well-formed keys,
keys with non-ASCII digits or letters in each segment, wrong widths, long names, directories
named like objects, symbolic links (to files and directories, inside and outside the root,
dangling), FIFOs, and unreadable files and directories (mode 0: only a non-root run sees
them unreadable, since root bypasses permission bits; the fingerprint then records them by
their metadata). The oracle is the model alone, over the entries that are regular files
reached without a link and whose key parses.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from epochgc.model.keys import gc_eligible

HOUR = 3600.0
GRACE = HOUR
M = 8
SHARDS = (1, 2, 3)
ROUNDS = "_cluster/gc/rounds/"


def e18(e: int) -> str:
    return f"{e:018d}"


_ARABIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
# Key shapes: the epoch and name in each; one foreign character in some segment.
BAD_SEGMENTS = {
    "arabic epoch": lambda p, e: f"{p:03d}/{e18(e).translate(_ARABIC)}/u",
    "arabic prefix": lambda p, e: f"{'٠٠' + '٠١٢٣'[p]}/{e18(e)}/u",
    "fullwidth digit": lambda p, e: f"{p:03d}/{e18(e)[:-1]}{chr(0xFF10 + e % 10)}/u",
    "letter in name": lambda p, e: f"{p:03d}/{e18(e)}/é",
    "digit in name": lambda p, e: f"{p:03d}/{e18(e)}/a٥",
    "short epoch": lambda p, e: f"{p:03d}/{e:017d}/u",
    "long epoch": lambda p, e: f"{p:03d}/{e:019d}/u",
    "long name": lambda p, e: f"{p:03d}/{e18(e)}/{'n' * 200}",
    "dot name": lambda p, e: f"{p:03d}/{e18(e)}/.hidden",
    "dash name": lambda p, e: f"{p:03d}/{e18(e)}/-x",
    "space name": lambda p, e: f"{p:03d}/{e18(e)}/a b",
    "deep": lambda p, e: f"{p:03d}/{e18(e)}/a/b",
    "junk epoch": lambda p, e: f"{p:03d}/{e18(e)}x/u",
}
LINKS = (
    "prefix->outside",
    "epoch->outside",
    "file->outside",
    "file->inside",
    "dangling",
    "prefix->inside",
    "cluster->outside",
)


@dataclass
class Plan:
    good: list[tuple[int, int, str, float]] = field(default_factory=list)  # shard, epoch, name, age
    bad: list[tuple[str, int, int]] = field(default_factory=list)  # shape, shard, epoch
    links: list[tuple[str, int, int]] = field(default_factory=list)  # kind, shard, epoch
    dir_like_object: list[tuple[int, int]] = field(default_factory=list)
    fifo: bool = False
    unreadable: bool = False
    unreadable_dir: bool = False


plans = st.builds(
    Plan,
    good=st.lists(
        st.tuples(
            st.sampled_from(SHARDS),
            st.integers(0, 12),
            st.sampled_from(["a", "b-1", "c.d", "Z_9"]),
            st.sampled_from([0.0, GRACE - 1, GRACE, 30 * HOUR]),
        ),
        max_size=12,
    ),
    bad=st.lists(
        st.tuples(
            st.sampled_from(sorted(BAD_SEGMENTS)), st.sampled_from(SHARDS), st.integers(0, 12)
        ),
        max_size=5,
    ),
    links=st.lists(
        st.tuples(st.sampled_from(LINKS), st.sampled_from(SHARDS), st.integers(0, 12)),
        max_size=4,
    ),
    dir_like_object=st.lists(st.tuples(st.sampled_from(SHARDS), st.integers(0, 12)), max_size=2),
    fifo=st.booleans(),
    unreadable=st.booleans(),
    unreadable_dir=st.booleans(),
)


def put(root: Path, rel: str, age: float, now: float, data: bytes = b"x") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    os.utime(p, (now - age, now - age))
    return p


def build(plan: Plan, root: Path, outside: Path, now: float) -> dict[str, float]:
    """Make the store; returns {key: age} of the regular files reached without a link (the
    only entries the oracle may ever call eligible)."""
    real: dict[str, float] = {}
    data = "level_zero/data/"
    for shard, epoch, name, age in plan.good:
        key = f"{data}{shard:03d}/{e18(epoch)}/{name}"
        put(root, key, age, now)
        real[key] = age
    for shape, shard, epoch in plan.bad:
        key = data + BAD_SEGMENTS[shape](shard, epoch)
        put(root, key, 30 * HOUR, now)
        real[key] = 30 * HOUR
    # The targets outside: a tree that looks like a shard full of old, eligible keys.
    for e in (1, 2):
        put(outside, f"{e18(e)}/victim", 30 * HOUR, now)
    put(outside, "file", 30 * HOUR, now)
    for i, (kind, shard, epoch) in enumerate(plan.links):
        shard_dir = root / f"{data}{shard:03d}"
        if kind == "prefix->outside":
            at = root / f"{data}{4 + i:03d}"  # shards 4..7: otherwise empty
            target: Path = outside
        elif kind == "prefix->inside":
            at, target = root / f"{data}{4 + i:03d}", shard_dir
        elif kind == "epoch->outside":
            at, target = shard_dir / e18(epoch), outside / e18(1)
        elif kind == "file->outside":
            at, target = shard_dir / e18(epoch) / f"l{i}", outside / "file"
        elif kind == "file->inside":
            first = f"{data}{shard:03d}/{e18(epoch)}/t{i}"
            put(root, first, 30 * HOUR, now)
            real[first] = 30 * HOUR
            at, target = shard_dir / e18(epoch) / f"l{i}", root / first
        elif kind == "dangling":
            at, target = shard_dir / e18(epoch) / f"l{i}", outside / "nowhere"
        else:  # cluster->outside: the deletion record must not be written through it
            (root / "_cluster").mkdir(parents=True, exist_ok=True)
            at, target = root / "_cluster/gc", outside
        if at.is_symlink() or at.exists():
            continue  # an earlier entry took the place (e.g. two links on one epoch)
        at.parent.mkdir(parents=True, exist_ok=True)
        at.symlink_to(target)
    for shard, epoch in plan.dir_like_object:
        # A directory named like a well-formed object, holding an old file.
        key = f"{data}{shard:03d}/{e18(epoch)}/dirobj"
        if not (root / key).exists():
            put(root, key + "/inner", 30 * HOUR, now)
            real[key + "/inner"] = 30 * HOUR
    if plan.fifo:
        p = root / f"{data}{SHARDS[0]:03d}/{e18(0)}/fifo"
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p)
    if plan.unreadable and plan.good:
        shard, epoch, name, _ = plan.good[0]
        os.chmod(root / f"{data}{shard:03d}/{e18(epoch)}/{name}", 0)
    locked = root / f"{data}{SHARDS[1]:03d}/{e18(1)}"
    if plan.unreadable_dir and not locked.is_symlink():
        key = f"{data}{SHARDS[1]:03d}/{e18(1)}/locked"
        put(root, key, 30 * HOUR, now)
        real[key] = 30 * HOUR
        os.chmod(locked, 0)  # a non-root listing cannot open it: the round must say so
    return real


def unreadable_dirs(root: Path) -> list[str]:
    """Directories under level_zero/data/ a listing cannot open as this user (keys + '/')."""
    data = root / "level_zero/data"
    out = []
    for dirpath, dirnames, _ in os.walk(data):
        for n in dirnames:
            p = Path(dirpath) / n
            if not p.is_symlink() and not os.access(p, os.R_OK | os.X_OK):
                out.append(str(p.relative_to(root)) + "/")
    return out


def planted_refusals(root: Path, m: int | None = None) -> set[str]:
    """The links, special files and directories below an epoch directory (issue 29: never
    descended) under level_zero/data/ (keys, without a trailing slash) that a listing of
    every shard up to epoch `m` must reach, so each must come back refused; with `m` None,
    all of them (nothing else may be refused). Found from the tree itself, not from the
    plan."""
    data = root / "level_zero/data"
    out = set()
    for dirpath, dirnames, filenames in os.walk(data):  # links are not followed
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            mode = os.lstat(p).st_mode
            rel = p.relative_to(data).parts
            if stat.S_ISREG(mode) or (stat.S_ISDIR(mode) and len(rel) < 3) or len(rel) > 3:
                continue  # (what is inside a directory below an epoch is never reached)
            if m is None or len(rel) == 1 or rel[1] < f"{m + 1:018d}":
                out.add(str(p.relative_to(root)))
    return out


def fingerprint(*roots: Path) -> dict[str, tuple[str, str]]:
    """Every entry under each root, links not followed: kind, and content hash, link target
    or mode."""
    out: dict[str, tuple[str, str]] = {}
    for root in roots:
        out[str(root)] = ("root", oct(os.lstat(root).st_mode))
        for dirpath, dirnames, filenames in os.walk(root):
            for n in dirnames + filenames:
                p = Path(dirpath) / n
                st_ = os.lstat(p)
                if stat.S_ISLNK(st_.st_mode):
                    out[str(p)] = ("link", os.readlink(p))
                elif stat.S_ISDIR(st_.st_mode):
                    out[str(p)] = ("dir", oct(st_.st_mode))
                elif stat.S_ISREG(st_.st_mode):
                    try:
                        digest = hashlib.sha256(p.read_bytes()).hexdigest()
                    except PermissionError:  # a non-root run: its metadata stands for it
                        digest = f"unreadable size={st_.st_size}"
                    out[str(p)] = ("file", f"{oct(st_.st_mode)} {digest} {st_.st_mtime}")
                else:
                    out[str(p)] = ("special", oct(st_.st_mode))
    return out


def check_round(
    before: dict[str, tuple[str, str]],
    after: dict[str, tuple[str, str]],
    root: Path,
    eligible: set[str],
) -> set[str]:
    """The round's changes are only: regular files among `eligible` removed, their emptied
    directories below a shard removed, and deletion records and journals added. Returns the
    keys gone."""
    data = str(root / "level_zero/data") + "/"
    gc_dir = str(root / "_cluster/gc")
    gone = set(before) - set(after)
    added = set(after) - set(before)
    # The deletion records and journals (issue 29), and the directories holding them.
    assert all(p == gc_dir or p.startswith(gc_dir + "/") for p in added), sorted(added)
    changed = {p for p in set(before) & set(after) if before[p] != after[p]}
    # Directory mtimes are not compared (the mode is); nothing that stayed may change.
    assert not changed, sorted(changed)
    gone_files = {p for p in gone if before[p][0] == "file"}
    gone_keys = {p[len(str(root)) + 1 :] for p in gone_files}
    assert gone_keys <= eligible, sorted(gone_keys - eligible)
    for p in gone - gone_files:
        assert before[p][0] == "dir" and p.startswith(data), p
    return gone_keys


def oracle(real: dict[str, float], m: int | None, grace: float) -> set[str]:
    return {k for k, age in real.items() if gc_eligible(k, age, m, grace).eligible}
