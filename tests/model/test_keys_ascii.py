"""Issue 12, item 1: the key grammar is ASCII only (spec R20), and key order is epoch order
for every key that parses (R22). Hypothesis draws from the whole of Unicode."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.model.errors import ModelError
from epochgc.model.keys import MAX_EPOCH, PREFIXES, format_key, gc_eligible, parse_key

ARABIC_INDIC = "".join(chr(0x0660 + d) for d in range(10))  # ٠١٢٣٤٥٦٧٨٩
ASCII_NAME = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.-")


def test_arabic_indic_epoch_is_malformed_never_eligible() -> None:
    # The found key: eighteen Arabic-Indic digits ending in five parsed as epoch 5.
    key = "level_zero/data/003/" + ARABIC_INDIC[0] * 17 + ARABIC_INDIC[5] + "/u"
    with pytest.raises(ModelError):
        parse_key(key)
    verdict = gc_eligible(key, 10**9, 10**17, 0)
    assert not verdict.eligible and verdict.error


@pytest.mark.parametrize(
    "key",
    [
        "level_zero/data/" + "٠٠٣" + "/000000000000000005/u",  # prefix
        "level_zero/data/003/00000000000000000" + "５" + "/u",  # fullwidth five
        "level_zero/data/003/00000000000000000" + "𝟓" + "/u",  # mathematical bold five
        "level_zero/data/003/000000000000000005/" + "é",  # non-ASCII letter in the name
        "level_zero/data/003/000000000000000005/a" + "٥",  # non-ASCII digit in the name
        "level_zero/data/003/000000000000000005/a\n",  # `$`-style trailing newline
    ],
)
def test_non_ascii_in_any_segment_is_malformed(key: str) -> None:
    with pytest.raises(ModelError):
        parse_key(key)


def _in_grammar(key: str) -> bool:
    """R20 written out by hand, without a regular expression."""
    parts = key.split("/")
    if len(parts) != 5 or parts[:2] != ["level_zero", "data"]:
        return False
    prefix, epoch, name = parts[2:]
    digits = set("0123456789")
    return (
        len(prefix) == 3
        and set(prefix) <= digits
        and len(epoch) == 18
        and set(epoch) <= digits
        and 1 <= len(name) <= 128
        and name[0] in ASCII_NAME - set("_.-")
        and set(name) <= ASCII_NAME
    )


# Foreign digits (Arabic-Indic, fullwidth, Extended Arabic-Indic, NKo, Devanagari, bold
# math) next to anything at all.
_chars = st.sampled_from("٥５۵߅५𝟓٠") | st.characters(codec=None)


def _near_miss(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A valid segment with one character replaced, inserted or removed."""

    def edit(seg: str, i: int, c: str, how: int) -> str:
        i %= len(seg) + 1
        return [seg[:i] + c + seg[i + 1 :], seg[:i] + c + seg[i:], seg[:i] + seg[i + 1 :]][how]

    return st.builds(edit, valid, st.integers(0, 200), _chars, st.integers(0, 2))


def _segment(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return valid | _near_miss(valid) | st.text(_chars, max_size=20)


_prefix = st.integers(0, PREFIXES - 1).map(lambda p: f"{p:03d}")
_epoch = st.integers(0, MAX_EPOCH).map(lambda e: f"{e:018d}")
_name = st.from_regex(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,20}", fullmatch=True)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(prefix=_segment(_prefix), epoch=_segment(_epoch), name=_segment(_name))
def test_nothing_outside_the_grammar_parses(prefix: str, epoch: str, name: str) -> None:
    key = f"level_zero/data/{prefix}/{epoch}/{name}"
    try:
        parsed = parse_key(key)
    except ModelError:
        assert not _in_grammar(key)
        return
    assert _in_grammar(key)
    assert format_key(parsed.prefix, parsed.epoch, parsed.name) == key


# Zero of each decimal-digit family Python's int() accepts: Arabic-Indic, Extended
# Arabic-Indic, NKo, Devanagari, fullwidth, mathematical bold.
_ZEROS = [0x0660, 0x06F0, 0x07C0, 0x0966, 0xFF10, 0x1D7CE]


def _foreign(epoch: int, family: int, at: int) -> str:
    """The epoch's 18 digits with one replaced by the same digit of another family."""
    digits = f"{epoch:018d}"
    at %= 18
    return digits[:at] + chr(_ZEROS[family] + int(digits[at])) + digits[at + 1 :]


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    keys=st.lists(
        st.tuples(
            st.integers(0, 40),
            st.none() | st.tuples(st.integers(0, len(_ZEROS) - 1), st.integers(0, 17)),
            _segment(_name),
        ),
        min_size=2,
        max_size=8,
    )
)
def test_key_order_is_epoch_order_for_every_parsed_key(
    keys: list[tuple[int, tuple[int, int] | None, str]],
) -> None:
    # A foreign digit keeps the value (int() reads it) but sorts after every ASCII digit: if
    # such a key parsed, it would sit after larger epochs and the R22 early stop would miss it.
    parsed = []
    for epoch, foreign, name in keys:
        digits = f"{epoch:018d}" if foreign is None else _foreign(epoch, *foreign)
        key = f"level_zero/data/003/{digits}/{name}"
        with contextlib.suppress(ModelError):
            parsed.append((key, parse_key(key)))
    ordered = sorted(parsed)
    for (k1, a), (k2, b) in itertools.pairwise(ordered):
        assert a.epoch <= b.epoch, (k1, k2)
