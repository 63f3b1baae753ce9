"""The key grammar (spec R20-R22), exhaustively checked on the model's own parser and
formatter (`model/keys.py`) over a bounded domain: every prefix, every epoch length (each
power of ten, one below it, and the largest epoch), names at the charset's edges.

- round trip: `parse_key(format_key(p, e, n)) == L0Key(p, e, n)`;
- order = epoch order: within a prefix, key order is (epoch, name) order, so a lister can
  stop at the first key whose epoch is above M (R22);
- refusals: an epoch above the 18 digits, a prefix >= 1000 or a name the grammar does not
  allow is refused (ModelError), never formatted into another key;
- canonical parse: a key the parser accepts is the very key the formatter writes for what
  it parsed (an unpadded epoch parsed as 5 would sort after every 18-digit key of its
  prefix, past the lister's stop: an independent reviewer's seeded bug, issue 28);
- eligibility (R24 on keys, what the GC job calls): `gc_eligible` says eligible exactly when
  the key parses, M is known, `epoch <= M` and `age >= grace`, for ages and Ms at each
  edge (a swapped argument there once passed every proof row).

CrossHair cannot build a parsable key in its budget (issue 28), hence this check.
"""

from __future__ import annotations

import itertools
import time

from epochgc.model.errors import ModelError
from epochgc.model.keys import MAX_EPOCH, PREFIXES, L0Key, format_key, gc_eligible, parse_key
from epochgc.proofs.obligations import Outcome

EPOCHS = sorted({0, MAX_EPOCH, *(10**k for k in range(18)), *(10**k - 1 for k in range(1, 19))})
NAMES = ("0", "a", "Z", "x_y.z-1", "u" * 128)
BAD_NAMES = ("", "a/b", ".a", "a b", "u" * 129, "é")
# Near-misses of a well-formed key, each a one-place change of `level_zero/data/007/<18>/a`.
_EPOCH18 = "000000000000000005"
NEAR_MISSES = (
    f"level_zero/data/7/{_EPOCH18}/a", f"level_zero/data/0007/{_EPOCH18}/a",
    "level_zero/data/007/5/a", "level_zero/data/007/00000000000000005/a",
    f"level_zero/data/007/0{_EPOCH18}/a", f"level_zero/data/007/+{_EPOCH18[1:]}/a",
    f"level_zero/data/007/ {_EPOCH18[1:]}/a", f"level_zero/data/007/{_EPOCH18[:-1]}٥/a",
    f"level_zero/data/٠٠٧/{_EPOCH18}/a", f"level_zero/data/007/{_EPOCH18}/",
    f"level_zero/data/007/{_EPOCH18}/a/b", f"level_zero/data/007//{_EPOCH18}/a",
    f"level_zero/data//007/{_EPOCH18}/a", f"/level_zero/data/007/{_EPOCH18}/a",
    f"level_zero/data/007/{_EPOCH18}/a\n", f"level_zero/data/007/{_EPOCH18}/.a",
    f"level_zero/Data/007/{_EPOCH18}/a", f"level_zero/data/007/{_EPOCH18}/a" + "u" * 128,
)
GRACE = 3600.0


def _eligibility_violations(key: str, parsed: L0Key | None) -> list[str]:
    bad = []
    e = parsed.epoch if parsed is not None else 0
    for m in (None, -1, 0, e - 1, e, e + 1, MAX_EPOCH):
        for age in (0.0, GRACE - 1, GRACE, GRACE + 1):
            got = gc_eligible(key, age, m, GRACE)
            want = parsed is not None and m is not None and e <= m and age >= GRACE
            if got.eligible != want or (got.error is None) != (parsed is not None):
                bad.append(f"gc_eligible({key!r}, age={age}, M={m}, grace={GRACE}) = {got}, "
                           f"expected eligible={want}")
    return bad


def check() -> list[str]:
    """Every violation found (empty: the property holds on the whole domain)."""
    bad: list[str] = []
    for p, e, n in itertools.chain(
            itertools.product(range(PREFIXES), (0, MAX_EPOCH), NAMES[:1]),
            itertools.product((0, 7, PREFIXES - 1), EPOCHS, NAMES)):
        try:
            got = parse_key(format_key(p, e, n))
        except ModelError as err:
            bad.append(f"format/parse refused ({p}, {e}, {n!r}): {err}")
            continue
        if got != L0Key(p, e, n):
            bad.append(f"round trip ({p}, {e}, {n!r}) gave {got}")
        if len(bad) > 5:
            return bad
    for p in (0, PREFIXES - 1):
        keys = [(format_key(p, e, n), (e, n)) for e in EPOCHS for n in NAMES]
        by_key = [k for _, k in sorted(keys)]
        if by_key != sorted(by_key):
            bad.append(f"prefix {p}: key order is not (epoch, name) order")
    for args in ((0, MAX_EPOCH + 1, "a"), (PREFIXES, 0, "a"), (0, -1, "a"),
                 *((0, 1, n) for n in BAD_NAMES)):
        try:
            k = format_key(*args)
        except ModelError:
            continue
        bad.append(f"format_key{args} gave {k!r} instead of refusing")
    for key in NEAR_MISSES:
        try:
            parsed = parse_key(key)
        except ModelError:
            parsed = None
        if parsed is not None and format_key(*(parsed.prefix, parsed.epoch, parsed.name)) != key:
            bad.append(f"parse_key accepted {key!r} as {parsed}, which formats differently")
        bad += _eligibility_violations(key, parsed)
    for e in EPOCHS:
        key = format_key(7, e, "a")
        bad += _eligibility_violations(key, parse_key(key))
        if len(bad) > 5:
            return bad
    return bad


def task_keys() -> list[Outcome]:
    t0 = time.perf_counter()
    bad = check()
    name = ("key grammar: parse(format(k)) = k, key order = epoch order, refusals, canonical "
            "parse, gc_eligible = parses and epoch <= M and age >= grace "
            f"(exhaustive: {PREFIXES} prefixes, {len(EPOCHS)} epochs, {len(NAMES)} names, "
            f"{len(NEAR_MISSES)} near-miss keys, M and age at each edge)")
    return [Outcome(name, "invariant", "failed" if bad else "checked",
                    time.perf_counter() - t0, "\n".join(bad[:6]), scope="keys")]
