"""Task s28c: review rev38z9's findings fixed by one rule (`impl/store/s3.py`, THE RULE),
checked beyond the review's cases. The S3 cases run against moto in server mode on
loopback, through a front (`tests/store/forward.py`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.store.forward import serving
from tests.store.test_rev38z9 import _ResentDeleteServer


@pytest.mark.s3
def test_reset_says_a_lease_its_own_request_may_have_removed_is_gone(
    moto_endpoint: str
) -> None:
    """Finding 3's words: a reset whose conditional DeleteObject an intermediary carried
    out with its first copy, the second answered 404 NoSuchKey, says the lease is "gone:
    removed by this request or another" (it said "nothing to remove"), and names the
    round whose lease it was."""
    from epochgc.impl.cli import main
    from epochgc.impl.gc.lease import LEASE_KEY
    from epochgc.impl.store.s3 import S3Store
    from tests.gc.helpers import simple_cluster
    from tests.store.s3server import new_bucket

    direct = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
    simple_cluster(direct, 100)  # a cluster's store (`check_is_store`)
    direct.put(LEASE_KEY, b'{"round": "20270301T100000.000Z-s28c", "token": "t", '
                          b'"renewed_at": 1.0, "expires_at": 2.0}')
    with serving(_ResentDeleteServer(moto_endpoint, 404, "NoSuchKey")) as front:
        r = CliRunner().invoke(main, ["gc-admin", "reset", "--store",
                                      f"s3://{direct.bucket}/c", "--s3-endpoint",
                                      front.endpoint(), "--force"])
        assert front.forwarded == 1
    assert direct.head(LEASE_KEY) is None
    said = f"gc-admin: reset: {LEASE_KEY} gone: removed by this request or another"
    assert said in r.output, (r.exit_code, r.output)
    assert "20270301T100000.000Z-s28c" in r.output, r.output
