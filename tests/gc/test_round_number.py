"""One round, one number (review rev38o finding 2): the claim looks the round up by its
per-round marker, so its requests do not grow with the rounds before it, and a claimer
that loses the per-round marker removes the number it took."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.sequence import SEQ_PREFIX, claim, markers, round_number
from epochgc.impl.store.local import LocalStore


class _Counting(LocalStore):
    gets = 0

    def get(self, key: str, *args: Any, **kwargs: Any) -> bytes:
        self.gets += 1
        return super().get(key, *args, **kwargs)


def test_a_claims_reads_do_not_grow_with_past_rounds(tmp_path: Path) -> None:
    store = _Counting(tmp_path / "s", create=True)
    gets = []
    for i in range(1, 21):
        rid = f"r{i:03d}"
        before = store.gets
        assert claim(store, rid, round_key(rid)) == i
        gets.append(store.gets - before)
        before = store.gets
        assert claim(store, rid, round_key(rid)) == i  # again: its fixed number
        assert store.gets - before == 1
    assert set(gets) == {1}, gets  # its per-round marker, absent; no marker scan


class _OtherFixesFirst(LocalStore):
    """Another claimer of the same round fixes its number right after we took ours."""

    other: Any = None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if "seq-round/" in key and self.other is not None:
            run, self.other = self.other, None
            run()
        return super().put_if_absent(key, data)


def test_a_claimer_that_loses_the_round_removes_the_number_it_took(tmp_path: Path) -> None:
    root = tmp_path / "s"
    other = LocalStore(root, create=True)
    store = _OtherFixesFirst(root)
    rid = "r1"
    taken: list[int] = []

    def first() -> None:  # it lists after our marker 1 exists: it takes 2 and fixes it
        taken.append(claim(other, rid, round_key(rid)))

    store.other = first
    assert claim(store, rid, round_key(rid)) == 2 == taken[0]
    assert [m.seq for m in markers(other)] == [2] and round_number(other, rid) == 2
    assert [o.key for o in other.list_all(SEQ_PREFIX)] == [f"{SEQ_PREFIX}{2:020d}"]
