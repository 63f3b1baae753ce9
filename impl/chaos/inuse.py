"""`in_use_deleted` from the nodes' trace and the store's deletion record, after the run.

The driver records, per GC round, the trace file's length when the round started and when
it ended, and which L0 keys the listing after the round no longer holds (only GC deletes,
so each was deleted during that round). The trace is appended by every replica when it
applies a committed entry, before any health report can reflect it, so:

- a placeholder for key k at index i of partition p first applied (by any replica) before
  the round started was committed before the deletion; if no replica had applied
  LRLO >= i for p before the round ended, it was still unreconciled when k was deleted;
- a placeholder for k first applied after the round ended is a committed reference to an
  object already gone (an in-flight write that was still acceptable when GC deleted it).

A placeholder first applied during the round is a race this record cannot order: the
producers' in-flight log (`InflightLog`) judges those (`in_flight_in_use`). An in-flight
write whose accepted placeholders were all first applied before the round started is not
one: the first rule above already judged them, and any later placeholder of it is one of
the other two cases.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Round:
    start: int  # trace length (bytes) when the round started
    end: int  # ... and when it returned
    deleted: frozenset[str]


@dataclass
class _Partition:
    first_apply: dict[int, int] = field(default_factory=dict)  # index -> first trace offset
    lrlo_at: list[tuple[int, int]] = field(default_factory=list)  # (offset, running max)


def check(
    trace_path: str, rounds: list[Round]
) -> tuple[list[tuple[str, str]], set[str], set[str]]:
    """(key, why) for every deleted key the trace shows was in use; every key some accepted
    placeholder referenced; and every deleted key with an accepted placeholder first applied
    at or after the start of the round that deleted it (the races for the in-flight log)."""
    parts: dict[str, _Partition] = defaultdict(_Partition)
    refs: dict[str, list[tuple[str, int]]] = defaultdict(list)  # key -> (partition, index)
    offset = 0
    with open(trace_path, "rb") as f:
        for line in f:
            here = offset
            offset += len(line)
            rec = json.loads(line)
            if rec.get("kind") != "apply":
                continue
            p = parts[rec["partition"]]
            idx = int(rec["index"])
            cmd = rec["command"]
            if idx not in p.first_apply:
                p.first_apply[idx] = here
                if cmd.get("type") == "placeholder" and rec.get("accepted"):
                    refs[cmd["key"]].append((rec["partition"], idx))
            lrlo = int(rec["state"]["last_reconciled_log_offset"])
            if not p.lrlo_at or lrlo > p.lrlo_at[-1][1]:
                p.lrlo_at.append((here, lrlo))
    bad: list[tuple[str, str]] = []
    raced: set[str] = set()
    for r in rounds:
        for key in sorted(r.deleted):
            for part, idx in refs.get(key, []):
                p = parts[part]
                first = p.first_apply[idx]
                if first >= r.start:
                    raced.add(key)
                if first >= r.end:
                    bad.append((key, f"placeholder {part}@{idx} committed after its deletion"))
                elif first < r.start and _lrlo_before(p, r.end) < idx:
                    bad.append((key, f"placeholder {part}@{idx} unreconciled when deleted "
                                     f"(LRLO {_lrlo_before(p, r.end)})"))
    return bad, set(refs), raced


def in_flight_in_use(deleted_in_flight: set[str], acked: set[str],
                     trace: tuple[set[str], set[str]] | None) -> set[str]:
    """The keys deleted while their write was in flight that count as in use.

    `trace`: `check`'s (accepted, raced) when there is a trace. Without one, every
    acknowledged write's key counts (its placeholders were accepted). With one, a key
    counts if one of its accepted placeholders was first applied once its deleting round
    had started, or if it was acknowledged and the trace holds none of its placeholders.
    An accepted placeholder first applied before the round is not a race: `check` judged
    it (unreconciled when deleted, or not), so a write still in flight on its other
    partitions, its own placeholder accepted and reconciled before the deletion, is not in
    use (s11: a 20-minute chaos run flagged one such key under "ever accepted")."""
    if trace is None:
        return deleted_in_flight & acked
    accepted, raced = trace
    return deleted_in_flight & (raced | (acked - accepted))


def _lrlo_before(p: _Partition, offset: int) -> int:
    i = bisect.bisect_left(p.lrlo_at, (offset, -1))
    return p.lrlo_at[i - 1][1] if i else -1


async def live_references(access: Any, nodes: list[int]) -> dict[str, tuple[int, set[str]]]:
    """Per partition, (applied index, referenced L0 keys) of the most advanced live replica
    (`access`: a ProcClusterAccess). The caller must discard a partition whose answer is
    older than one it saw before: after a crash or a power loss the only live replica may
    still be replaying its log, and its references are then history, not the present."""
    best: dict[str, tuple[int, set[str]]] = {}
    for n in nodes:
        r = await access.call(n, op="in_use")
        if r.get("status") != "ok":
            continue
        for part, info in r["partitions"].items():
            applied = int(info["applied"])
            if part not in best or applied > best[part][0]:
                best[part] = (applied, set(info["keys"]))
    return best
