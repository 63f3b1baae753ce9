"""Recovery of the disk log, a part of DiskStorage (mixin `DiskRecovery`): read every file as
the device holds it, validate every record, binding and segment, plan, then apply the plan
(cut a torn tail, move proven-redundant segments and leftovers into quarantine/) and make
what was recovered durable. See impl/raft/disklog.py's docstring for the rules."""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from epochgc.impl.raft.atomicfile import atomic_write
from epochgc.impl.raft.codec import CodecError, decode_entry, decode_snapshot
from epochgc.impl.raft.diskformat import (
    _MAGICS,
    _MARK,
    _OWN_TMP,
    _REC,
    _SNAPHEAD,
    _SNAPHEAD3,
    _START,
    _START3,
    _STATE,
    _TRAILER,
    FORMAT,
    FORMAT4,
    KIND_ENTRY,
    KIND_START,
    KIND_STATE,
    MAGIC,
    MAX_RECORD,
    OLD_FORMAT,
    QUARANTINE,
    SNAP_FORMAT,
    START_FRESH,
    _Rec,
    _Seg,
    _torn,
)
from epochgc.impl.raft.fileio import EntryKind, FileIO, make_dirs_durable
from epochgc.impl.raft.messages import Entry, HardState, InitialState, Snapshot
from epochgc.impl.raft.storage import StorageCorruption, StorageFailed


@dataclass
class _Plan:
    """What recovery will change on the disk once everything is validated."""

    truncate: list[tuple[str, int]] = field(default_factory=list)
    unlink_empty: list[str] = field(default_factory=list)  # a last segment that holds nothing
    quarantine: list[str] = field(default_factory=list)  # proven redundant: moved aside
    tmp: list[str] = field(default_factory=list)  # interrupted atomic writes


class DiskState:
    """The DiskStorage state that recovery and the upgrade both use (declarations only:
    DiskStorage defines it; nothing here exists at run time)."""

    if TYPE_CHECKING:
        fs: FileIO
        dir: str
        group: int
        _hs: HardState
        _snap: Snapshot
        _install_seq: int
        _install_tag: int
        _segments: list[tuple[int, int]]
        _fd: int
        _size: int
        _crc: int


