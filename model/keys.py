"""L0 object keys: `level_zero/data/{prefix:03}/{epoch:018}/{uuid}` (spec R20-R22).

Zero padding makes lexicographic order equal epoch order inside a prefix, which is what
lets a lister stop at the first key above M.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from epochgc.model.errors import ModelError, require_int

DATA_PREFIX = "level_zero/data/"
PREFIXES = 1000
MAX_EPOCH = 10**18 - 1
# ASCII only (R20): `\d` alone would match every Unicode digit ("٥" is 5 to int()), and such a
# key sorts after every ASCII key of its prefix, past the lister's early stop (R22).
_KEY = re.compile(
    r"level_zero/data/([0-9]{3})/([0-9]{18})/([0-9A-Za-z][0-9A-Za-z_.-]{0,127})", re.ASCII
)


@dataclass(frozen=True)
class L0Key:
    prefix: int
    epoch: int
    name: str


def prefix_path(prefix: int) -> str:
    """The listing prefix of one of the 1000 shards, e.g. `level_zero/data/007/`."""
    require_int("prefix_path", "prefix", prefix)
    if prefix >= PREFIXES:
        raise ModelError("prefix_path", "prefix", f"must be < {PREFIXES}, got {prefix}")
    return f"{DATA_PREFIX}{prefix:03d}/"


def format_key(prefix: int, epoch: int, name: str) -> str:
    """
    raises: ModelError
    post: parse_key(__return__) == L0Key(prefix, epoch, name)
    """
    require_int("format_key", "epoch", epoch)
    if epoch > MAX_EPOCH:
        raise ModelError("format_key", "epoch", f"must be <= {MAX_EPOCH}, got {epoch}")
    key = prefix_path(prefix) + f"{epoch:018d}/{name}"
    parse_key(key)  # the name must be one the parser accepts back
    return key


def parse_key(key: str) -> L0Key:
    """Parse a key under the data prefix; anything else is a ModelError naming the key."""
    if not isinstance(key, str):
        raise ModelError("parse_key", "key", f"must be a string, got {key!r}")
    m = _KEY.fullmatch(key)
    if m is None:
        raise ModelError(
            "parse_key", "key", f"{key!r} is not level_zero/data/<3 digits>/<18 digits>/<name>"
        )
    return L0Key(int(m.group(1)), int(m.group(2)), m.group(3))


def well_formed(key: object) -> bool:
    """True for a key `parse_key` accepts (a string of the key grammar, R20), without building
    the parsed value: one regex match, for a check over a journal's 100k keys."""
    return isinstance(key, str) and _KEY.fullmatch(key) is not None


def all_well_formed(keys: list[object]) -> bool:
    """`well_formed` of every key, by C loops (`map` over the compiled match): a journal's
    read-back checks 100k keys and more (issue 29's throughput)."""
    return set(map(type, keys)) <= {str} and all(map(_KEY.fullmatch, keys))  # type: ignore[arg-type]


def is_data_key(key: str) -> bool:
    """True for every key under the data prefix, parsable or not (those are never skipped
    silently: a malformed one there is reported)."""
    return key.startswith(DATA_PREFIX)


def epoch_collectible(epoch: int, m: int | None) -> bool:
    """The heart of eligibility (R23): inclusive `epoch <= M`; nothing while M is unknown."""
    return m is not None and epoch <= m


def deletable(epoch: int, age: float, m: int | None, grace: float) -> bool:
    """R24 on numbers: `epoch <= M` and `age >= grace`. `gc_eligible` (on a key) and the
    system model's `gc_delete` (on an object's epoch and age) both decide with it, so the
    proofs cover the rule the GC job applies. Ages are any reals (the job's are float
    seconds): the contracts below are proved on symbolic reals, not only whole seconds.

    pre: age >= 0 and grace >= 0
    post: not __return__ or age >= grace
    post: __return__ or age < grace or not epoch_collectible(epoch, m)
    """
    return epoch_collectible(epoch, m) and age >= grace


@dataclass(frozen=True)
class Eligibility:
    eligible: bool
    error: str | None


def gc_eligible(key: str, age_s: float, m: int | None, grace_s: float) -> Eligibility:
    """R24: eligible iff the key parses, `epoch <= M` and `age >= grace`.

    raises: ModelError
    post: not __return__.eligible or (m is not None and age_s >= grace_s)
    post: not __return__.eligible or m is None or parse_key(key).epoch <= m
    post: __return__.error is None or not __return__.eligible
    """
    # `not (x >= 0)` also refuses NaN, which every ordered comparison lets through.
    if isinstance(age_s, bool) or not isinstance(age_s, int | float) or not age_s >= 0:
        raise ModelError("gc_eligible", "age_s", f"must be a number >= 0, got {age_s!r}")
    if isinstance(grace_s, bool) or not isinstance(grace_s, int | float) or not grace_s >= 0:
        raise ModelError("gc_eligible", "grace_s", f"must be a number >= 0, got {grace_s!r}")
    if m is not None:
        require_int("gc_eligible", "M", m, minimum=-1)
    try:
        parsed = parse_key(key)
    except ModelError as e:
        return Eligibility(False, e.message)
    return Eligibility(deletable(parsed.epoch, age_s, m, grace_s), None)
