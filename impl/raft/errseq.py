"""An errseq_t: how Linux reports a write-back error to each file descriptor once.

After lib/errseq.c and Documentation/core-api/errseq.rst: a counter of write-back errors
with a "seen" flag, one per file (mapping->wb_err) and one per file system (sb->s_wb_err,
reported by syncfs since Linux 5.8). A descriptor samples it when opened; fsync / syncfs
report an error recorded since the descriptor's sample, once (check_and_advance). Used by
the crash-state model (crashstates.RecordingFS) and by FaultFileIO (fileio.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ErrSeq:
    """An errseq_t (lib/errseq.c): a counter of write-back errors and whether anyone has seen
    the latest. errseq_set bumps the counter only if the previous error was seen (or none
    was recorded); errseq_sample returns 0 while the latest error is unseen, so a descriptor
    opened then still reports it; errseq_check_and_advance reports an error once per sample."""

    value: int = 0  # 0: no error ever recorded
    seen: bool = False

    def set(self) -> None:
        if self.value == 0 or self.seen:
            self.value += 1
        self.seen = False

    def sample(self) -> int:
        return self.value if self.seen else 0

    def check_and_advance(self, since: int) -> tuple[bool, int]:
        """(whether an error is reported to the holder of `since`, its new sample)."""
        if self.value == since:
            return False, since
        self.seen = True
        return True, self.value
