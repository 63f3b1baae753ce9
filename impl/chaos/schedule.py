"""The nemesis's seeded plan: which fault, on whom, when and for how long.

Every kind comes once first (in a seeded order, so a run of the minimum length injects each
kind), then kinds are drawn at random until the budget is used. One fault at a time, each
healed before the next: a plan never takes more than a minority of nodes away at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = (
    "kill",            # SIGKILL + restart, up to a minority at once, leaders preferred
    "power_loss",      # every node at once loses its unsynced Raft writes and dies
    "pause",           # SIGSTOP, then SIGCONT after more than an election timeout
    "cut_one_way",     # drop one direction of one link
    "cut_both_ways",   # drop both directions of one link
    "isolate_leader",  # cut every link of the controller's leader, both ways
    "disk_fail",       # the node's fsyncs fail (EIO): it must crash, then restarts
    "disk_full",       # the node's writes fail (ENOSPC): it must stop; restarts with space
    "store_slow",      # object store requests take `store_delay` each
    "store_fail",      # object store requests answer 5xx
    "store_down",      # object store unreachable
    "clock_jump",      # one node's wall and epoch-cache clocks jump (either way)
)

# A fault episode lasts this long (s); a pause must outlast the election timeout (10 to 20
# ticks of 0.05 s in node_main's defaults).
DURATION = {"pause": (2.0, 3.5), "kill": (1.0, 3.0), "clock_jump": (3.0, 6.0)}
DEFAULT_DURATION = (2.0, 4.0)
GAP = (1.0, 2.5)  # healthy time between episodes


@dataclass(frozen=True)
class Episode:
    at: float  # seconds after the workload started
    kind: str
    duration: float
    count: int = 1  # kill: how many nodes
    node_pick: float = 0.0  # in [0, 1): which node, resolved against the live set then
    offset: float = 0.0  # clock_jump: seconds (negative: back in time)


def plan(seconds: float, nodes: int, seed: int) -> list[Episode]:
    rng = random.Random(seed)
    first = list(KINDS)
    rng.shuffle(first)
    out: list[Episode] = []
    t = rng.uniform(*GAP)
    while t < seconds:
        kind = first.pop() if first else rng.choice(KINDS)
        lo, hi = DURATION.get(kind, DEFAULT_DURATION)
        dur = rng.uniform(lo, hi)
        if t + dur > seconds:
            break  # only episodes that end within the run: the plan announced is what runs
        count = rng.randint(1, (nodes - 1) // 2) if kind == "kill" else 1
        offset = rng.choice((-1, 1)) * rng.uniform(20.0, 90.0) if kind == "clock_jump" else 0.0
        out.append(Episode(round(t, 3), kind, round(dur, 3), count, rng.random(),
                           round(offset, 3)))
        t += dur + rng.uniform(*GAP)
    return out
