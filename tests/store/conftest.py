from tests.store.s3server import s3_bucket, s3_endpoint

__all__ = ["s3_bucket", "s3_endpoint"]
