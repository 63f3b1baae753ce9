"""The test hook between `epochgc chaos` and a broker process: a small JSON control file.

node_main reads it when the environment names it (EPOCHGC_FAULT_FILE=path; never set in
production) and polls it every POLL_S seconds:

  {"fsync_eio": bool,     # the Raft disk log's write-backs fail with EIO (FaultFileIO:
                          # Linux's page cache; its memory kept in <this file>.pagecache)
   "enospc": bool,        # the Raft disk log's writes fail with ENOSPC (disk full)
   "fsync_delay": seconds,  # each of its fsyncs stalls this long first
   "store": null | "slow" | "fail" | "down", "store_delay": seconds,  # FaultyStore
   "clock_offset": seconds,  # added to the node's wall clock and epoch-cache clock
   "power_loss": bool}       # the Raft log keeps only what the device holds, exit at once

The driver writes it atomically (rename), so a reader sees the old or the new document.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from epochgc.impl.raft.fileio import FaultFileIO
from epochgc.impl.store.faulty import FaultyStore

ENV = "EPOCHGC_FAULT_FILE"
POLL_S = 0.05
POWER_LOSS_EXIT = 137  # what a SIGKILLed process reports
ORPHAN_EXIT = 3


@dataclass
class Faults:
    fsync_eio: bool = False
    enospc: bool = False
    fsync_delay: float = 0.0
    store: str | None = None
    store_delay: float = 0.5
    clock_offset: float = 0.0
    power_loss: bool = False

    def write(self, path: str | os.PathLike[str]) -> None:
        # A unique temporary name (newuser16 S4: a fixed `PATH.tmp` is shared by two
        # writers at once), renamed over the old document (rename(2): atomic).
        fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=f".{Path(path).name}.",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(asdict(self)))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Faults:
        doc = json.loads(Path(path).read_text())
        if not isinstance(doc, dict) or set(doc) - set(cls.__dataclass_fields__):
            raise ValueError(f"{path}: not a fault document: {doc!r}")
        f = cls(**doc)
        if f.store not in (None, "slow", "fail", "down"):
            raise ValueError(f"{path}: store mode {f.store!r} is not slow, fail or down")
        return f


class NodeFaults:
    """The node's side: the switches the control file drives."""

    def __init__(self, path: str) -> None:
        self.path = path
        # The page cache's lost ranges and errseq counters outlive the node's process (the
        # kernel's memory): a restart without a reboot finds them in this file.
        self.fs = FaultFileIO(state=f"{path}.pagecache")
        self.offset = 0.0
        self.stores: list[FaultyStore] = []
        self._mtime = -1
        self.refresh()

    def wrap(self, store: FaultyStore) -> FaultyStore:
        self.stores.append(store)
        self.refresh()
        return store

    def wall(self) -> float:
        return time.time() + self.offset

    def clock(self, base: float) -> float:
        return base + self.offset

    def refresh(self) -> None:
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        f = Faults.read(self.path)
        if f.power_loss:  # as if the machine lost power: the page cache is gone too
            self.fs.lose_unsynced()
            os._exit(POWER_LOSS_EXIT)
        self.fs.fail_fsync = f.fsync_eio
        self.fs.enospc = f.enospc
        self.fs.fsync_delay = f.fsync_delay
        self.offset = f.clock_offset
        for s in self.stores:
            s.delay = f.store_delay
            s.mode = f.store

    def start(self) -> None:
        """Poll from a daemon thread: the switches must flip even while the node's event
        loop is busy (a fault injected then must take effect then)."""
        threading.Thread(target=self._poll, name="fault-file", daemon=True).start()

    def _poll(self) -> None:
        parent = os.getppid()
        while True:
            time.sleep(POLL_S)
            if os.getppid() != parent:  # the chaos driver died: leave no orphan behind
                os._exit(ORPHAN_EXIT)
            try:
                self.refresh()
            except (OSError, ValueError) as e:  # a bad document is the driver's bug: say so
                print(f"fault file: {e}", file=sys.stderr, flush=True)
