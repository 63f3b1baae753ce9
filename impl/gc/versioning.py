"""A versioned bucket is refused unless asked: there a delete only adds a delete marker, so
a round would report bytes as deleted that are all still stored (and billed)."""

from __future__ import annotations

from epochgc.impl.gc.errors import GcError
from epochgc.impl.store.base import ObjectStore


def check_versioning(store: ObjectStore, allow: bool) -> str | None:
    """The store's versioning status (None for unversioned or non-S3 stores); GcError if it
    is versioned (enabled or suspended: old versions stay either way) and not `allow`."""
    probe = getattr(store, "versioning", None)
    status = probe() if callable(probe) else None
    if status is not None and not allow:
        raise GcError(
            f"{store.describe()} is a versioned bucket (versioning {status}): a delete there "
            "only adds a delete marker and the bytes stay; expire old versions with a "
            "lifecycle rule and pass --allow-versioned to run anyway"
        )
    return None if status is None else str(status)
