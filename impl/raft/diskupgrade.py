"""The one-time upgrade of a format-3 log, a part of DiskStorage (mixin `DiskUpgrade`): the
whole recovered log rewritten as one FRESH segment, then the snapshot file naming it (the
switch). See impl/raft/disklog.py's docstring ("Upgrade")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochgc.impl.raft.atomicfile import atomic_write
from epochgc.impl.raft.codec import encode_entry
from epochgc.impl.raft.diskformat import (
    _MAGICS,
    _START,
    _START_FLAGS_AT,
    _STATE,
    FORMAT,
    FORMAT4,
    KIND_ENTRY,
    KIND_START,
    KIND_STATE,
    MAGIC,
    MAGIC4,
    START_FRESH,
    START_UPGRADE,
    _record,
    _Seg,
)
from epochgc.impl.raft.diskrecovery import DiskState
from epochgc.impl.raft.storage import StorageCorruption

if TYPE_CHECKING:
    from epochgc.impl.raft.diskrecovery import _Plan
    from epochgc.impl.raft.messages import Entry, Snapshot
    from epochgc.impl.raft.storage import StorageFailed


class DiskUpgrade(DiskState):
    """The format-3 upgrade: `_upgraded` and `_upgrade`, called by DiskRecovery.load."""

    # The methods these use (declarations only: DiskStorage and DiskRecovery define them).
    if TYPE_CHECKING:
        def _io(self, what: str, path: str, exc: OSError) -> StorageFailed: ...
        def _seg_path(self, seq: int) -> str: ...
        def _snapshot_tag(self, snap: Snapshot, install_seq: int) -> int: ...
        def _write_snapshot_file(self, snap: Snapshot, install_seq: int, tag: int) -> None: ...
        def _apply(self, plan: _Plan) -> None: ...

    def _upgraded(self, segs: list[_Seg]) -> bool:
        """Whether the installed snapshot's segment is the one the format-3 upgrade wrote
        (its START flags; a damaged byte is refused when the segment is replayed)."""
        for g in segs:
            if g.seq == self._install_seq and g.data[: len(MAGIC)] in _MAGICS:
                return len(g.data) > _START_FLAGS_AT and bool(
                    g.data[_START_FLAGS_AT] & START_UPGRADE
                )
        return False

    def _upgrade(
        self, old: list[_Seg], leftover: list[_Seg], log: list[Entry], plan: _Plan
    ) -> None:
        """Rewrite a format-3 log (already validated) as format 4 (see the module docstring)."""
        seq = max([g.seq for g in old] + [self._install_seq]) + 1
        snap, hs = self._snap, self._hs
        tag = self._snapshot_tag(snap, seq)
        start = _START.pack(
            START_FRESH | START_UPGRADE,
            self.group,
            seq,
            0,
            tag,
            snap.index,
            snap.term,
            hs.term,
            hs.vote,
            min(hs.commit, snap.index),
        )
        # (an upgrade a format-4 version began and a crash interrupted is finished in format 4)
        fmt = leftover[0].fmt if leftover and leftover[0].fmt == FORMAT4 else FORMAT
        rec, crc = _record(KIND_START, start, 0, fmt)
        parts = [MAGIC4 if fmt == FORMAT4 else MAGIC, rec]
        for e in log:
            rec, crc = _record(KIND_ENTRY, encode_entry(e), crc, fmt)
            parts.append(rec)
        rec, crc = _record(KIND_STATE, _STATE.pack(hs.term, hs.vote, hs.commit), crc, fmt)
        parts.append(rec)
        data = b"".join(parts)
        path = self._seg_path(seq)
        for g in leftover:
            if g.seq != seq or g.data != data:
                raise StorageCorruption(
                    g.path, 0, "a format-4 segment in a format-3 log that is not its upgrade"
                )
        if not leftover:
            try:
                atomic_write(path, data, self.fs)
            except OSError as e:
                raise self._io("upgrading to format 4", path, e) from e
        self._write_snapshot_file(snap, seq, tag)  # the switch to format 4
        # The format-3 segments are kept whole (a torn tail included) in quarantine/.
        plan.quarantine += [g.path for g in old]
        plan.truncate, plan.unlink_empty = [], []
        self._apply(plan)
        self._install_seq, self._install_tag = seq, tag
        self._segments = [(seq, log[-1].index if log else 0)]
        if fmt == FORMAT:
            self._fd = self.fs.open_append(path, create=False)
            self._size = len(data)
        self._crc = crc
