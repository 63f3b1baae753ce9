"""A versioned bucket is refused unless asked: there a delete only adds a delete marker, so
a round would report bytes as deleted that are all still stored (and billed)."""

from __future__ import annotations

from epochgc.impl.gc.errors import GcError
from epochgc.impl.store.base import ObjectStore

# What a delete does on a versioned bucket, and what the operator does about it.
_WHY = ("a delete there only adds a delete marker and the bytes stay; expire old versions "
        "with a lifecycle rule and pass --allow-versioned to run anyway")


def check_versioning(store: ObjectStore, allow: bool) -> str | None:
    """The store's versioning status (None for unversioned or non-S3 stores); GcError if it
    is versioned (enabled or suspended: old versions stay either way) and not `allow`."""
    probe = getattr(store, "versioning", None)
    status = probe() if callable(probe) else None
    if status is not None and not allow:
        raise GcError(
            f"{store.describe()} is a versioned bucket (versioning {status}): {_WHY}"
        )
    return None if status is None else str(status)


def dry_run_note(store: ObjectStore, allow: bool) -> str | None:
    """For a dry run, which deletes nothing and so runs on a versioned bucket too
    (newuser12 P8: it was refused as a real round is): what a real round would do there,
    or None if it would not be refused."""
    status = check_versioning(store, True)
    if status is None or allow:
        return None
    return (f"dry run on a versioned bucket ({store.describe()}, versioning {status}): a real "
            f"round would be refused (exit 1): {_WHY}")
