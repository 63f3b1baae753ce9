"""S3 backend through boto3.

Credentials come only from boto3's standard chain (environment, shared config, instance
role): this module never accepts or prints them. Throttling is botocore's adaptive retry
mode (client-side rate limiting plus backoff). Per-key errors inside a 200 DeleteObjects
reply are invisible to botocore: `delete_batch` retries those keys itself (`retry.py`).
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from epochgc.impl.store import (
    attempts,
    connectcheck,
    deleteanswer,
    keycodes,
    ratelimit,
    readretry,
    resetclose,
)
from epochgc.impl.store.base import (
    MAX_PAGE_SIZE,
    ConditionalConflict,
    DeleteResult,
    ListPage,
    NoConditionalWrites,
    NoVersion,
    ObjectInfo,
    ObjectStore,
    Outcome,
    SendDeadline,
    Stamp,
    StoreError,
    Versioned,
    check_batch,
    check_key,
    require_version,
    send_clock,
)
from epochgc.impl.store.driverbound import DriverBound
from epochgc.impl.store.driverbound import current as driver_bound
from epochgc.impl.store.patience import Patience, waiting
from epochgc.impl.store.retry import RETRYABLE_KEY_CODES, Backoff, Retrier

T = TypeVar("T")

# S3 error codes that mean "the key is not there", which for a delete is success.
_GONE = keycodes.NOT_THERE
# Per-key codes of a conditional delete whose object is no longer the one listed.
_CHANGED = keycodes.CHANGED
# A conditional request that lost a race with another request on the same key (AWS: 409
# ConditionalRequestConflict to PutObject, 409 Conflict to DeleteObject; retry).
_CONFLICT = frozenset({"ConditionalRequestConflict", "Conflict", "409"})
# THE RULE for a DeleteObjects' keys (review rev38z9; `S3Store._delete` applies it, in
# `_settle` alone). An intermediary (nginx `proxy_next_upstream ... non_idempotent`,
# http://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_next_upstream; an Envoy
# `retry_policy`; an SDK layer) may send a request more than once and relay any one copy's
# answer, so an answer tells what happened to its own copy and nothing of the others. Only
# these answers decide a key:
#  (a) Deleted, or left out of a Quiet answer: deleted. A copy only deletes and an L0 key
#      is written once, so "gone" stays true, and it was the round's request either way
#      ("For each key, Amazon S3 performs a delete operation and returns the result of that
#      delete, success or failure", https://docs.aws.amazon.com/AmazonS3/latest/API/
#      API_DeleteObjects.html);
#  (b) a per-key NoSuchKey: absent, by this request or another (`gone_unattributed`);
#  (c) a request proven never sent (`attempts.not_sent`: a connection never made, our own
#      `SendDeadlinePassed` / `StoppedNotSent`) with no earlier attempt that was sent: not
#      deleted, and nothing of it can land.
# EVERY other answer, whatever its code, for the whole request or per key, known to S3's
# list or not: an error response is a status and an <Error> body and says only that this
# copy failed (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html), and a
# request answered 500 or not at all "might not have processed" (so might have:
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/ErrorBestPractices.html). Such a
# key is `unknown`: the journal's read-back asks it of the store after waiting
# `stage.SENT_APPLIED_S` from the end of the LATEST attempt that named it and may have
# reached the server (`attempts.sent_at`), since a copy it may hide reaches the server
# before that attempt ends and is applied within the bound after (`impl/gc/bounds.py`,
# "an intermediary"). A HEAD at once is an optimisation only (`_settle`): absent decides
# (b)'s way; there, the key still waits. The one "there" that decides is `changed`: a
# per-key 412 shows the server checks that key's ETag, every copy carries the same one,
# and the object there now has another (L0 keys are never written back to a version).
# A missing bucket is no exception (review rev38z9 rows 7 and 15): if it is gone, so is
# every key in it, and a HEAD's 404 says the key is not in the store, which is true.
#
# The codes of a request that failed whole, each key's code then: it may have been applied
# (a 5xx, a lost connection): asked at once (`_settle`).
_REQUEST_UNSURE = "RequestFailedMaybeApplied"
# The same, where every attempt that may have been applied was a 200 SlowDown
# (`attempts.throttled`): most likely not begun, so not asked at once (review rev38z2
# finding 5: the HEADs, paced by the throttled client, decided nothing).
_REQUEST_THROTTLED = "SlowDownMaybeApplied"
# Never sent (rule (c)), or answered whole with no code: our own words, not S3's.
_REQUEST_FAILED = "RequestFailed"


# A key of a batch whose answer names some other key: its result is unknown (`_per_key`).
_ANSWER_UNMATCHED = "AnswerNamesOtherKeys"
# HEADs in flight at once when the keys of a failed delete are looked up (`_settle`).
_RESOLVERS = 8
# Where the GC checks, once per store object, that the server enforces conditional writes
# (a key of its own per check, under this name).
PROBE_KEY = "_cluster/gc/conditional-write-probe"
# Servers (endpoint, bucket, prefix) this process saw enforce conditional writes: a round's
# control store probes before the round begins, its lease's store need not again.
_PROBED: set[tuple[str | None, str, str]] = set()
# What becomes of a probe object left behind (`gc.probes`, newuser10 L10).
_NEXT_PROBE = ("the next probe on this store removes it: at once on this host, elsewhere "
               "a day after it was written")
_NO_ETAG = '"00000000000000000000000000000000"'  # a well-formed ETag no object has here
# botocore's defaults are 60 s each ("connect_timeout ... The default is 60 seconds",
# "read_timeout ... The default is 60 seconds":
# https://botocore.amazonaws.com/v1/documentation/api/latest/reference/config.html). Given
# explicitly: the GC's stop bound rests on them (`impl/gc/bounds.py`). A connection that
# takes 10 s to open is lost; a DeleteObjects of 1,000 keys answers within a minute.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
# The requests that change the store: none is sent past a `send_by` deadline.
_BOUNDED_OPS = ("PutObject", "DeleteObjects", "DeleteObject")


class SendDeadlinePassed(Exception):
    """Raised from botocore's `before-send` hook, or before the attempt's connect or first
    write (`connectcheck`): this attempt was not sent. Not a botocore
    error, so botocore's retry handler does not retry it; an earlier attempt of the same
    call may have been sent (and applied): the per-attempt record says (`attempts.py`)."""


class S3Store(ObjectStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        max_attempts: int | None = None,
        max_pool_connections: int = 16,
        key_retry: Retrier | None = None,
        patience: Patience | None = None,
        on_wait: Callable[[str], None] | None = None,
        read_waiter: readretry.Waiter | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.endpoint_url = endpoint_url
        self.max_attempts = max_attempts
        # At least one connection per thread that uses the client at once (the delete
        # phase's in-flight requests plus the lister), else urllib3 discards and reopens.
        self.max_pool_connections = max_pool_connections
        self.key_retry = key_retry if key_retry is not None else Retrier(Backoff())
        self._client: Any = None
        # Issue 41 (newuser8 I10): with `patience`, the reads (HEAD, GET, LIST, HeadBucket,
        # GetBucketVersioning) go through a client of their own whose attempts are bounded
        # by it (`patience.py`), and a read still unanswered after `say_after_s` is said
        # through `on_wait` (a command's own line). The writes keep the client above.
        self.patience = patience
        self.on_wait = on_wait
        # The backoff's randomness and sleep between a control read's attempts (tests: a
        # seeded Random and a sleep that records).
        self.read_waiter = read_waiter if read_waiter is not None else readretry.Waiter()
        self._reader: Any = None
        self._deadline = SendDeadline()  # `send_by`'s bound, per thread
        self.monotonic: Callable[[], float] = send_clock  # the clock `send_by` reads
        self._conditional_ok = False  # the server was seen to enforce conditional writes
        self._probe_client: Any = None  # the probe's bounded client, while it runs
        # The probe's object, from its PUT until it is deleted: what a probe cut short (a
        # signal, a failure) may have left (the command says it: newuser10 L10).
        self.probe_left: str | None = None
        # The delete threads' first calls race to create the client: without the lock each
        # made its own client (and pool), so the pool size bounded nothing.
        self._lock = threading.Lock()
        # A GC driver's bounds (`driverbound.py`, newuser10 L4/L5): none in an executor.
        self._bound: DriverBound | None = driver_bound()

    # A boto3 client cannot be pickled; Spark tasks rebuild it from the settings.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        state["_reader"] = None
        state["_probe_client"] = None
        state["on_wait"] = None  # a command's line: not for an executor (nor picklable)
        state["_bound"] = None  # the driver's: an executor keeps the delete path's bounds
        del state["_lock"]
        del state["_deadline"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._deadline = SendDeadline()

    def send_by(self, deadline: float | None) -> contextlib.AbstractContextManager[None]:
        """No PutObject, DeleteObjects or DeleteObject attempt of this thread is sent once
        `self.monotonic()` passes `deadline`, botocore's retries included (its
        `before-send` event: "emitted when the operation has been fully serialized,
        signed, and is ready to be sent across the wire",
        https://docs.aws.amazon.com/botocore/latest/topics/events.html): the call fails
        with a StoreError. The deadline is checked again before each connect and each write
        of the attempt (`connectcheck`). An attempt already sent is in the server's hands,
        or never will be, within `bounds.REQUEST_IN_WITHIN_S` (its connect, TLS handshake
        and two writes under `CONNECT_TIMEOUT_S` each, then `READ_TIMEOUT_S` for the answer;
        its close a reset, `resetclose.py`), for a process that runs: `bounds.py` says what
        a stopped one leaves."""
        return self._deadline.bounded(deadline)

    def _refuse_late(self, event_name: str = "", **_kwargs: Any) -> None:
        """Run before and after botocore's adaptive rate limiter (`_around_the_limiter`):
        the last check is the one before the wire (review rev38z finding 2), and is made
        again before each connect the request's send opens, after the name lookup
        (`connectcheck`, review rev38z2 finding 3), and before each write of its bytes
        (review rev38z13 finding 1)."""
        connectcheck.disarm()
        if event_name.rpartition(".")[2] not in _BOUNDED_OPS:
            return
        self._refuse_past_deadline()
        # The driver's lease bound too (review rev38z14 finding 1): `DriverBound.
        # before_send` checks it at `before-send` only, and a name lookup or a dead
        # address's connect timeout after it could put a write past the round's lease.
        bound = self._bound
        if self._deadline.at is not None and bound is not None:
            connectcheck.arm(self._refuse_past_both)
        elif self._deadline.at is not None:
            connectcheck.arm(self._refuse_past_deadline)
        elif bound is not None:
            connectcheck.arm(bound.refuse_past_lease)

    def _refuse_past_both(self) -> None:
        self._refuse_past_deadline()
        if self._bound is not None:
            self._bound.refuse_past_lease()

    def _refuse_past_deadline(self) -> None:
        at = self._deadline.at
        if at is not None and self.monotonic() > at:
            raise SendDeadlinePassed("not sent: past the time its batch was told to go on "
                                     "for (the round may be recovered by now)")

    @property
    def client(self) -> Any:
        with self._lock:
            if self._probe_client is not None:  # the probe's own requests (`_probing`)
                return self._probe_client
            return self._client or self._make_client()

    @property
    def reader(self) -> Any:
        """The client of reads: bounded by `patience` if given, else `client`."""
        if self.patience is None:
            return self.client
        with self._lock:
            if self._reader is None:
                # One attempt per call: `_read` retries (`readretry.py` says why).
                self._reader = self._new_client(self.patience.read_timeout_s,
                                                {"mode": "standard", "total_max_attempts": 1})
            return self._reader

    def _read(self, what: str, call: Callable[[], T],
              passes: frozenset[str] = frozenset()) -> T:
        """`call()`, a read of `reader`: with `patience`, retried (`readretry.run`) and said
        while it waits (`waiting`, with `on_wait`). A failure whose code is in `passes` is
        raised as it came (the caller's: an absent key, an empty range); any other is a
        StoreError naming `what`."""
        tries = readretry.Tries()
        try:
            if self.patience is None:
                # `client`'s own retries (an executor's store; the GC driver's round store,
                # whose reads are said while they wait, as its writes are: newuser12 P15,
                # the journal's read-back and the record's numbering retried a store gone
                # away for 95 s without a line).
                with self._said_waiting(what):
                    return call()
            with contextlib.ExitStack() as stack:
                if self.on_wait is not None:
                    stack.enter_context(waiting(self.on_wait, self.endpoint_url or "S3", what,
                                                self.patience.say_after_s, tries.say))
                return readretry.run(call, self.patience.backoff(), self.read_waiter, tries)
        except Exception as e:
            if _code(e) in passes:
                raise
            raise self._error(what, e, tries) from e

    def _new_client(self, read_timeout_s: float, retries: Any) -> Any:
        import boto3  # imported lazily: local-only users do not need boto3
        from botocore.config import Config

        bound = self._bound
        # Adaptive mode's limiter on the monotonic clock (ratelimit.py, rev38z2 finding 2).
        retries, limited = ratelimit.client_retries(retries)
        config = Config(
            retries=retries,  # botocore's _RetryDict
            max_pool_connections=self.max_pool_connections,
            connect_timeout=CONNECT_TIMEOUT_S if bound is None
            else min(CONNECT_TIMEOUT_S, bound.timeout_s),
            read_timeout=read_timeout_s if bound is None
            else min(read_timeout_s, bound.timeout_s),
        )
        client = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint_url, config=config
        )
        # Each connection closed with a reset: a request's unsent bytes never reach the
        # server after its attempt ended (review rev38z11 finding 1; resetclose.py says why).
        resetclose.apply(client)
        if limited:
            ratelimit.register(client)
        if bound is not None:
            # Last before the wire, after the adaptive limiter's wait (`_around_the_limiter`).
            _around_the_limiter(client, bound.before_send)
            client.meta.events.register("needs-retry.s3", bound.after_attempt)
        # Each DeleteObjects attempt's outcome, for `_delete_once` (attempts.py says why),
        # and each attempt's start: one started and never ended is unsure (`starting`).
        client.meta.events.register("needs-retry.s3.DeleteObjects", attempts.note)
        client.meta.events.register_last("before-send.s3.DeleteObjects", attempts.starting)
        # A 200 that is not a whole DeleteResult is a failed attempt (deleteanswer.py).
        client.meta.events.register("before-parse.s3.DeleteObjects", deleteanswer.check)
        # A single DeleteObject answered a 2xx other than S3's 204 is a failed attempt too
        # (review rev38z4 finding 3, `deleteanswer.check_single`).
        client.meta.events.register("before-parse.s3.DeleteObject", deleteanswer.check_single)
        return client

    @contextlib.contextmanager
    def _said_waiting(self, what: str) -> Iterator[None]:
        """A GC driver's request still unanswered is said (newuser10 L4: its writes;
        newuser12 P15: the reads of its round store, which has no `patience`)."""
        bound = self._bound
        if bound is None or bound.say is None:
            yield
            return
        me = threading.get_ident()
        bound.begin(me)
        with waiting(bound.say, self.endpoint_url or "S3", what, bound.say_after_s,
                     lambda: bound.state(me)):
            yield

    def _make_client(self) -> Any:
        retries: Any = {"mode": "adaptive"}  # botocore's _RetryDict
        # Explicit, else AWS_MAX_ATTEMPTS / the config file (boto3's chain), else 10.
        if self.max_attempts is not None:
            retries["max_attempts"] = self.max_attempts
        elif "AWS_MAX_ATTEMPTS" not in os.environ:
            retries["max_attempts"] = 10
        client = self._new_client(READ_TIMEOUT_S, retries)
        _around_the_limiter(client, self._refuse_late)  # `_BOUNDED_OPS` only
        # The check again at each connect of a bounded request (`connectcheck`), until its
        # attempt ends.
        connectcheck.install()
        client.meta.events.register("needs-retry.s3", connectcheck.disarm)
        self._client = client
        return self._client

    def describe(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        return where + (f" at {self.endpoint_url}" if self.endpoint_url else "")

    def _full(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _error(self, what: str, e: Exception,
               tries: readretry.Tries | None = None) -> StoreError:
        """`tries`: a read of `reader`, whose silence and throttling have bounds to name;
        a request in `bounded_writes` has the same silence bound."""
        bounded = tries is not None or self._probe_client is not None
        if bounded and self.patience is not None:
            if _no_answer(e):
                return StoreError(f"{what} in {self.describe()}: {self.patience.no_answer()}")
            if tries is not None and tries.last is readretry.Failure.THROTTLED:
                return StoreError(f"{what} in {self.describe()}: "
                                  f"{self.patience.throttled(tries)}: {_answer(e)}")
        return StoreError(f"{what} in {self.describe()} failed: {_short(e)}")

    def put(self, key: str, data: bytes) -> None:
        try:
            with self._said_waiting(f"put {key!r}"):
                self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data)
        except Exception as e:  # botocore raises many unrelated types; all are store errors
            raise self._error(f"put {key!r}", e) from e

    # Conditional writes (issue 38 item 3), as the AWS S3 API reference gives them:
    # - PutObject `If-None-Match: *` writes only if no object has the key, else 412
    #   Precondition Failed; 409 ConditionalRequestConflict if a concurrent write won
    #   (retry). PutObject `If-Match: <etag>` writes only if the object's ETag is that one,
    #   else 412; 404 NoSuchKey if there is no object (AWS; SeaweedFS 4.48 answers 412).
    #   https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html,
    #   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
    # - DeleteObject `If-Match: <etag>`: 204 if it matched, 412 if not, 404 if there is no
    #   object (SeaweedFS: 412), 409 if a concurrent PUT or DELETE completed first.
    #   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html
    # A server that ignores the headers writes unconditionally: `require_conditional_writes`
    # asks it once (moto 5.2.5 and SeaweedFS 4.48 both enforce all three;
    # tests/store/test_conditional_writes.py), and the lease refuses a server that does not.

    def require_conditional_writes(self) -> None:
        """Check on a probe object that the server refuses what it must: a create over an
        existing object, a replace and a delete with an ETag the object does not have.
        Five requests, once per server in this process; NoConditionalWrites naming what it
        ignored. With `patience` (a command's control store, run before its round begins),
        each request is bounded and said as the control reads are (`_probing`)."""
        if self._conditional_ok or self._where() in _PROBED:
            return
        from epochgc.impl.gc.probes import probe_body

        # A key of its own: two rounds probing at once must not see each other's object.
        key = f"{PROBE_KEY}-{uuid.uuid4().hex}"
        with self._probing(key):
            self._remove_left_probes()
            # From the PUT on, a probe cut short may leave its object (newuser10 L10: its
            # last line said "nothing was written"): named, and said by the command.
            self.probe_left = key
            self.put(key, probe_body())
            try:
                ignored: list[str] = []
                if self.create_if_absent(key, b"created over an existing object") is not None:
                    ignored.append("PutObject If-None-Match: *")
                if self.replace_if_match(key, b"replaced with a wrong ETag",
                                         _NO_ETAG) is not None:
                    ignored.append("PutObject If-Match")
                if self.delete_if_match(key, _NO_ETAG) is not Outcome.CHANGED:
                    ignored.append("DeleteObject If-Match")
                gone = self.delete_batch([key])
            except BaseException:
                # A signal or a failure cut the probe short (newuser10 L6: a kill left the
                # object unnamed): no further request (the store may be what is slow); the
                # object is outside level_zero/ (never listed by GC) and is named here.
                self._say(f"the conditional-write probe's object {key!r} may be left in "
                          f"{self.describe()} (harmless: outside level_zero/; {_NEXT_PROBE})")
                raise
        if gone.errors:
            self._say(f"the conditional-write probe's object {key!r} was not deleted "
                      f"({next(iter(gone.errors.values()))}); harmless, outside level_zero/; "
                      f"{_NEXT_PROBE}")
        else:
            self.probe_left = None
        if ignored:
            raise NoConditionalWrites(
                f"{self.describe()} does not enforce conditional writes (it ignored "
                f"{', '.join(ignored)}): the GC lease would not exclude a second round, so "
                "no round runs on it")
        self._conditional_ok = True
        _PROBED.add(self._where())

    def _remove_left_probes(self) -> None:
        """Remove the probe objects earlier probes left (`gc.probes.left_over`: a killed
        process's, or any a day old), each only if unchanged since listed, and say so. A
        store that fails this is said, not fatal: the probe itself then says what fails."""
        from epochgc.impl.gc.probes import left_over

        removed: list[str] = []
        try:
            # a damaged one is said, kept, and fails nothing (review rev38z10 finding 3)
            for info, why in left_over(self, f"{PROBE_KEY}-", time.time(), self._say):
                if info.version and self.delete_if_match(info.key, info.version) \
                        in (Outcome.DELETED, Outcome.GONE):
                    removed.append(f"{info.key!r} ({why})")
        except StoreError as e:
            self._say(f"could not remove the probe objects earlier probes left: {e}")
        if removed:
            self._say(f"removed {len(removed)} conditional-write probe object(s) an earlier "
                      f"probe left: {', '.join(removed)}")

    def _where(self) -> tuple[str | None, str, str]:
        return (self.endpoint_url, self.bucket, self.prefix)

    def _say(self, line: str) -> None:
        if self.on_wait is not None:
            self.on_wait(line)

    def _probing(self, key: str) -> contextlib.AbstractContextManager[None]:
        """The probe's requests on a client bounded as the control reads are (`patience`:
        its read timeout per attempt, its attempts) and said while one waits
        (newuser10 L6: a DeleteObjects answered after 100 s held `gc` silent for 60 s per
        attempt, before the round, and a Ctrl-C with it). Without `patience` (an executor's
        store, a test's), the ordinary client. The caller runs this before its round
        begins, so a signal ends it at once (`RoundStop.before_round`)."""
        return self.bounded_writes(f"the conditional-write probe on {key!r}")

    @contextlib.contextmanager
    def bounded_writes(self, what: str) -> Iterator[None]:
        """This store's requests in the block (writes too) on a client bounded as the
        control reads are (`patience`) and said through `on_wait` while one waits (`what`
        names them): for a command's few writes before its work, as `_probing`'s and
        `cluster start`'s store preflight (newuser11 M1: its PUT on the ordinary client
        was silent for 11 minutes on an endpoint that never answers). Without `patience`,
        the ordinary client."""
        if self.patience is None:
            yield
            return
        client = self._new_client(self.patience.read_timeout_s,
                                  {"mode": "standard",
                                   "total_max_attempts": self.patience.attempts})
        with self._lock:
            self._probe_client = client
        try:
            with waiting(self.on_wait, self.endpoint_url or "S3", what,
                         self.patience.say_after_s):
                yield
        finally:
            with self._lock:
                self._probe_client = None
            client.close()

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        try:
            with self._said_waiting(f"create {key!r}"):
                r = self.client.put_object(
                    Bucket=self.bucket, Key=self._full(key), Body=data, IfNoneMatch="*"
                )
        except Exception as e:
            if _code(e) in _CHANGED:
                return None
            raise self._conditional_error(f"create {key!r} if absent", e) from e
        return _etag(r, key)

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        require_version(key, version)
        try:
            with self._said_waiting(f"replace {key!r}"):
                r = self.client.put_object(
                    Bucket=self.bucket, Key=self._full(key), Body=data, IfMatch=version
                )
        except Exception as e:
            if _code(e) in _CHANGED or _code(e) in _GONE:
                return None
            raise self._conditional_error(f"replace {key!r} if unchanged", e) from e
        return _etag(r, key)

    def delete_if_match(self, key: str, version: str) -> Outcome:
        """DeleteObject If-Match: `version`. THE RULE's model (top of this module) holds
        for one key too (review rev38z9 finding 3): an intermediary may have sent this
        request before, that copy may have removed the object, and the answer seen may be
        a later copy's: 404 NoSuchKey (no object has the key), 412 (SeaweedFS's answer for
        an absent key), 409 (a concurrent request on the key completed first: the earlier
        copy; https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html).
        None of them tells "was not there" from "removed by this request", so an absent key
        is `GONE` (removed, by this request or another), never `ABSENT`; after a 412 or a
        409 the store is asked which."""
        require_version(key, version)
        try:
            with self._said_waiting(f"delete {key!r}"):
                self.client.delete_object(Bucket=self.bucket, Key=self._full(key),
                                          IfMatch=version)
        except Exception as e:
            code = _code(e)
            if code in _GONE:
                return Outcome.GONE
            if code in _CHANGED or code in _CONFLICT:
                info = self.head(key)
                if info is None:
                    return Outcome.GONE
                if code in _CHANGED or (info.version and info.version != version):
                    return Outcome.CHANGED  # another version: no copy of ours removes it
            raise self._conditional_error(f"delete {key!r} if unchanged", e) from e
        return Outcome.DELETED

    def get_versioned(self, key: str, limit: int) -> Versioned | None:
        """GetObject returns the ETag of the bytes it returns: one request, one version."""
        def get() -> tuple[dict[str, Any], bytes]:
            r = self.reader.get_object(
                Bucket=self.bucket, Key=self._full(key), Range=f"bytes=0-{max(0, limit - 1)}"
            )
            return r, r["Body"].read()

        try:
            r, body = self._read(f"get {key!r}", get, _GONE | {"InvalidRange"})
        except StoreError:
            raise
        except Exception as e:
            if _code(e) in _GONE:
                return None
            info = self.head(key)  # InvalidRange: an empty object
            return None if info is None else Versioned(b"", info.version)
        return Versioned(body, _etag(r, key))

    def _conditional_error(self, what: str, e: Exception) -> StoreError:
        if _code(e) in _CONFLICT:
            return ConditionalConflict(str(self._error(what, e)))
        return self._error(what, e)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self._full(key)}
        if start is not None or end is not None:
            if end is not None and end <= (start or 0):
                return b""
            last = "" if end is None else str(end - 1)  # HTTP ranges are inclusive
            args["Range"] = f"bytes={start or 0}-{last}"
        try:
            body: bytes = self._read(f"get {key!r}",
                                     lambda: self.reader.get_object(**args)["Body"].read(),
                                     _GONE | {"InvalidRange"})
            return body
        except StoreError:
            raise
        except Exception as e:
            if _code(e) in _GONE:
                raise StoreError(f"{key!r} does not exist in {self.describe()}") from None
            return b""  # InvalidRange

    def missing_root(self) -> str | None:
        # A HeadObject's 404 does not say whether the key or the bucket is missing (a HEAD
        # answer has no body to carry `NoSuchBucket`); HeadBucket does (S3 API reference,
        # HeadBucket: "404 Not Found" if the bucket does not exist). newuser5 G7.
        try:
            self._read(f"head bucket {self.bucket!r}",
                       lambda: self.reader.head_bucket(Bucket=self.bucket),
                       frozenset({"404", "NoSuchBucket"}))
        except StoreError:
            return None  # the bucket's state is unknown: the caller's own error stands
        except Exception:
            return f"bucket {self.bucket!r} does not exist"
        return None

    def _head_object(self, key: str) -> dict[str, Any] | None:
        """HeadObject's answer; None if there is no such object."""
        try:
            return self._read(f"head {key!r}", lambda: dict(
                self.reader.head_object(Bucket=self.bucket, Key=self._full(key))), _GONE)
        except StoreError:
            raise
        except Exception:
            return None  # _GONE

    def head(self, key: str) -> ObjectInfo | None:
        r = self._head_object(key)
        if r is None:
            return None
        # The ETag is the version conditional writes compare (issue 38 item 3: without it
        # every conditional write of the lease was a write by name).
        return ObjectInfo(key, int(r["ContentLength"]), r["LastModified"].timestamp(),
                          str(r.get("ETag", "")))

    def stamp(self, key: str) -> Stamp | None:
        """The object's `Last-Modified` against the same answer's `Date`, both the server's
        clock (S3 API reference: HeadObject's `Last-Modified`, "Date and time when the
        object was last modified", and the common response header `Date`, "The date and
        time Amazon S3 responded"; https://docs.aws.amazon.com/AmazonS3/latest/API/
        API_HeadObject.html, .../RESTCommonResponseHeaders.html), so this host's clock
        skew does not enter. Both are HTTP dates, whole seconds (RFC 9110 5.6.7): the
        write was before `Last-Modified` + 1 s and the answer at or after `Date`. None
        without a `Date` (a proxy that drops it): the caller then takes the write as now."""
        r = self._head_object(key)
        if r is None:
            return None
        headers = r.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        try:
            answered = email.utils.parsedate_to_datetime(headers["date"]).timestamp()
        except (KeyError, TypeError, ValueError):
            return None
        return Stamp(r["LastModified"].timestamp() + 1.0, answered)

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = MAX_PAGE_SIZE,
        until: str | None = None,  # S3 has no end bound: pages are always full
    ) -> ListPage:
        args: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": min(limit, MAX_PAGE_SIZE),
        }
        if start_after:
            args["StartAfter"] = self.prefix + start_after
        r = self._read(f"list {prefix!r}", lambda: self.reader.list_objects_v2(**args))
        cut = len(self.prefix)
        objects = [
            ObjectInfo(o["Key"][cut:], int(o["Size"]), o["LastModified"].timestamp(),
                       str(o.get("ETag", "")))
            for o in r.get("Contents", [])
        ]
        return ListPage(objects, truncated=bool(r.get("IsTruncated")))

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        """One DeleteObjects, then the keys it failed with a retryable code again (bounded,
        with jittered backoff); what still fails is returned in `errors`."""
        return self._delete(check_batch(keys), {})

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        """DeleteObjects with each object's listed ETag (S3's conditional delete): a server
        that supports it (AWS S3) refuses a key rewritten since with PreconditionFailed,
        reported in `changed`; one that ignores the field (moto 5.2: it checks If-Match
        only on a single DeleteObject) deletes by name, as `delete_batch` does."""
        batch = check_batch(items)
        return self._delete([k for k, _ in batch], {k: v for k, v in batch if v})

    def _delete(self, batch: list[str], etags: dict[str, str]) -> DeleteResult:
        """One DeleteObjects, the keys it failed with a retryable code again (`key_retry`),
        then each key's record by THE RULE (top of this module), in `_settle`."""
        result = DeleteResult(len(batch))
        pending = batch
        retry = 0
        # Key -> when (monotonic) the latest attempt that named it and may have reached the
        # server ended (`attempts.sent_at`; a DeleteResult's answer: when it came). A key
        # not here was never sent (rule (c)).
        sent_at: dict[str, float] = {}
        # Keys worth a HEAD at once (`_Answer.ask`), and keys a per-key 412 answered
        # (`_Answer.conditioned`): `_settle`.
        ask: set[str] = set()
        conditioned: set[str] = set()
        while pending:
            answer = self._delete_once(pending, etags)
            if answer.sent_at is not None:
                _ended_at(sent_at, pending, answer.sent_at)
            # Rule (b). S3's DeleteObjects answers "Deleted" for a key that did not exist
            # ("If the object specified in the request isn't found, Amazon S3 confirms the
            # deletion by returning the result as deleted", API_DeleteObjects.html), so only
            # a conditional delete's NoSuchKey (S3 User Guide, conditional-deletes.html)
            # says "absent", and says it of the moment its copy was carried out, which an
            # earlier copy (review rev38z5 finding 4) or a botocore retry after an
            # ambiguous attempt (review rev38x finding 1) may have made so: never `gone`
            # (absent before the batch), as the journal's read-back counts an absent key.
            result.gone_unattributed.update(answer.absent)
            ask.update(answer.ask)
            conditioned.update(answer.conditioned)
            again = [k for k, (c, _) in answer.failed.items() if c in RETRYABLE_KEY_CODES]
            last = not again or retry + 1 >= self.key_retry.policy.attempts
            result.errors.update({k: f"{c}: {m}" for k, (c, m) in answer.failed.items()
                                  if last or c not in RETRYABLE_KEY_CODES})
            if last:
                break
            self.key_retry.wait(retry)
            retry += 1
            pending = again
        self._settle(result, sent_at, ask, conditioned, etags)
        return result

    def _settle(self, result: DeleteResult, sent_at: dict[str, float], ask: set[str],
                conditioned: set[str], etags: dict[str, str]) -> None:
        """THE RULE (top of this module) for the keys of `result.errors`: a key some attempt
        that may have reached the server named (`sent_at`) is not decided by its answer:
        asked of the store at once if in `ask` or `conditioned` (absent: `gone_unattributed`;
        a 412's key there at another version than listed: `changed`), and otherwise
        `unknown`, which the journal's read-back asks after waiting from the latest such
        attempt's end (`unanswered_at`). A key no attempt of which was sent stays an error:
        nothing of it can land (rule (c))."""
        undecided = sorted(result.errors.keys() & sent_at.keys())
        now = [k for k in undecided if k in ask or k in conditioned]
        found: dict[str, ObjectInfo | StoreError | None] = {}
        if now:
            with ThreadPoolExecutor(min(_RESOLVERS, len(now)),
                                    thread_name_prefix="epochgc-resolve") as pool:
                found = dict(zip(now, pool.map(self._head_or_error, now), strict=True))
        for key in undecided:
            why = result.errors[key]
            if key not in found:
                said = ("asked of the store at the read-back, after the wait for a request "
                        "that may still be applied (a copy an intermediary sent before may "
                        "delete it)")
            elif (info := found[key]) is None:
                del result.errors[key]
                result.gone_unattributed.add(key)
                continue
            elif isinstance(info, StoreError):
                said = f"asking the store failed too ({info})"
            elif key in conditioned and info.version and etags.get(key, info.version) \
                    != info.version:
                # The server refused this key by its ETag (412), which every copy carries,
                # and the object there now is another: no copy deletes it.
                del result.errors[key]
                result.changed.add(key)
                continue
            else:
                said = "still there right after an unanswered request (asked the store)"
            result.errors[key] = f"{why}; whether it was deleted is unknown: {said}"
            result.unknown.add(key)
        result.unanswered_at = max((sent_at[k] for k in result.unknown), default=None)

    def _head_or_error(self, key: str) -> ObjectInfo | StoreError | None:
        try:
            return self.head(key)
        except StoreError as e:
            return e

    def _delete_once(self, batch: list[str], etags: dict[str, str] | None = None) -> _Answer:
        """One request (botocore's attempts of one call): the keys it did not delete, with
        (code, message), those a per-key NoSuchKey says are not there, and what `_settle`
        needs (`_Answer`). A request that failed as a whole (after botocore's own retries)
        fails every key, non-retryably unless its code is a retryable one (a whole 503
        SlowDown). `etags`: the ETag each key must still have."""
        etags = etags or {}
        objects: list[dict[str, str]] = [
            {"Key": self._full(k), "ETag": etags[k]} if k in etags else {"Key": self._full(k)}
            for k in batch
        ]
        client = self.client
        attempts.begin()
        try:
            # Quiet: the reply lists only failures, which is all we need.
            r = client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
            )
        except Exception as e:
            msg = str(self._error("delete batch", e))
            # Every attempt of the call counts, not only the last (a 500 then a refusal:
            # review rev38y finding 1; then our own StoppedNotSent: finding 3); an attempt
            # started whose answer could not be read is noted, unsure (`attempts.finish`,
            # review rev38z3 finding 2).
            attempts.finish(e)
            retries = _retries(getattr(e, "response", None))
            if attempts.seen():
                sent = attempts.sent_at(retries)
                unsure = attempts.unsure(retries)
                throttled = attempts.only_throttled(retries)
            else:
                # No attempt reached our `before-send` handler (`attempts.starting`, on
                # every client this store makes): raised before the wire (a parameter or
                # credential error). A client without the handler: sent if answered.
                unsure = _applied_maybe(e)
                sent = (time.monotonic() if unsure
                        or isinstance(getattr(e, "response", None), dict) else None)
                throttled = False
            if sent is None:
                code = _REQUEST_FAILED  # rule (c)
            elif throttled:
                code = _REQUEST_THROTTLED
            elif unsure:
                code = _REQUEST_UNSURE
            else:
                # Answered whole, by S3 or what speaks for it, with any code (review rev38z9
                # finding 1: an allow-list of refusals decided "not deleted" for the rest):
                # kept, so a retryable one (503 SlowDown) is retried per key.
                code = _code(e) or _REQUEST_FAILED
            return _Answer(dict.fromkeys(batch, (code, msg)), set(), sent,
                           set(batch) if code == _REQUEST_UNSURE else set())
        failed, absent, unsure_keys = self._per_key(r, batch)
        retries = _retries(r)
        ask = set(unsure_keys)
        if attempts.unsure(retries) and not attempts.only_throttled(retries):
            # botocore sent it again after an attempt that may have been applied (a 5xx
            # other than 503 SlowDown, a dropped connection: attempts.py): asked at once.
            ask.update(batch)
        # The answer came now: its own attempt is the latest that named these keys.
        return _Answer(failed, absent, time.monotonic(), ask,
                       {k for k, (code, _) in failed.items() if code in _CHANGED})

    def _per_key(self, r: dict[str, Any], batch: list[str]
                 ) -> tuple[dict[str, tuple[str, str]], set[str], set[str]]:
        """A whole DeleteResult's per-key results: the keys not deleted (code, message),
        those it says were not there, and those whose delete may have been applied for all
        it says (`keycodes.may_have_applied`; review rev38z5 finding 1). S3 gives each key
        one result, "success or failure" (API_DeleteObjects.html), in <Deleted> or in
        <Error>: a key the answer names more than once (Deleted and Error, or two Errors)
        has no one result, so whatever its Error says, it is unsure (finding 3: a key
        named Deleted and AccessDenied was taken as refused, though it had been deleted).
        Quiet mode (`_delete_once`) lists no <Deleted>; a server that lists them anyway
        names each key once. An <Error> naming no key of the batch (a key the server
        encoded, or that this store did not send) leaves the batch's results unknown: in
        Quiet mode a key not named is taken as deleted, and the key that <Error> was about
        may be one of those (review rev38z5 finding 3's note, rev38z3's left-alone item):
        every key of the batch the answer does not name is then unsure too."""
        cut = len(self.prefix)
        failed: dict[str, tuple[str, str]] = {}
        absent: set[str] = set()
        unsure: set[str] = set()
        named: set[str] = {str(d.get("Key", ""))[cut:] for d in r.get("Deleted", [])}
        sent = set(batch)
        strays: list[str] = []
        for err in r.get("Errors", []):
            key, code = str(err.get("Key", ""))[cut:], str(err.get("Code"))
            message = str(err.get("Message", ""))
            if key not in sent or not str(err.get("Key", "")).startswith(self.prefix):
                strays.append(str(err.get("Key", "")))
                continue
            if key in named:
                unsure.add(key)
                absent.discard(key)
                failed[key] = (code, f"{message} (the same answer names the key again: "
                                     "no one result for it)")
                continue
            named.add(key)
            if code in _GONE:
                absent.add(key)
                continue
            if keycodes.may_have_applied(code):
                unsure.add(key)
            failed[key] = (code, message)
        if strays:
            why = (f"the answer names {len(strays)} key(s) not in the request (first "
                   f"{strays[0][:80]!r}): which of the batch's keys it refused is unknown")
            for key in sent - failed.keys() - absent:
                failed[key] = (_ANSWER_UNMATCHED, why)
                unsure.add(key)
        return failed, absent, unsure

    def versioning(self) -> str | None:
        """The bucket's versioning status ("Enabled" or "Suspended"), None if never enabled.
        In a versioned bucket a delete only adds a delete marker: the bytes stay."""
        r = self._read("get bucket versioning",
                       lambda: self.reader.get_bucket_versioning(Bucket=self.bucket))
        status = r.get("Status")
        return str(status) if status else None

    def close(self) -> None:
        for name in ("_client", "_reader"):
            client = getattr(self, name)
            if client is not None:
                client.close()
                setattr(self, name, None)


