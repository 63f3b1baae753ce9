"""The object-store interface the GC job and the reports reader are written against.

One request-shaped primitive per operation (`list_page`, `delete_batch`), so wrappers can
count or fail requests, and a few helpers built on top of them.
"""

from __future__ import annotations

import abc
import contextlib
import enum
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

# S3 refuses more than this many keys in one DeleteObjects request.
MAX_DELETE_BATCH = 1000
MAX_PAGE_SIZE = 1000


# The clock a batch's send deadline is measured on (`ObjectStore.send_by`): one that counts
# the time the host was suspended, so a task whose executor was suspended (or hibernated)
# between its "go" and its send does not send when it resumes (review rev38n finding 7).
# clock_gettime(2): "CLOCK_BOOTTIME (since Linux 2.6.39; Linux-specific): A nonsettable
# system-wide clock that is identical to CLOCK_MONOTONIC, except that it also includes any
# time that the system is suspended"
# (https://man7.org/linux/man-pages/man2/clock_gettime.2.html); CLOCK_MONOTONIC, which
# `time.monotonic` reads on Linux, does not count it. Elsewhere: `time.monotonic`.
_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def send_clock() -> float:
    """Seconds on the send-deadline clock: CLOCK_BOOTTIME where there is one."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()


class SendDeadline(threading.local):
    """A store's `send_by` bound, per thread (each task's batch has its own): `at` is the
    deadline on `send_clock()`, or None."""

    at: float | None = None

    @contextlib.contextmanager
    def bounded(self, deadline: float | None) -> Iterator[None]:
        before = self.at
        self.at = deadline
        try:
            yield
        finally:
            self.at = before


class StoreError(Exception):
    """An object store could not be opened or a request failed; the message is for people."""


class NotAnObject(StoreError):
    """`get` found an entry at the key that is not an object: a symbolic link, a directory
    or a special file. `head` reports such an entry as None (no object), as it does an
    absent key; this tells the two apart for readers that must fail closed (the GC's pause
    state and lease: issue 30)."""


class ConditionalConflict(StoreError):
    """S3 answered 409 ConditionalRequestConflict (or 409 Conflict to a conditional delete):
    another request on the same key completed while this conditional one ran. Nothing was
    written; AWS's advice is to read the object again and retry."""


class NoVersion(StoreError):
    """A write answered 2xx without the new object's version: S3's PutObject answers its
    `ETag` header (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html,
    Response Syntax), which a proxy or gateway may drop. The write was applied, at a
    version unknown: a caller that needs it reads the object back (the lease: its token
    says whether the object is its own, review rev38z9 finding 4)."""


class NoConditionalWrites(StoreError):
    """The store does not enforce conditional writes (a server that ignores If-Match /
    If-None-Match): a lease on it would be no lease, so callers refuse rather than write
    unconditionally."""


class Outcome(enum.Enum):
    """What a conditional delete did."""

    DELETED = "deleted"
    CHANGED = "changed"  # the object is not the version given: left alone
    # No object had the key when this request looked (nothing to compare): said only by a
    # store that looks itself, under a lock (the local store).
    ABSENT = "absent"
    # No object has the key after this request: removed, by this request or by another
    # writer, nothing tells which. S3's answer for every absent key: a copy of the request
    # an intermediary or botocore sent before may have removed it, and the answer seen may
    # be a later copy's (reviews rev38z3 finding 3, rev38z9 finding 3; DeleteObjects' keys
    # so are `DeleteResult.gone_unattributed`). Not "was not there".
    GONE = "gone"


@dataclass(frozen=True)
class Versioned:
    """An object's bytes with the version they are (read in one request)."""

    data: bytes
    version: str


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    mtime: float  # unix seconds of the last write
    # What a conditional delete compares (issue 29): a local store's "inode:mtime_ns:size",
    # S3's ETag; "" when unknown (the delete is then by name only).
    version: str = ""

    def age(self, now: float) -> float:
        """Seconds since the last write; a clock ahead of `now` counts as age 0."""
        return max(0.0, now - self.mtime)


