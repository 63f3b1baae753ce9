"""The key grammar (spec R20-R22), exhaustively checked on the model's own parser and
formatter (`model/keys.py`) over a bounded domain: every prefix, every epoch length (each
power of ten, one below it, and the largest epoch), names at the charset's edges.

- round trip: `parse_key(format_key(p, e, n)) == L0Key(p, e, n)`;
- order = epoch order: within a prefix, key order is (epoch, name) order, so a lister can
  stop at the first key whose epoch is above M (R22);
- refusals: an epoch above the 18 digits, a prefix >= 1000 or a name the grammar does not
  allow is refused (ModelError), never formatted into another key.

CrossHair cannot build a parsable key in its budget (issue 28), hence this check.
"""

from __future__ import annotations

import itertools
import time

from epochgc.model.errors import ModelError
from epochgc.model.keys import MAX_EPOCH, PREFIXES, L0Key, format_key, parse_key
from epochgc.proofs.obligations import Outcome

EPOCHS = sorted({0, MAX_EPOCH, *(10**k for k in range(18)), *(10**k - 1 for k in range(1, 19))})
NAMES = ("0", "a", "Z", "x_y.z-1", "u" * 128)
BAD_NAMES = ("", "a/b", ".a", "a b", "u" * 129, "é")


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
    return bad


def task_keys() -> list[Outcome]:
    t0 = time.perf_counter()
    bad = check()
    name = ("key grammar: parse(format(k)) = k, key order = epoch order, refusals "
            f"(exhaustive: {PREFIXES} prefixes, {len(EPOCHS)} epochs, {len(NAMES)} names)")
    return [Outcome(name, "invariant", "failed" if bad else "checked",
                    time.perf_counter() - t0, "\n".join(bad[:6]), scope="keys")]