@dataclass(frozen=True)
class _Answer:
    """One DeleteObjects call's answer (`S3Store._delete_once`), as THE RULE (top of this
    module) needs it."""

    failed: dict[str, tuple[str, str]]  # keys not deleted: (code, message)
    absent: set[str]  # keys a per-key NoSuchKey answered (rule (b))
    # When (monotonic) the latest attempt of the call that may have reached the server
    # ended; None: none was sent (rule (c))
    sent_at: float | None
    # Keys worth a HEAD at once: an attempt or their per-key code says the delete may have
    # been applied (not only a 200 SlowDown: `attempts.throttled`); `keycodes.may_have_applied`
    ask: set[str] = field(default_factory=set)
    # Keys answered a per-key 412: the server checks their ETag (`S3Store._settle`)
    conditioned: set[str] = field(default_factory=set)


def _ended_at(sent_at: dict[str, float], keys: Iterable[str], at: float) -> None:
    """An attempt naming each of `keys` that may have reached the server ended at `at`
    (monotonic): `sent_at` keeps the latest such time per key (`S3Store._delete`)."""
    for key in keys:
        sent_at[key] = max(sent_at.get(key, at), at)


def _around_the_limiter(client: Any, handler: Callable[..., None]) -> None:
    """`handler` on botocore's `before-send` event twice: before the adaptive rate
    limiter's wait (a request already refused takes no token and waits for none) and after
    every other handler of the event, the limiter's wait included (review rev38z finding
    2), so the last check is the last thing before the wire. botocore calls the handlers
    of the most specific name first ("the values associated with the node furthest from
    the root ... come before nodes closer to the root", `hooks.py` `_PrefixTrie.
    _get_items`), and within one name those
    registered first, then middle, then last (`hooks.py` `register_last`: "called after
    handlers registered with register_first() and register()"). The adaptive retry mode's
    `ClientRateLimiter.on_sending_request`, which waits for a token of its bucket
    (`retries/adaptive.py` `register_retry_handler`, `retries/bucket.py`; ours is refilled
    by the monotonic clock, `ratelimit.py`), is registered on the bare `before-send`
    (middle): a check on `before-send.s3.<Op>` ran
    before that wait, so a request could be sent long after the check passed. Checked
    against botocore 1.44.8's source (hooks.py, retries/adaptive.py, endpoint.py
    `_do_get_response`: `before-send` is emitted, then the request is sent)."""
    client.meta.events.register("before-send.s3", handler)
    client.meta.events.register_last("before-send", handler)


