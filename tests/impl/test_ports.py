"""Ports chosen for a process that binds them later (impl/ports.py)."""

from __future__ import annotations

import random
import socket
from collections.abc import Sequence
from pathlib import Path

from epochgc.impl.ports import candidates, ephemeral_range, free_ports


def test_chosen_ports_are_never_ones_the_kernel_hands_out_by_itself() -> None:
    # A port-0 bind or a connection's local port comes from ip_local_port_range: chosen
    # from there (as before), a port was taken before its node bound it ("address already
    # in use", the signal matrix's chaos case, 1 run in 7 beside other tests).
    lo, hi = ephemeral_range()
    ports = free_ports(24)
    assert len(set(ports)) == 24
    assert [p for p in ports if lo <= p <= hi] == []


class _Proposes(random.Random):
    """Proposes the given ports in turn (every span is one range over all ports)."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(0)
        self.ports = iter(ports)

    def choice(self, seq: Sequence[range]) -> range:  # type: ignore[override]
        return range(0, 65536)

    def randrange(self, *_: object) -> int:
        return next(self.ports)


def test_a_taken_port_is_passed_over() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = taken.getsockname()[1]
        others = [p for p in range(20_000, 20_200) if p != busy]
        (port,) = free_ports(1, _Proposes([busy, *others]), (1024, 1024))
    assert port in others


def test_no_room_outside_the_range_falls_back_to_the_kernels_choice() -> None:
    assert candidates((1024, 65535)) == []
    assert len(set(free_ports(3, random.Random(0), (1024, 65535)))) == 3


def test_an_unreadable_range_is_linuxs_default(tmp_path: Path) -> None:
    (tmp_path / "r").write_text("garbage")
    assert ephemeral_range(tmp_path / "r") == (32768, 60999)
    assert ephemeral_range(tmp_path / "absent") == (32768, 60999)