@dataclass(frozen=True)
class Stamp:
    """When an object was written, and the time now, both on the STORE's clock (not this
    host's, which may be skewed from it): a time elapsed since a write that no host clock
    can shorten (issue 41, newuser4 F1). Each end is rounded to the safe side for a
    lower bound of the age: written at the latest `written_by`, now at the earliest
    `now_at_least`."""

    written_by: float
    now_at_least: float

    def age(self) -> float:
        """Seconds since the write, at least (0 if the store's clock reads earlier)."""
        return max(0.0, self.now_at_least - self.written_by)


@dataclass(frozen=True)
class ListPage:
    objects: list[ObjectInfo]
    truncated: bool  # more keys may follow the last one returned
    # Entries the backend would not list as objects, with why: a local store's symbolic
    # links and special files. Never deleted; a GC round reports them.
    refused: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class DeleteResult:
    """Outcome of one batch: `errors` maps each key that could not be deleted to why.

    Every key not in `errors` or `changed` is gone now. `gone`: keys that were already
    absent (a backend that can tell, the local store; S3 cannot: an unconditional delete
    of an absent key is answered Deleted, and a conditional one's NoSuchKey may answer a
    copy of the round's own request an intermediary sent again, review rev38z5 finding 4).
    `changed`: keys a conditional delete skipped because the object is no longer the one
    listed (rewritten since); they are still there. `unknown`: keys of `errors`
    whose delete may have been applied, for all the answers say: on S3 every key answered
    an error after a request of it that may have reached the server (`s3.py`'s rule,
    review rev38z9; review rev38q finding 1): the journal names them so, and its read-back
    asks again.
    `gone_unattributed`: keys absent after an AMBIGUOUS answer (a 5xx, a lost connection, an
    S3 NoSuchKey): they left the store, but no answer says this batch's
    request removed them (another writer may have: review rev38x finding 1), so they are
    neither `deleted` nor `gone` (already gone before the request). `answered`: keys of
    `unknown` no request of which can still land, so the read-back asks about them without
    waiting (task s26a); S3 never says so since review rev38z9 (an answer may be a copy's
    while an earlier copy is still at the server); the others' requests may still be at
    the server, the latest of them having ended at `unanswered_at` (monotonic, this
    process's clock; None: not known).
    """

    requested: int
    errors: dict[str, str] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)  # a subset of `errors`' keys
    gone_unattributed: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)  # a subset of `unknown`
    unanswered_at: float | None = None

    @property
    def deleted(self) -> int:
        return (self.requested - len(self.errors) - len(self.gone) - len(self.changed)
                - len(self.gone_unattributed))


