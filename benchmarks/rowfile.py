"""The row file of a one-command benchmark (`bench_local_listing.py`,
`bench_produce_record.py`): its `--quick`/`--out` arguments, its rows in the format
`run_all.py` reads (name, value, unit, baseline, ratio, target, better: `row_problems`
there says what makes one unreadable), written to `--out` and printed one a line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def arguments(doc: str | None, out: str) -> argparse.Namespace:
    """`--quick` (the smaller sizes) and `--out` (default `out`)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    return ap.parse_args()


def row(name: str, value: float, unit: str, better: str, **extra: Any) -> dict[str, Any]:
    """A row; a `target` needs its `target_of` ("ratio" | "value"): without it `run_all.py`
    refuses the whole run (s29a: bench_local_listing's did), so it is refused here, at once."""
    if extra.get("target") is not None and extra.get("target_of") not in ("ratio", "value"):
        raise ValueError(f"row {name!r}: a target needs target_of='ratio' or 'value'")
    base = {"baseline": None, "ratio": None, "target": None, "target_of": None}
    return {"name": name, "value": round(value, 6), "unit": unit, **base, **extra, "better": better}


def write(out: str, rows: list[dict[str, Any]]) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(rows, indent=1))
    for r in rows:
        print(json.dumps(r))
