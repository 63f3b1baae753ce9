"""Planted bug: delete_partition drops the replicated state but not the nodes' seen windows,
so a fence after re-creation still trusts the old incarnation's window (spec R32)."""

from dataclasses import replace

from epochgc.model import port, replay
from epochgc.model.replay import INITIAL

_real = replay.OPS["delete_partition"]


def delete(self, args):  # type: ignore[no-untyped-def]
    if self.deleted:
        return _real.run(self, args)  # the refusal stays correct
    self.state, self.last_offset, self.deleted = INITIAL, -1, True
    return {}


replay.OPS["delete_partition"] = replace(_real, run=delete)
port.main()
