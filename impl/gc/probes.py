"""The conditional-write probe's objects (`S3Store.require_conditional_writes`): each holds
the identity of the process that wrote it (`journal.Driver`: boot, pid namespace, pid, start
time), so that a later probe can tell one a killed process left from one a probe running
now is using.

newuser10 L10: a probe cut short by SIGKILL (no `finally` runs) left its object for good,
and a probe cut short by a signal named it "to delete by hand". Now every probe first
removes the probe objects that are proven left over: one whose writer's process is gone
(same boot and pid namespace as this process, and its pid no longer that process:
`lease.holder_running` is False), or one older than `STALE_S`, far past the longest a probe
can run (its five requests are bounded, `patience.py` and `s3.READ_TIMEOUT_S`), for a
writer on another host or container, or an object written before probes named their
writer. Anything else is left: it may be a probe under way (two rounds may probe at once;
removing its object would make its own create-over-an-existing-object check pass, and the
server look as if it ignored If-None-Match)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict

from epochgc.impl.gc.admin import load_strict
from epochgc.impl.gc.journal import Driver
from epochgc.impl.gc.lease import holder_running
from epochgc.impl.gc.text import printable
from epochgc.impl.store.base import ObjectInfo, ObjectStore, StoreError

STALE_S = 24 * 3600.0
MARK = "epochgc conditional-write probe"
# The most of a probe object read: its body (`probe_body`) is about 250 bytes. Review
# rev38z10 finding 3: it was read whole and parsed with json.loads unchecked, so an object
# nested 100,000 deep raised RecursionError out of every probe (every round on the store)
# until it was a day old; now it is read bounded and parsed by `admin.load_strict` (size,
# UTF-8, nesting, strict numbers), as every other stored document is.
MAX_PROBE_BYTES = 4096
# What probes wrote before they named their writer (e732037): not damaged, just unmarked.
_OLD_BODY = b"probe"


def probe_body() -> bytes:
    """What a probe writes: its mark and this process's identity."""
    return json.dumps({"probe": MARK, "driver": asdict(Driver.this_process())},
                      sort_keys=True).encode()


def left_over(store: ObjectStore, prefix: str, now: float,
              damaged: Callable[[str], None] | None = None
              ) -> Iterator[tuple[ObjectInfo, str]]:
    """The probe objects under `prefix` proven left over, each with why. One that cannot
    be read as a probe's body (damaged, foreign) is not proven left over: it is kept until
    it is `STALE_S` old, and `damaged` is told of it (a line naming it and why); it never
    fails the probe (nor so the round)."""
    for info in store.list_all(prefix):
        if info.age(now) > STALE_S:
            yield info, f"written {info.age(now) / 3600:.0f} h ago"
            continue
        try:
            raw = store.get(info.key, 0, MAX_PROBE_BYTES + 1)  # never more than the bound
        except StoreError:  # gone meanwhile (or unreadable now): left
            continue
        try:
            doc = load_strict(raw, info.key, MAX_PROBE_BYTES)
            if not (isinstance(doc, dict) and doc.get("probe") == MARK):
                raise ValueError("not a probe's body: no probe mark")
        except ValueError as e:  # damaged or foreign: left
            if damaged is not None and raw != _OLD_BODY:
                damaged(f"the conditional-write probe object {printable(info.key)} cannot "
                        f"be read ({e}): kept (not proven left over); a probe removes it "
                        f"once it is {STALE_S / 3600:.0f} h old")
            continue
        if holder_running({"driver": doc.get("driver")}) is False:
            yield info, f"its process {doc['driver'].get('pid')} on this host has ended"
