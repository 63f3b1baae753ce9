"""CLI-level bad input and a corrupted journal refusing to start."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.local import LocalCluster

LIVENESS_S = 300.0  # a bound for a hang, not a timing assumption


def test_produce_refuses_out_of_range_epoch_before_anything(tmp_path: Path) -> None:
    lc = LocalCluster(tmp_path / "c")
    lc.init(3, str(tmp_path / "store"), ["t/0"], 1.0)
    r = CliRunner().invoke(main, ["produce", "--data-dir", str(tmp_path / "c"),
                                  "--partition", "t/0", "--epoch", str(10**18)])
    assert r.exit_code != 0 and "refusing to produce with epoch" in r.output


@pytest.mark.slow
def test_corrupted_journal_refuses_to_start_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    lc = LocalCluster(tmp_path / "c")
    lc.init(3, str(tmp_path / "store"), ["t/0"], 1.0)
    gdir = tmp_path / "c" / "n1" / "g1"
    # The first record of the first segment (START: where the log stands and the hard state);
    # records follow it, so damage there is never a torn tail.
    past_start = 8 + 12 + 46 + 12
    try:
        for n in lc.ids:
            lc.start(n)
        # Until the controller group elected and wrote something after START on node 1
        # (a fixed 3 s sleep once, which a loaded machine may not have done it in).
        limit = time.monotonic() + LIVENESS_S
        while not ((segs := sorted(gdir.glob("*.seg"))) and segs[0].stat().st_size > past_start):
            assert time.monotonic() < limit, "node 1's controller log never grew past START"
            time.sleep(0.05)
    finally:
        lc.stop_all()
    target = sorted(gdir.glob("*.seg"))[0]
    data = bytearray(target.read_bytes())
    assert len(data) > past_start
    data[8 + 12 + 5] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="refusing to start") as ei:
        lc.start(1)
    assert str(gdir) in str(ei.value)
