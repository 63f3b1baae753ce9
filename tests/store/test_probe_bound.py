"""newuser10 L6: the conditional-write probe (PUT, two conditional PUTs, a conditional
DELETE and a DeleteObjects of its own object, before the GC lease) on a store whose
DeleteObjects does not answer. Old code: the probe used the delete path's client (60 s per
attempt, 10 retries), said nothing while it waited, and a kill left its object unnamed.
Now, on a command's control store (`patience`), its requests are bounded as the control
reads are, a line says it waits, and a probe cut short names its object.

Deterministic: the proxy holds every DeleteObjects until the test ends; the bound is the
store's own setting made small. `HANG_S` bounds a hang (old code: 60 s x 10), it is not a
timing assumption."""

from __future__ import annotations

import threading

import pytest

from epochgc.impl.store.patience import Patience
from epochgc.impl.store.s3 import PROBE_KEY, S3Store
from tests.store.s3proxy import Call, Fault, s3_proxy
from tests.store.s3server import new_bucket

pytest.importorskip("boto3")
HANG_S = 60.0


def test_a_silent_delete_objects_in_the_probe_is_bounded_said_and_named(
        moto_endpoint: str, release: threading.Event) -> None:
    bucket = new_bucket(moto_endpoint)

    def hold_deletes(call: Call) -> Fault | None:
        if call.method == "POST":  # DeleteObjects (its conditional DELETE answers)
            release.wait(HANG_S * 2)  # never answered while the probe waits
        return None

    lines: list[str] = []
    failed: list[BaseException] = []
    with s3_proxy(moto_endpoint, faults=hold_deletes) as proxy:
        store = S3Store(bucket, "gc", endpoint_url=proxy.endpoint,
                        patience=Patience(read_timeout_s=0.5, attempts=2, say_after_s=0.2),
                        on_wait=lines.append)

        def probe() -> None:
            try:
                store.require_conditional_writes()
            except BaseException as e:  # what the probe raised is the result
                failed.append(e)

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        t.join(HANG_S)
        assert not t.is_alive(), f"the probe still waits after {HANG_S:g} s: {lines}"
        release.set()
        deletes = proxy.calls[("delete", f"/{bucket}")]  # DeleteObjects (POST /bucket?delete)
    # The server enforces conditional writes: the probe passes; its object's delete got
    # no answer, so the object is named as left.
    assert failed == [], failed
    assert deletes <= 4, deletes  # bounded attempts (old: 60 s each, up to 10)
    assert any("waiting for" in ln and "conditional-write probe" in ln for ln in lines), lines
    left = [ln for ln in lines if "was not deleted" in ln]
    assert len(left) == 1 and f"{PROBE_KEY}-" in left[0], lines