class DiskRecovery(DiskState):
    """Recovery: DiskStorage.load and what it calls (see the module docstring)."""

    # The rest of the DiskStorage state and the writer methods these read (declarations
    # only: DiskStorage defines them).
    if TYPE_CHECKING:
        _loaded: InitialState | None
        _dir_dirty: bool
        _last: tuple[int, int]
        _need_fresh: bool

        def _check(self) -> None: ...
        def _reset(self) -> None: ...
        def _io(self, what: str, path: str, exc: OSError) -> StorageFailed: ...
        def _path(self, name: str) -> str: ...
        def _seg_path(self, seq: int) -> str: ...
        def _upgraded(self, segs: list[_Seg]) -> bool: ...
        def _upgrade(
            self, old: list[_Seg], leftover: list[_Seg], log: list[Entry], plan: _Plan
        ) -> None: ...

    # ---- recovery ------------------------------------------------------------------------

    def load(self) -> InitialState:
        """Recover the durable state (Storage.load's contract); refuses (StorageCorruption,
        naming file and offset) anything that is not a crash's torn tail. Reads every file as
        the device holds it (fsync, then past the page cache). Changes the directory only
        after it has validated everything: cuts a torn tail, moves proven-redundant segments
        aside, rewrites a format-3 log into format 5; then makes what it returns durable.
        The caller may call it again (the same state) and must not write before it."""
        if self._loaded is not None:
            return self._loaded
        self._check()
        self._reset()  # nothing of an earlier, refused attempt carries over
        names = self.fs.listdir(self.dir)
        if "hardstate" in names:
            raise StorageCorruption(
                self._path("hardstate"),
                0,
                f"a Raft log of on-disk format 2, which this version (format {FORMAT}) "
                "refuses: its snapshot markers cannot be replayed safely; rebuild this node "
                "from a peer",
            )
        for n in names:
            if n == "snapshot" or n.endswith(".seg") or _OWN_TMP.fullmatch(n):
                # Before any open: a FIFO would block for ever, a symlink would make recovery
                # cut and append to a file outside the directory.
                kind = self.fs.entry_kind(self._path(n))
                if kind is not EntryKind.REGULAR:
                    raise StorageCorruption(
                        self._path(n),
                        0,
                        f"a {kind.value} where this log keeps a regular file: refusing to "
                        "open or change it",
                    )
        plan = _Plan(tmp=[self._path(n) for n in names if _OWN_TMP.fullmatch(n)])
        snap_fmt = self._read_snapshot_file()
        segs = [self._read_seg(self._seq_of(n)) for n in sorted(names) if n.endswith(".seg")]
        segs.sort(key=lambda g: g.seq)
        old = [g for g in segs if g.fmt == OLD_FORMAT]
        upgrade = snap_fmt == OLD_FORMAT or (snap_fmt is None and bool(old))
        leftover: list[_Seg] = []
        if upgrade:
            # Within an upgrade, a segment is format 4 only if it has the whole format-4 magic
            # at the number the upgrade writes (above every other segment): an interrupted
            # upgrade's output (its snapshot file, the switch, never landed), compared with
            # the expected output below. Anything else is format 3, a torn last segment
            # (empty, part of the magic, zeros: a crash right after a cut) included.
            leftover = [g for g in segs if g.data[: len(MAGIC)] in _MAGICS]
            out = {g.seq for g in leftover}
            old = [g for g in segs if g.seq not in out]
            for g in old:
                g.fmt = OLD_FORMAT
            top = max([g.seq for g in old] + [self._install_seq])
            for g in leftover:
                if g.seq != top + 1:
                    raise StorageCorruption(
                        g.path, 0, "a format-4 segment in a format-3 log that is not its upgrade"
                    )
            segs = old
        else:
            # After an upgrade's switch, its format-3 segments (a torn last one without a
            # whole magic included) may still wait to be moved aside.
            upgraded = self._upgraded(segs)
            for g in segs:
                if g.fmt == OLD_FORMAT or (
                    upgraded and g.seq < self._install_seq and g.data[:8] not in _MAGICS
                ):
                    if g.seq >= self._install_seq:
                        raise StorageCorruption(
                            g.path, 7, "a format-3 segment after the format-4 log's install"
                        )
                    g.fmt = OLD_FORMAT
                    plan.quarantine.append(g.path)  # left over from a finished upgrade
            old = [g for g in segs if g.fmt == OLD_FORMAT]
            segs = [g for g in segs if g.fmt != OLD_FORMAT]
        run, stale = self._split_at_gap(segs)
        self._check_redundant(stale, run)
        log = self._replay(run, plan)
        plan.quarantine += [g.path for g in stale]
        if upgrade:
            self._upgrade(old, leftover, log, plan)
        else:
            self._apply(plan)
            self._open_live(run, plan)
            self._make_recovered_durable(run, plan)
        self._last = (log[-1].index, log[-1].term) if log else (self._snap.index, self._snap.term)
        self._loaded = InitialState(self._hs, self._snap, tuple(log), origin=self.dir)
        return self._loaded

    def _read_snapshot_file(self) -> int | None:
        """Read the snapshot file (if any); returns its format."""
        path = self._path("snapshot")
        if not self.fs.exists(path):
            return None
        raw = self._read_durable(path)
        if len(raw) < 4 + _SNAPHEAD3.size:
            raise StorageCorruption(path, 0, "file shorter than its header")
        (crc,) = struct.unpack_from(">I", raw, 0)
        if zlib.crc32(raw[4:]) != crc:
            raise StorageCorruption(path, 0, "checksum mismatch")
        fmt = raw[4]
        if fmt == OLD_FORMAT:
            _, install_seq = _SNAPHEAD3.unpack_from(raw, 4)
            body_at, group, tag = 4 + _SNAPHEAD3.size, self.group, 0
        elif fmt == SNAP_FORMAT and len(raw) >= 4 + _SNAPHEAD.size:
            _, group, install_seq, tag = _SNAPHEAD.unpack_from(raw, 4)
            body_at = 4 + _SNAPHEAD.size
        else:
            raise StorageCorruption(
                path,
                4,
                f"snapshot file of on-disk format {fmt}: format 2 or older are refused (this "
                f"version reads {OLD_FORMAT} and {SNAP_FORMAT}); rebuild this node from a peer",
            )
        if group != self.group:
            raise StorageCorruption(
                path, 5, f"snapshot file of group {group}, in the directory of group {self.group}"
            )
        try:
            self._snap = decode_snapshot(raw[body_at:])
        except CodecError as e:
            raise StorageCorruption(path, body_at, str(e)) from e
        self._install_seq = install_seq
        self._install_tag = tag
        return fmt

    def _read_durable(self, path: str) -> bytes:
        """A file as the device holds it (FileIO.read_durable), never the page cache's copy:
        after a failed fsync Linux keeps the unwritten pages cached and marked clean, so a
        process restarted without a reboot would read entries the disk never got, and a
        second fsync succeeds (issue 37 item 1). An error here (EIO reported to the fresh
        descriptor: a write-back failed and nobody saw it yet) stops the node."""
        try:
            return self.fs.read_durable(path)
        except OSError as e:
            raise self._io("reading what the disk holds", path, e) from e

    def _seq_of(self, name: str) -> int:
        """The sequence number a segment file's name gives; refuses any other .seg name."""
        stem = name[:-4]
        if not stem.isdigit() or name != f"{int(stem):016d}.seg":
            raise StorageCorruption(
                self._path(name), 0, "not a segment name of this log (16 digits, .seg)"
            )
        return int(stem)

    def _read_seg(self, seq: int) -> _Seg:
        path = self._seg_path(seq)
        data = self._read_durable(path)
        fmt = FORMAT
        if data[:7] == MAGIC[:7] and len(data) >= 8:
            fmt = data[7]
            if fmt not in (FORMAT, FORMAT4, OLD_FORMAT):
                raise StorageCorruption(
                    path,
                    7,
                    f"segment of on-disk format {fmt}: format 2 or older are refused (this "
                    f"version reads {OLD_FORMAT} to {FORMAT}); rebuild this node from a peer",
                )
        return _Seg(seq, path, data, fmt)

    @staticmethod
    def _split_at_gap(segs: list[_Seg]) -> tuple[list[_Seg], list[_Seg]]:
        """(the contiguous run ending at the last segment, the segments before a gap)."""
        k = len(segs)
        while k > 0 and (k == len(segs) or segs[k - 1].seq == segs[k].seq - 1):
            k -= 1
        return segs[k:], segs[:k]

    def _check_redundant(self, stale: list[_Seg], run: list[_Seg]) -> None:
        """Segments before a gap are unlinks of a prefix that did not reach the disk, or
        strays: moved aside only if each is whole, bound to this group and place, and holds
        nothing the recovered state needs; refused otherwise."""
        for g in stale:
            self._records(g, last=False)
            if not g.recs or g.recs[0].payload[0] != KIND_START:
                raise StorageCorruption(g.path, len(MAGIC), "segment does not begin with START")
            top = 0
            for r in g.recs:
                try:
                    if r.payload[0] == KIND_START and g.fmt != OLD_FORMAT:
                        self._check_start_binding(g, _START.unpack(r.payload[1:]))
                    elif r.payload[0] == KIND_ENTRY:
                        top = max(top, decode_entry(r.payload[1:]).index)
                except (CodecError, ValueError, struct.error) as err:
                    raise StorageCorruption(g.path, r.off, f"bad record: {err}") from err
            if g.seq >= self._install_seq and top > self._snap.index:
                nxt = run[0].seq if run else g.seq + 1
                raise StorageCorruption(
                    g.path,
                    0,
                    f"segment {g.seq} holds entries up to {top}, above the snapshot at "
                    f"{self._snap.index}, but segments between it and segment {nxt} are "
                    "missing: refusing (a segment was lost, or a stray file was added)",
                )

    def _check_start_binding(self, g: _Seg, start: tuple[int, ...]) -> None:
        _flags, group, seq = start[0], start[1], start[2]
        if group != self.group:
            raise ValueError(f"START of group {group}, in the directory of group {self.group}")
        if seq != g.seq:
            raise ValueError(f"START of segment {seq}, in the file of segment {g.seq}")

    def _replay(self, segs: list[_Seg], plan: _Plan) -> list[Entry]:
        s = self._snap
        log: list[Entry] = []  # entries above the snapshot, contiguous from s.index + 1
        at: list[tuple[str, int]] = []  # where each of them was read
        tail: int | None = None  # index of the log's last entry at this point of the replay
        hs_at: tuple[str, int] = (self.dir, 0)
        # Format 3 only: whether the hard state is still the one made durable before its
        # install's snapshot file (see the clamp below).
        v3_pre_install = False
        seen_active = False
        prev_crc: int | None = None  # last crc of the previous segment of this run
        for k, g in enumerate(segs):
            last_seg = k == len(segs) - 1
            self._records(g, last_seg)
            if not g.recs or g.recs[0].payload[0] != KIND_START:
                own_magic = MAGIC[:7] + bytes([g.fmt])  # a format-3 segment has its own
                if (
                    last_seg
                    and not g.recs
                    and (own_magic.startswith(g.data[:8]) or not any(g.data))
                ):
                    plan.unlink_empty.append(g.path)  # torn while being created: held nothing
                    break
                if last_seg and not g.recs and _torn(g.data, 0, len(MAGIC)):
                    # Its first sector (magic, START) never reached the disk while a later
                    # one did (writeback in any order): never fsynced, so nothing in it was
                    # acknowledged. Moved aside, not deleted.
                    plan.quarantine.append(g.path)
                    break
                raise StorageCorruption(g.path, len(MAGIC), "segment does not begin with START")
            if g.torn_at is not None:
                plan.truncate.append((g.path, g.torn_at))
            active = g.seq >= self._install_seq
            max_index = 0
            for r in g.recs:
                kind, body = r.payload[0], r.payload[1:]
                try:
                    if kind == KIND_START:
                        if r.off != len(MAGIC):
                            raise ValueError("START record inside a segment")
                        fresh, t_index, hs = self._replay_start(g, body, prev_crc)
                        if tail is not None and t_index != tail and not fresh:
                            raise ValueError(
                                f"segment starts after entry {t_index} but the log before "
                                f"it ends at {tail}"
                            )
                        if fresh and active:
                            if t_index > s.index:
                                raise ValueError(
                                    f"installed-snapshot segment at {t_index} is past the "
                                    f"snapshot file's index {s.index}"
                                )
                            log.clear()
                            at.clear()
                        elif g.seq == self._install_seq:
                            raise ValueError("the installed snapshot's segment is not fresh")
                        tail = t_index
                        seen_active = seen_active or active
                        if hs != self._hs:
                            v3_pre_install = g.fmt == OLD_FORMAT and not active
                        self._set_hs(hs)
                        hs_at = (g.path, r.off)
                    elif kind == KIND_STATE:
                        self._set_hs(HardState(*_STATE.unpack(body)))
                        hs_at = (g.path, r.off)
                        v3_pre_install = g.fmt == OLD_FORMAT and not active
                    elif kind == KIND_ENTRY:
                        e = decode_entry(body)
                        if tail is not None and e.index > tail + 1:
                            raise ValueError(f"gap: entry {e.index} after {tail}")
                        tail = e.index
                        if not active:
                            continue  # before an installed snapshot: discarded by it
                        max_index = max(max_index, e.index)
                        self._replay_entry(e, log, at, (g.path, r.off))
                    else:
                        raise ValueError(f"unknown record kind {kind}")
                except (CodecError, ValueError, struct.error) as err:
                    raise StorageCorruption(g.path, r.off, f"bad record: {err}") from err
            prev_crc = g.recs[-1].crc
            self._segments.append((g.seq, max_index))
        # Terms are checked on the recovered log only: a record that a later one replaced may
        # well have had a lower term than the snapshot taken after the replacement.
        prev = s.term
        for e, (path, off) in zip(log, at, strict=True):
            if e.term < prev:
                raise StorageCorruption(
                    path, off, f"entry {e.index} of term {e.term} follows term {prev}"
                )
            prev = e.term
        last = s.index + len(log)
        if seen_active and tail is not None and tail > last:
            path = self._seg_path(self._segments[-1][0])
            raise StorageCorruption(
                path, 0, f"the log ended at {tail} but only {last} is recoverable: entries lost"
            )
        if self._hs.commit > last and v3_pre_install:
            # Format 3 made a commit of min(leader commit, old last index) durable before an
            # install's snapshot file (issue 27 item 2): with the install's segment lost or
            # torn, that commit points past the log and the node could not start. The log
            # is the snapshot plus a prefix of the leader's entries that came with it, all at
            # or below the leader's commit: clamp the commit to the log's end (the commit
            # index is knowledge, not a promise; the leader repeats it).
            self._hs = HardState(self._hs.term, self._hs.vote, last)
        if self._hs.commit > last:
            raise StorageCorruption(
                hs_at[0],
                hs_at[1],
                f"commit index {self._hs.commit} is past the last entry {last}: the log lost "
                "committed entries",
            )
        if self._hs.term < prev:
            raise StorageCorruption(
                hs_at[0],
                hs_at[1],
                f"hard state of term {self._hs.term} is below the term {prev} of the log's "
                "last entry or snapshot: a stale hard state",
            )
        return log

    def _replay_start(
        self, g: _Seg, body: bytes, prev_crc: int | None
    ) -> tuple[bool, int, HardState]:
        """Check a START record; returns (fresh, tail index, hard state)."""
        if g.fmt == OLD_FORMAT:
            flags, t_index, _t_term, term, vote, commit = _START3.unpack(body)
            return bool(flags & START_FRESH), t_index, HardState(term, vote, commit)
        st = _START.unpack(body)
        flags, _group, _seq, chain, tag, t_index, _t_term, term, vote, commit = st
        self._check_start_binding(g, st)
        if prev_crc is not None and chain != prev_crc:
            raise ValueError(
                f"segment chains from crc {chain:#010x} but the previous segment ends with "
                f"{prev_crc:#010x}: a segment was dropped, replaced or reordered"
            )
        fresh = bool(flags & START_FRESH)
        if fresh and g.seq >= self._install_seq:
            if g.seq != self._install_seq:
                raise ValueError(
                    f"a FRESH segment at {g.seq}, but the snapshot file was installed with "
                    f"segment {self._install_seq}"
                )
            if tag != self._install_tag:
                raise ValueError(
                    f"install tag {tag:#010x} differs from the snapshot file's "
                    f"{self._install_tag:#010x}: the snapshot file is not this install's"
                )
        return fresh, t_index, HardState(term, vote, commit)

    def _set_hs(self, hs: HardState) -> None:
        if hs.term < self._hs.term:
            raise ValueError(f"hard state goes back from term {self._hs.term} to {hs.term}")
        self._hs = hs

    def _replay_entry(
        self, e: Entry, log: list[Entry], at: list[tuple[str, int]], loc: tuple[str, int]
    ) -> None:
        s = self._snap
        if e.index <= s.index:
            log.clear()  # the suffix it truncates is all above the snapshot; itself covered
            at.clear()
            return
        del log[e.index - s.index - 1 :]
        del at[e.index - s.index - 1 :]
        if e.index != s.index + 1 + len(log):
            raise ValueError(
                f"gap: entry {e.index} but the log after the snapshot at {s.index} ends at "
                f"{s.index + len(log)}"
            )
        log.append(e)
        at.append(loc)

    def _records(self, g: _Seg, last: bool) -> None:
        """Fill g.recs with every whole record whose chained checksum holds; a torn tail of
        the last segment sets g.torn_at (cut once everything is validated)."""
        data, path = g.data, g.path
        g.recs, g.torn_at = [], None
        if len(data) < len(MAGIC):
            if (last and MAGIC.startswith(data)) or not any(data):
                return
            raise StorageCorruption(path, 0, "segment shorter than its header")
        if data[:7] != MAGIC[:7]:
            if last and _torn(data, 0, len(MAGIC)):
                return  # its first sector never reached the disk (see _replay)
            raise StorageCorruption(path, 0, "bad segment header")
        chained = g.fmt != OLD_FORMAT
        framed = g.fmt >= FORMAT  # the marker bits and the trailer (format 5)
        seed = 0  # START is seeded with 0; every later record with its predecessor's crc
        off = len(MAGIC)
        while off < len(data):
            torn = False
            if off + _REC.size > len(data):
                torn, why = True, "truncated record header"
            else:
                word, crc, hcrc = _REC.unpack_from(data, off)
                n = word & ~_MARK if framed else word
                body_end = off + _REC.size + n
                end = body_end + len(_TRAILER) if framed else body_end
                if zlib.crc32(data[off : off + 8]) != hcrc:
                    torn = _torn(data, off, off + _REC.size)
                    why = "record header checksum mismatch"
                elif n == 0 or n > MAX_RECORD or (framed and word & _MARK != _MARK):
                    why = f"bad record length {n}" + (f" (length word {word})" if framed else "")
                    raise StorageCorruption(path, off, why)
                elif end > len(data):
                    torn, why = True, "record runs past the end of the segment"
                elif zlib.crc32(data[off + _REC.size : body_end], seed) != crc or (
                    framed and data[body_end:end] != _TRAILER
                ):
                    torn = _torn(data, off, end)
                    why = (
                        "record checksum mismatch (the record is damaged, or not at its place "
                        "in the chain)"
                    )
                else:
                    g.recs.append(_Rec(off, data[off + _REC.size : body_end], crc))
                    seed = crc if chained else 0
                    off = end
                    continue
            if torn and last:
                g.torn_at = off  # a torn write: it never finished, never acked
                return
            raise StorageCorruption(path, off, why)

    def _apply(self, plan: _Plan) -> None:
        """Carry out what recovery proved (after every check passed)."""
        try:
            for path, off in plan.truncate:
                tail = self.fs.read(path)[off:]  # (only after a crash: a torn tail is rare)
                if any(tail):
                    # Kept aside (durably) before the cut: a zeroed sector of fsynced data
                    # looks like a torn write, and what follows it may have been acked.
                    dst = self._quarantine_name(f"{os.path.basename(path)}.tail-{off}")
                    atomic_write(dst, tail, self.fs)
                self.fs.truncate(path, off)
            for path in plan.unlink_empty + [t for t in plan.tmp if self.fs.exists(t)]:
                self.fs.unlink(path)
                self._dir_dirty = True
            if plan.quarantine:
                qdir = self._path(QUARANTINE)
                for path in dict.fromkeys(plan.quarantine):  # each file once
                    self.fs.replace(path, self._quarantine_name(os.path.basename(path)))
                self.fs.fsync_dir(qdir)
                self._dir_dirty = True
            if self._dir_dirty:
                self.fs.fsync_dir(self.dir)
                self._dir_dirty = False
        except OSError as e:
            raise self._io("recovery", self.dir, e) from e

    def _quarantine_name(self, name: str) -> str:
        """A free path for `name` in quarantine/ (created, durably, if missing)."""
        qdir = self._path(QUARANTINE)
        make_dirs_durable(self.fs, qdir)
        dst, k = os.path.join(qdir, name), 0
        while self.fs.exists(dst):
            k += 1
            dst = os.path.join(qdir, f"{name}.{k}")
        return dst

    def _open_live(self, run: list[_Seg], plan: _Plan) -> None:
        """Reopen the last segment for appending (or arrange a fresh one after an install)."""
        live = [g for g in run if g.path not in plan.unlink_empty + plan.quarantine]
        self._segments = self._segments[: len(live)]
        if live and live[-1].seq >= self._install_seq and live[-1].fmt != FORMAT:
            # A format-4 segment is never appended to (its records have the old framing):
            # the next write cuts a format-5 segment, chained from this one.
            self._crc = live[-1].recs[-1].crc
        elif live and live[-1].seq >= self._install_seq:
            g = live[-1]
            self._fd = self.fs.open_append(g.path, create=False)
            self._size = self.fs.size(self._fd)
            self._crc = g.recs[-1].crc
        else:  # the installed snapshot's segment never reached the disk: cut it afresh
            self._need_fresh = self._install_seq > 0
            self._crc = live[-1].recs[-1].crc if live else 0

    def _make_recovered_durable(self, run: list[_Seg], plan: _Plan) -> None:
        """What recovery read may have been in the page cache only (a process killed before
        its fsync, then restarted): Raft takes what load() returns as stable and acknowledges
        it without writing it again, so make it durable first: the last segment, the
        directory and the directory's own entry in its parent."""
        try:
            if self._fd >= 0:
                self.fs.fsync(self._fd)
            else:
                kept = [g for g in run if g.path not in plan.unlink_empty + plan.quarantine]
                if kept:
                    fd = self.fs.open_append(kept[-1].path, create=False)
                    try:
                        self.fs.fsync(fd)
                    finally:
                        self.fs.close(fd)
            self.fs.fsync_dir(os.path.dirname(os.path.abspath(self.dir)))
            self.fs.fsync_dir(self.dir)
        except OSError as e:
            raise self._io("making the recovered log durable", self.dir, e) from e
