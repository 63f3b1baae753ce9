"""Verifiable record payloads: deterministic content plus a checksum.

A record is `EGR1|{partition}|{producer}|{seq}|{body}|{crc32:08x}` where `body` is derived
from (producer, partition, seq) alone, and the CRC covers everything before it. So a reader
can (a) check any record on its own (checksum, and that it sits in the partition it names),
and (b) given only an acknowledgement `(partition, base, count, producer, first seq)`,
recompute every acknowledged record byte for byte and compare contents. `epochgc produce`
writes such acknowledgements to `acked.jsonl` in the cluster's data directory (the manifest,
impl/cluster/manifest.py);
`epochgc consume --verify` and the demo compare against it.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

MAGIC = "EGR1"


class PayloadError(ValueError):
    """A record that is not a well-formed, self-consistent payload."""


# Characters of one sha256 block of a body (a hex digest).
_BLOCK = 2 * hashlib.sha256().digest_size


def _body(producer: str, partition: str, seq: int, size: int) -> str:
    """sha256 blocks of (producer, partition, seq, block): deterministic, content differs
    per record. Joined once, in time linear in `size` (newuser16 S13: a string grown by
    `+=` was copied at each block, ~21 min for the documented maximum of 16 MiB)."""
    blocks = -(-size // _BLOCK)
    return "".join(hashlib.sha256(f"{producer}|{partition}|{seq}|{b}".encode()).hexdigest()
                   for b in range(blocks))[:size]


def make_record(producer: str, partition: str, seq: int, size: int = 48) -> bytes:
    if "|" in producer or "|" in partition:
        raise PayloadError("producer and partition names may not contain '|'")
    head = f"{MAGIC}|{partition}|{producer}|{seq}|{_body(producer, partition, seq, size)}"
    return f"{head}|{zlib.crc32(head.encode()):08x}".encode()


@dataclass(frozen=True)
class ParsedRecord:
    partition: str
    producer: str
    seq: int


def check_record(data: bytes, partition: str | None = None) -> ParsedRecord:
    """Parse and verify one record; raises PayloadError on any mismatch."""
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise PayloadError(f"not UTF-8: {e}") from e
    head, sep, crc = text.rpartition("|")
    if not sep or f"{zlib.crc32(head.encode()):08x}" != crc:
        raise PayloadError("checksum mismatch")
    parts = head.split("|")
    if len(parts) != 5 or parts[0] != MAGIC or not parts[3].isdigit():
        raise PayloadError("bad layout")
    _, part, producer, seq_s, body = parts
    seq = int(seq_s)
    if body != _body(producer, part, seq, len(body)):
        raise PayloadError("body does not match its producer/partition/seq")
    if partition is not None and part != partition:
        raise PayloadError(f"record of {part!r} found in {partition!r}")
    return ParsedRecord(part, producer, seq)


@dataclass(frozen=True)
class AckedRun:
    """`count` acknowledged records at offsets base.. with seqs first_seq.., `size` body."""

    partition: str
    base: int
    count: int
    producer: str
    first_seq: int
    size: int
    epoch: int
    key: str

    def expected(self) -> list[bytes]:
        return [
            make_record(self.producer, self.partition, self.first_seq + i, self.size)
            for i in range(self.count)
        ]


def compare(runs: list[AckedRun], got: dict[str, dict[int, bytes]]) -> list[str]:
    """Every acknowledged record must be at its offset with exactly the expected bytes;
    returns one message per record that is not (missing or different)."""
    bad: list[str] = []
    for r in runs:
        have = got.get(r.partition, {})
        for i, want in enumerate(r.expected()):
            off = r.base + i
            if have.get(off) != want:
                what = "missing" if off not in have else "different content"
                bad.append(f"{r.partition}@{off} ({r.producer} seq {r.first_seq + i}): {what}")
    return bad