class ObjectStore(abc.ABC):
    """Keys are `/`-separated relative names; listing is in key (code point) order. One
    S3 server we test, SeaweedFS, lists component by component instead (`a/x` before
    `a-z`); the two orders agree on the GC's keys, whose components have one width at each
    depth, and the GC relies on nothing more (tests/store/test_contract.py)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """A human-readable location without secrets, for messages."""

    def missing_root(self) -> str | None:
        """Why nothing can be found here at all (an S3 bucket that does not exist), when
        the store can tell; None otherwise (also when asking fails). For messages only."""
        return None

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write the whole object atomically: readers see the old or the new bytes."""

    @abc.abstractmethod
    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        """Bytes `[start, end)` of the object (all of it by default); StoreError if absent."""

    @abc.abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """Size and mtime of one object, None if it does not exist."""

    def stamp(self, key: str) -> Stamp | None:
        """The object's write time and the time now on the store's own clock; None if the
        object does not exist or the store cannot say (the caller assumes it was written
        just now: the safe side for a wait that counts from the write)."""
        return None

    @abc.abstractmethod
    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = MAX_PAGE_SIZE,
        until: str | None = None,
    ) -> ListPage:
        """One listing request: up to `limit` keys starting with `prefix` and strictly
        greater than `start_after`, in key order.

        `until` is a hint: a backend that can (a directory) ends the page right after the
        first key >= `until` (marking it truncated); one that cannot (S3) ignores it."""

    @abc.abstractmethod
    def delete_batch(self, keys: list[str]) -> DeleteResult:
        """One delete request for at most MAX_DELETE_BATCH keys."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create the object only if no object has the key (atomically); False if one does.
        A store that cannot raises NoConditionalWrites (`create_if_absent`)."""
        return self.create_if_absent(key, data) is not None

    # --- single-object conditional writes (issue 38 item 3: the GC lease and reset) ---
    # Each is one atomic step on the store: S3 checks the condition itself (PutObject with
    # If-None-Match / If-Match, DeleteObject with If-Match), a local store under a lock.
    # The defaults refuse: a store that cannot enforce them never writes unconditionally.

    def require_conditional_writes(self) -> None:
        """Raise NoConditionalWrites unless this store enforces the conditional writes
        below (S3: checked once against the server)."""
        raise NoConditionalWrites(f"{self.describe()} cannot write conditionally")

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        """Create the object only if no object has the key: its version, or None if one
        does. ConditionalConflict: a concurrent request on the key won the race; retry."""
        raise NoConditionalWrites(f"{self.describe()} cannot create {key!r} only if absent")

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        """Replace the object only if it is still `version` (never "": refused): the new
        version, or None if it changed or is gone."""
        raise NoConditionalWrites(f"{self.describe()} cannot replace {key!r} conditionally")

    def delete_if_match(self, key: str, version: str) -> Outcome:
        """Delete the object only if it is still `version` (never "": refused)."""
        raise NoConditionalWrites(f"{self.describe()} cannot delete {key!r} conditionally")

    def get_versioned(self, key: str, limit: int) -> Versioned | None:
        """The first `limit` bytes of the object and its version, None if absent;
        NotAnObject for an entry that is not an object (a local link or directory)."""
        raise NoConditionalWrites(f"{self.describe()} cannot read {key!r} with its version")

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        """Delete (key, version) items, each only if the object is still the version that
        was listed (`ObjectInfo.version`; "" deletes by name). A key that changed since is
        left alone and reported in `changed`. This default cannot check and deletes by
        name: backends that can (local, S3 where the server supports it) override it."""
        return self.delete_batch([k for k, _ in items])

    def list(
        self, prefix: str, start_after: str | None = None, page_size: int = MAX_PAGE_SIZE
    ) -> Iterator[list[ObjectInfo]]:
        """Pages of keys under `prefix`, lazily: a consumer that stops early stops listing."""
        while True:
            page = self.list_page(prefix, start_after, page_size)
            if page.objects:
                yield page.objects
                start_after = page.objects[-1].key
            if not page.truncated or not page.objects:
                return

    def list_all(self, prefix: str) -> Iterator[ObjectInfo]:
        for page in self.list(prefix):
            yield from page

    def age(self, key: str, now: float) -> float | None:
        info = self.head(key)
        return None if info is None else info.age(now)

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections; the store is not used afterwards."""

    def send_by(self, deadline: float | None) -> contextlib.AbstractContextManager[None]:
        """Within the `with`, no write or delete of this thread is sent (a retry included)
        once `send_clock()` passes `deadline` (None: no bound): it fails with a StoreError
        instead (issue 38, review rev38m finding 2: a batch told to go on must land within
        a known time). This default bounds nothing: every backend the GC deletes through
        overrides it (local: before each write and unlink; S3: before each attempt)."""
        return contextlib.nullcontext()


_T = TypeVar("_T")


def check_batch(keys: Iterable[_T]) -> list[_T]:
    batch = list(keys)
    if len(batch) > MAX_DELETE_BATCH:
        raise ValueError(f"delete batch of {len(batch)} keys exceeds {MAX_DELETE_BATCH}")
    return batch


def require_version(key: str, version: str) -> str:
    """A conditional write needs the version it compares: "" (unknown) would make it a
    write by name, which the lease must never do."""
    if not version:
        raise StoreError(f"refusing an unconditional write of {key!r}: its version is unknown")
    return version


def check_key(key: str) -> str:
    """Refuse keys that would not map to the same object on every backend (or would
    escape a local root): empty, absolute, `.`/`..` or empty components, NUL, backslash."""
    if not isinstance(key, str) or not key:
        raise StoreError(f"invalid key {key!r}: must be a non-empty string")
    parts = key.split("/")
    # Three list scans in C, not a generator per component: this runs once per key deleted.
    if "" in parts or "." in parts or ".." in parts or "\0" in key or "\\" in key:
        raise StoreError(f"invalid key {key!r}: needs non-empty relative '/'-separated parts")
    return key
