"""Record build benchmark (not a timed test): is `produce`'s record linear in its size?

    python benchmarks/bench_produce_record.py [--quick] [--out build/bench-produce-record.json]

One record (`payload.make_record`, what `produce --size N` builds per record) at 1, 2, 4
and 16 MiB (`--quick`: 1 and 4 MiB), against a baseline measured in the same command: the
sha256 blocks its body is made of, hashed and discarded (what any builder of that body
must do). Rows: seconds per record at each size with its ratio to the baseline; the growth
of the cost per MiB from the smallest to the largest size (1.0 = linear; newuser16 S13:
a body grown by `+=` took 5.6 s at 1 MiB, 19.6 s at 2 MiB, ~21 min at 16 MiB); and the
largest size's seconds (target <= 1 s: "16 MiB in well under a second").
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.rowfile import arguments, row, write
from epochgc.impl.cluster.payload import make_record

MIB = 1 << 20


def time_record(size: int) -> float:
    t = time.perf_counter()
    make_record("bench", "t/0", 7, size)
    return time.perf_counter() - t


def time_baseline(size: int) -> float:
    t = time.perf_counter()
    for b in range(-(-size // 64)):
        hashlib.sha256(f"bench|t/0|7|{b}".encode()).hexdigest()
    return time.perf_counter() - t


def main() -> None:
    args = arguments(__doc__, "build/bench-produce-record.json")
    sizes = (MIB, 4 * MIB) if args.quick else (MIB, 2 * MIB, 4 * MIB, 16 * MIB)
    rows: list[dict[str, Any]] = []
    per_mib: dict[int, float] = {}
    for size in sizes:
        seconds = min(time_record(size) for _ in range(3))
        base = min(time_baseline(size) for _ in range(3))
        per_mib[size] = seconds / (size / MIB)
        rows.append(row(f"produce record build, {size // MIB} MiB body: seconds per record",
                        seconds, "s", "lower", baseline=round(base, 6),
                        ratio=round(seconds / base, 3)))
        print(f"{size // MIB} MiB: {seconds:.3f}s; baseline {base:.3f}s", file=sys.stderr)
    rows.append(row(f"produce record build cost per MiB, {sizes[-1] // MIB} vs "
                    f"{sizes[0] // MIB} MiB (1.0 = linear)",
                    per_mib[sizes[-1]] / per_mib[sizes[0]], "x", "lower"))
    rows.append(row(f"produce record build, {sizes[-1] // MIB} MiB body", rows[-2]["value"],
                    "s", "lower", target=1.0, target_of="value"))
    write(args.out, rows)


if __name__ == "__main__":
    main()
