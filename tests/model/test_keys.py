"""Unit tests of L0 keys and eligibility (spec R20-R24)."""

from __future__ import annotations

import pytest

from epochgc.model.errors import ModelError
from epochgc.model.keys import (
    L0Key,
    epoch_collectible,
    format_key,
    gc_eligible,
    is_data_key,
    parse_key,
    prefix_path,
)


def test_format_and_parse_round_trip() -> None:
    key = format_key(7, 42, "abc-1")
    assert key == "level_zero/data/007/000000000000000042/abc-1"
    assert parse_key(key) == L0Key(7, 42, "abc-1")


def test_lexicographic_order_is_epoch_order() -> None:
    keys = [format_key(1, e, "x") for e in (9, 10, 100, 2)]
    assert sorted(keys) == [format_key(1, e, "x") for e in (2, 9, 10, 100)]


@pytest.mark.parametrize(
    "key",
    [
        "level_zero/data/7/000000000000000042/x",
        "level_zero/data/007/42/x",
        "level_zero/data/007/000000000000000042/",
        "level_zero/data/007/000000000000000042/x/y",
        "level_zero/other/007/000000000000000042/x",
        "",
    ],
)
def test_unparsable_key_is_an_error_and_never_eligible(key: str) -> None:
    with pytest.raises(ModelError):
        parse_key(key)
    e = gc_eligible(key, 10**6, 10**17, 0)
    assert not e.eligible and e.error


def test_eligibility_is_inclusive_in_epoch_and_age() -> None:
    key = format_key(0, 5, "o")
    assert gc_eligible(key, 10, 5, 10).eligible
    assert not gc_eligible(key, 10, 4, 10).eligible
    assert not gc_eligible(key, 9.9, 5, 10).eligible
    assert not gc_eligible(key, 10, None, 0).eligible


def test_helpers() -> None:
    assert prefix_path(999) == "level_zero/data/999/"
    assert is_data_key("level_zero/data/junk") and not is_data_key("level_one/x")
    assert epoch_collectible(3, 3) and not epoch_collectible(3, None)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: gc_eligible("k", -1, 1, 0), "age_s"),
        (lambda: gc_eligible("k", 1, 1, True), "grace_s"),
        (lambda: gc_eligible("k", 1, "1", 0), "M"),  # type: ignore[arg-type]
        (lambda: format_key(1000, 1, "x"), "prefix"),
        (lambda: format_key(1, 10**18, "x"), "epoch"),
        (lambda: format_key(1, 1, "bad/name"), "key"),
    ],
)
def test_bad_input_names_the_field(call: object, field: str) -> None:
    with pytest.raises(ModelError) as e:
        call()  # type: ignore[operator]
    assert e.value.field == field
