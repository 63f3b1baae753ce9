"""`gc --store s3://<a bucket that does not exist>/p` said "is not an epochgc store (no
_cluster/partitions.json)" (newuser5 G7): a HeadObject 404 cannot tell a missing key from a
missing bucket; the refusal now says the bucket does not exist."""

from __future__ import annotations

from click.testing import CliRunner

from epochgc.impl.cli import main


def test_a_missing_bucket_is_named(moto_endpoint: str) -> None:
    r = CliRunner().invoke(main, ["gc", "--store", "s3://no-such-bucket-g7/p",
                                  "--s3-endpoint", moto_endpoint, "--dry-run"])
    assert r.exit_code != 0, r.output
    assert "bucket 'no-such-bucket-g7' does not exist" in r.output, r.output
    assert "Traceback" not in r.output, r.output
