"""The simulator's and the core's speed changes (issue 14) keep exactly what they replaced:
the trace digest is the hash of every record, hashed as it happens; a Message or an Entry
built through the slot-descriptor `__init__` is the dataclass it was (signature, defaults,
values, equality, hash, immutability)."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import random
from collections.abc import Callable
from typing import Any

import pytest

from epochgc.impl.raft import sim as simmod
from epochgc.impl.raft.invariants import InvariantChecker
from epochgc.impl.raft.messages import Entry, Message, MsgType, Snapshot
from epochgc.impl.raft.sim import Simulator
from epochgc.impl.raft.simtypes import Faults


class _Unbuffered(Simulator):
    """Also hashes every trace record the moment it is made (the pre-s7 definition)."""

    def __init__(self, **kw: Any) -> None:
        self.ref = hashlib.sha256()
        super().__init__(**kw)

    def _record(self, tag: bytes, *nums: int) -> None:
        super()._record(tag, *nums)
        self.ref.update(tag + simmod._RECORD[len(nums)].pack(self.now, *nums))


def _drive(s: Simulator, events: int, crash_at: int, restart_at: int,
           after: Callable[[int], None] | None = None) -> Simulator:
    """Events with a proposal every 37th, node 2 crashed and restarted; `after(i)` runs
    after event i."""
    for i in range(events):
        s.step()
        if i % 37 == 0:
            leader = s.leader(1)
            if leader is not None:
                s.propose(leader, b"x%d" % i)
        if i == crash_at:
            s.crash(2)
        if i == restart_at:
            s.restart(2)
        if after is not None:
            after(i)
    return s


def test_trace_digest_is_the_hash_of_every_record_so_far() -> None:
    s = _Unbuffered(n_nodes=3, seed=11, groups=(1, 2), snapshot_interval=5,
                    faults=Faults(drop=0.1, duplicate=0.1, reorder=0.2))

    def after(i: int) -> None:
        if i % 101 == 0 or i < 300:  # inside a batch and across batch boundaries
            assert s.trace_digest() == s.ref.hexdigest(), f"after event {i}"

    _drive(s, 2_000, 900, 1300, after)
    assert s.trace_digest() == s.ref.hexdigest()


def test_disable_trace_changes_no_event_and_refuses_the_digest() -> None:
    def sim() -> Simulator:
        return Simulator(n_nodes=3, seed=12, groups=(1, 2), snapshot_interval=5,
                         faults=Faults(drop=0.1, duplicate=0.1, reorder=0.2, replay=0.05))

    traced, untraced = sim(), sim()
    untraced.disable_trace()
    _drive(traced, 1_500, 700, 1100)
    _drive(untraced, 1_500, 700, 1100)
    assert traced.trace_digest()  # the traced one still answers
    assert (untraced.steps, untraced.now, untraced.committed_entries, untraced.stats) == (
        traced.steps, traced.now, traced.committed_entries, traced.stats)
    def state(s: Simulator) -> dict[Any, Any]:  # without the RaftNode objects themselves
        return {k: (v[0], *v[2:]) for k, v in s.replica_state().items()}

    assert state(untraced) == state(traced)
    assert traced.committed_entries > 10
    assert not untraced._trace_buf
    with pytest.raises(RuntimeError, match="trace was turned off"):
        untraced.trace_digest()


@pytest.mark.parametrize("cls", [Message, Entry])
def test_slot_init_has_the_dataclass_signature_and_defaults(cls: type) -> None:
    params = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert p.default == f.default and type(p.default) is type(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            assert p.default == f.default_factory()
        else:
            assert p.default is inspect.Parameter.empty


def _random_message(r: random.Random) -> dict[str, Any]:
    return dict(
        type=r.choice(list(MsgType)), to=r.randrange(5), frm=r.randrange(5),
        term=r.randrange(100), log_term=r.randrange(100), index=r.randrange(1000),
        entries=tuple(Entry(r.randrange(50), r.randrange(9), r.randrange(3), bytes([i]))
                      for i in range(r.randrange(3))),
        commit=r.randrange(1000), reject=r.random() < 0.5, reject_hint=r.randrange(1000),
        force=r.random() < 0.5,
        snapshot=r.choice([None, Snapshot(r.randrange(9), r.randrange(9), b"s")]),
    )


def test_slot_init_stores_every_field_positionally_and_by_name() -> None:
    r = random.Random(3)
    for _ in range(200):
        kw = _random_message(r)
        by_name, by_pos = Message(**kw), Message(*kw.values())
        for m in (by_name, by_pos):
            assert {f.name: getattr(m, f.name) for f in dataclasses.fields(m)} == kw
        assert by_name == by_pos and hash(by_name) == hash(by_pos)
        assert dataclasses.replace(by_name) == by_name
        e = Entry(kw["index"], kw["term"], data=bytes([kw["to"]]))
        assert (e.index, e.term, e.type, e.data) == (kw["index"], kw["term"], 1, bytes([kw["to"]]))
    m = Message(MsgType.HEARTBEAT, 2, 1, 5)
    assert (m.log_term, m.index, m.entries, m.commit, m.reject, m.snapshot) == (
        0, 0, (), 0, False, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.term = 6  # type: ignore[misc]
    with pytest.raises(TypeError):
        Message(MsgType.APP, 1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Message(MsgType.APP, 1, 2, 3, bogus=1)  # type: ignore[call-arg]


def test_history_is_one_object_per_group() -> None:
    c = InvariantChecker()
    h = c.history(4)
    h.max_committed = 7
    assert c.history(4) is h and c.history(4).max_committed == 7
    assert c.history(5) is not h
