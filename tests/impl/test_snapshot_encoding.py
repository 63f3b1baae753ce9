"""A partition state machine's snapshot is the JSON of `dataclasses.asdict` of its state,
placeholders and L1 segments; `_flat` builds those dicts without asdict's deep copy (issue
14's harness speed), which is the same only while every field is an int, a str or None."""

from __future__ import annotations

import typing
from dataclasses import asdict, fields

from hypothesis import given
from hypothesis import strategies as st

from epochgc.impl.partition.statemachine import (
    AcceptedPlaceholder,
    L1Segment,
    PartitionStateMachine,
)
from epochgc.model import partition as mp

_ints = st.integers(-1, 10**12)
_opt = st.none() | _ints
_keys = st.text(min_size=1, max_size=12)


@given(
    state=st.builds(mp.PartitionState, _opt, _opt, _opt, _opt, _ints, _ints, _ints),
    placeholders=st.lists(st.builds(AcceptedPlaceholder, _ints, _ints, _keys, _ints, _ints,
                                    _ints, _ints), max_size=4),
    l1=st.lists(st.builds(L1Segment, _ints, _ints, _keys), max_size=4),
    next_offset=_ints, last_index=_ints,
)
def test_snapshot_is_the_asdict_encoding(state: mp.PartitionState,
                                         placeholders: list[AcceptedPlaceholder],
                                         l1: list[L1Segment], next_offset: int,
                                         last_index: int) -> None:
    sm = PartitionStateMachine()
    sm.state, sm.placeholders, sm.l1 = state, placeholders, l1
    sm.next_offset, sm.last_index = next_offset, last_index
    assert sm.snapshot() == sm.encode(asdict)


def test_snapshot_fields_are_flat() -> None:
    """What makes `_flat` equal to asdict: no field holds a container or a dataclass."""
    flat = {int, str, type(None)}
    for cls in (mp.PartitionState, AcceptedPlaceholder, L1Segment):
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            kinds = set(typing.get_args(hints[f.name])) or {hints[f.name]}
            assert kinds <= flat, f"{cls.__name__}.{f.name}: {hints[f.name]}"