def _retries(response: object) -> int | None:
    """botocore's RetryAttempts ("num retries", `endpoint.py`) of a parsed answer."""
    if not isinstance(response, dict):
        return None
    value = response.get("ResponseMetadata", {}).get("RetryAttempts")
    return value if isinstance(value, int) else None


def _applied_maybe(e: Exception) -> bool:
    """A request that failed this way may have reached the server and been applied: a 5xx
    answer, or no answer at all (a connection closed or timed out after it was sent). Only
    for a call the per-attempt record saw no attempt of (`attempts.seen`: a client without
    its handler); a connection never made is not sent (`attempts.not_sent`, review rev38z
    finding 4; a proxy error only when the proxy was never reached, rev38z2 finding 4), nor
    is an attempt our own `before-send` refused (`SendDeadlinePassed`: an earlier attempt
    of it is in the record)."""
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    if attempts.not_sent(e):
        return False
    if isinstance(e, BotoConnectionError | HTTPClientError):
        return True
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return isinstance(status, int) and status >= 500
    return False


def _no_answer(e: Exception) -> bool:
    """The endpoint said nothing: a connect or read timeout (after botocore's attempts)."""
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

    return isinstance(e, ConnectTimeoutError | ReadTimeoutError)


def _etag(reply: dict[str, Any], key: str) -> str:
    """The version a 2xx answer names; NoVersion if it names none (a write: applied)."""
    etag = reply.get("ETag")
    if not etag:
        raise NoVersion(f"the server's answer for {key!r} carries no ETag: its version is "
                        "unknown, so no conditional write can follow")
    return str(etag)


def _code(e: Exception) -> str:
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _answer(e: Exception) -> str:
    """The server's answer, as "CODE: Message" (botocore's text about its own retries, "reached
    max retries: 0", is not the store's word)."""
    response = getattr(e, "response", None)
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    return f"{code}: {message}" if code and message else _short(e)


def _short(e: Exception) -> str:
    code = _code(e)
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"{code}: {text}" if code and code not in text else text
