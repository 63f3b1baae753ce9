"""What one Spark task does in the delete phase: batched deletes, a few requests in flight,
journaled before and after their requests (`journal.py`), one intent per group of batches:
a task's groups are 1, 3, then `INTENT_BATCHES` (4) batches.

Only the DeleteObjects request holds one of the `concurrency` delete slots; each batch's
STOP check and journal writes run in the same worker before and after it, outside the slot,
so batch k+1's intent is written while batch k deletes (issue 38, S3 at the limit: with the
three round trips and the serial STOP check inside the slot, a slot carried a request about
half the time). The order per batch is unchanged: intent durable, then the request, then
its outcome; the outcome rides in the next batch's intent when that batch is ready (the
listing holds it, waiting for a slot), else it is written alone (`JournalWriter.done`).
The STOP check is the task's "go on?" to its driver where it has one (`gate.py`).

One intent names the keys of up to `INTENT_BATCHES` batches (issue 38, requests per key:
one intent PUT per DeleteObjects was 40 of a round's ~107 requests beyond the least, one
per two still half a request per DeleteObjects), and one outcome covers them (a group
whose every request deleted every key writes that one outcome, at its end); each request
is still asked for ("go on?") right before it is sent, holding its slot, so a group's
later request is bounded like its first (`bounds.py`), and a request told "no" is not
sent: its keys are in the outcome as `journal.UNSENT` (not deleted, no error: listed again
next round). A request that found keys already gone, rewritten or failed has its answer
written (alone) before the group's next request is sent (in a group of any size: the rule
is per request), its later batches `journal.NOT_ANSWERED` (review rev38s finding 3: a kill
during that request lost the answer, and the store cannot tell "gone before" from
"deleted"); the group's outcome supersedes it (alone: only a clean outcome rides in an
intent, `JournalWriter.done`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import asdict, dataclass, fields

from epochgc.impl.gc.beacon import Tally
from epochgc.impl.gc.journal import NOT_ANSWERED, UNSENT, JournalWriter
from epochgc.impl.gc.killpoint import reach
from epochgc.impl.gc.pools import InlineExecutor, submitter
from epochgc.impl.store.base import (
    MAX_DELETE_BATCH,
    DeleteResult,
    ObjectStore,
    StoreError,
    send_clock,
)

# (key, size, age_s, version): what a delete needs (the version listed, for a conditional
# delete), and what the journal and manifest record (all but the version).
Doomed = tuple[str, int, float, str]
# Test-only (issue 29, signal tests): a path; the first batch journaled in this process
# creates `<path>.reached` and waits for the round's STOP marker, so a test can signal
# the `epochgc gc` process at a known point instead of sleeping and hoping.
PAUSE_ENV = "EPOCHGC_GC_TEST_PAUSE"
# Test-only (issue 41): a path; the first batch whose intent is written in this process
# creates `<path>.reached` and is held there, its request never sent, until its task is
# killed (or `_PAUSE_LIMIT_S`): a request that does not end, so that a test sees a stop
# not wait for it without bound.
HOLD_ENV = "EPOCHGC_GC_TEST_HOLD"
_PAUSE_LIMIT_S = 300.0
# Batches in the workers per delete slot: a group's chain is STOP check, intent, its
# requests, outcome, of which only each request holds a slot; four batches per slot keep
# it busy.
PIPELINE = 4
# Delete batches per journal intent (and per outcome): a task's first group is
# `FIRST_BATCHES` (1) batch, its second the rest of a full group (`INTENT_BATCHES` -
# `FIRST_BATCHES`, 3), then `INTENT_BATCHES` (4) each (`group_sizes`). The first delete
# waits for one batch's listing and one intent of it. The first two groups start together
# and end two requests apart (at two slots, half a group: the widest spacing), so when a
# slot frees, a group whose intent was written meanwhile is there to take it, with a
# request's time to spare (issue 38, task s27b: with 2 and 2 the first two groups ended
# together and one slot waited a whole intent for the fourth group, 4.35 s at the
# bench's 3.3 s latency; after it the slots' groups ended one request apart, so each next
# intent came just in time, and an intent PUT slower than a DeleteObjects idled a slot).
# The later groups are formed while the earlier groups' requests hold the slots (a listing
# runs far ahead of the deletes), so their size costs no wait, and the intent PUTs (and
# outcomes) of a long task are one per four batches (issue 38, requests per key: at 120
# keys a prefix one intent per two batches was half a request per DeleteObjects, 1.137x
# the least; 1, 3, 4, ... makes as many intents as 2, 2, 4, ...). Not more: a group sends
# its requests one after another, so the task's last groups may leave a slot idle up to a
# group's length (with 8: the stage at 0.90 of the bound against 0.94 on the same load),
# and a kill leaves up to `INTENT_BATCHES` batches an open group to resolve by asking the
# store, key by key (`open_batches_at_most`).
FIRST_BATCHES = 1
INTENT_BATCHES = 4
SECOND_BATCHES = INTENT_BATCHES - FIRST_BATCHES


def group_sizes(largest: int | None) -> Iterator[int]:
    """Batches per intent, one group after another in a task: `largest` each, or with None
    `FIRST_BATCHES` (1), `SECOND_BATCHES` (3), then `INTENT_BATCHES` (4) each."""
    if largest is not None:
        return itertools.repeat(max(1, largest))
    return itertools.chain([FIRST_BATCHES, SECOND_BATCHES], itertools.repeat(INTENT_BATCHES))


def groups_in_flight(concurrency: int, largest: int) -> int:
    """Groups in the workers at once: `PIPELINE` batches per delete slot, and at least two
    groups more than the slots, so that a group's intent is written while the others'
    requests hold every slot (a group sends its requests one after another), and a slot
    that frees while the spare group's replacement still writes its intent finds the other
    spare (task s27b: with one spare, slots freed within an intent's round trip of each
    other left one idle, 1.3-1.7 s each at the bench's 3.2 s latency; more as the groups'
    ends drift together)."""
    slots = max(1, concurrency)
    return max(slots + 2, slots * PIPELINE // max(1, largest))


def batches_taken_at_most(concurrency: int, largest: int | None = None) -> int:
    """The most batches a task's deletes take from its listing before they wait for a
    request to answer: its first `groups_in_flight` groups and the next, formed while it
    waits (16 at two delete slots, 24 at four; 18 at four with two batches an intent,
    `largest=2`). The listing's own lookahead comes on top (`stream.py`)."""
    depth = groups_in_flight(concurrency, INTENT_BATCHES if largest is None else largest)
    return sum(itertools.islice(group_sizes(largest), depth + 1))


def open_batches_at_most(concurrency: int, largest: int | None = None) -> int:
    """The most batches in a task's groups in the workers at once (journaled, their
    outcome not yet written): what a kill -9 leaves for the read-back to resolve by asking
    the store, key by key (HEADs), besides the outcomes still waiting to ride in the next
    intent. 16 at two delete slots, 24 at four (12 and 20 with one spare group before
    task s27b; 8 and 16 with two batches an intent)."""
    most = INTENT_BATCHES if largest is None else max(1, largest)
    return groups_in_flight(concurrency, most) * most


@dataclass
class DeleteStats:
    deleted: int = 0
    already_gone: int = 0  # absent when deleted: removed by someone else
    changed: int = 0  # skipped by a conditional delete: rewritten since it was listed
    gone_unattributed: int = 0  # absent after an ambiguous answer: by us or another writer
    errors: int = 0
    delete_requests: int = 0
    bytes_deleted: int = 0
    stopped: int = 0  # 1 if the task stopped early at the round's STOP marker
    # Issue 30 (production's "backpressure seconds"): how long the task's listing waited
    # for a free delete slot (every one of its `concurrency` requests in flight; with one
    # request run in the task's own thread, the time of each request).
    backpressure_s: float = 0.0

    def add(self, other: DeleteStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def batches(items: Iterable[Doomed], size: int) -> Iterator[list[Doomed]]:
    batch: list[Doomed] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def delete_keys(
    store: ObjectStore,
    items: Iterable[Doomed],
    batch_size: int = MAX_DELETE_BATCH,
    concurrency: int = 4,
    on_error: Callable[[str, str], None] | None = None,
    pool: Executor | None = None,
    journal: JournalWriter | None = None,
    tally: Tally | None = None,
    group: int | None = None,
) -> DeleteStats:
    """Delete (key, size, age_s) items in batches with at most `concurrency` requests in
    flight. `pool`: a long-lived pool of `concurrency` workers to borrow (`impl.gc.pools`).
    `journal`: each group of batches (`group` each, or with None growing: `group_sizes`) is
    journaled before its requests (a group that cannot be is not sent: the StoreError
    propagates) and after them; before each group's intent,
    and before each request, the round's STOP marker is checked (in the group's worker,
    beside the other groups' requests), and once it is seen no further request is sent
    (those in flight finish; every group with an intent gets its outcome, the keys never
    sent as `UNSENT`). Up to `groups_in_flight` groups are in the workers at once, at most
    `concurrency` of their batches in a request. `tally`: keys deleted, added as each answer
    arrives (for the progress display only; what is recorded comes from the journal).

    A StoreError for a whole request counts its keys as errors (they are listed again next
    round); any other exception is a bug or a crash and propagates.
    """
    if not 1 <= batch_size <= MAX_DELETE_BATCH:
        raise ValueError(f"batch size must be in 1..{MAX_DELETE_BATCH}, got {batch_size}")
    stats = DeleteStats()

    slots = _Slots(concurrency)
    stop = threading.Event()  # a worker saw the STOP marker: no further batch starts

    def ask(asked: float, now: bool) -> float | None:
        """Before a request: the time its send bound counts from (`asked`, or a new ask's
        with `now` or once `asked` is half the send window old), or None if the round said
        stop. Holding its slot, a request asks the driver's gate again (a datagram, no
        store request). With no gate each ask is a HEAD of STOP: a group's later request
        asks before it waits for a slot (no slot held through a round trip; one HEAD per
        batch, as when each batch had its own intent)."""
        if journal is None:
            return asked
        if stop.is_set():
            return None
        window = journal.send_within_s
        if now or (window is not None and send_clock() - asked > window / 2):
            asked = send_clock()
            if journal.stop_requested():
                stop.set()
                return None
        return asked

    def one(group: list[list[Doomed]]) -> _Chain:
        asked = send_clock()  # before the "go on?": the intent's bound counts from here
        if journal is not None and (stop.is_set() or journal.stop_requested()):
            stop.set()
            journal.not_coming()  # the outcomes that waited for this intent go alone
            return _Chain(group, [])  # not journaled, not sent: listed again next round
        with _bounded(store, journal, asked):
            seq = (journal.intent([i for b in group for i in b], len(group))
                   if journal is not None else 0)
        reach("intent-written")
        _test_hold()
        results: list[DeleteResult | None] = []
        last: float | None = asked  # None once told "no": the group's rest is not sent
        gated = journal is not None and journal.gate is not None
        for n, batch in enumerate(group):
            if (journal is not None and n > 0 and last is not None
                    and _found_more(results[-1])):
                # Review rev38s finding 3: the previous request found keys already gone,
                # rewritten or failed. Only its answer can tell those apart from keys this
                # round deleted (a HEAD cannot), so it is made durable before this request
                # is sent: a kill while it runs then loses nothing the store cannot
                # answer. The common batch (every key deleted) needs no write: a kill
                # later is resolved by HEADs that say the same.
                try:
                    journal.done(seq, _answered_so_far(group, results), len(group),
                                 so_far=True)
                except StoreError:
                    last = None  # not durable: this request is not sent (listed again)
            if last is not None and n > 0 and not gated:
                last = ask(last, True)  # no gate: a HEAD of STOP, before waiting for a slot
            # The request alone holds a slot (the journal writes overlap others'), taken
            # in turn (at the task's end: the group with most batches left first).
            with slots.take(len(group) - n):
                last = ask(last, gated) if last is not None else None
                if last is None:
                    results.append(None)  # told "no": not sent
                    continue
                with _bounded(store, journal, last):
                    result = _send(store, batch)
            results.append(result)
            reach("batch-deleted")
            if tally is not None:
                tally.add(deleted=result.deleted)
        if journal is not None:
            journal.done(seq, _merged(group, results), sum(r is not None for r in results))
            reach("done-written")
            _test_pause(journal)
        return _Chain(group, results)

    def account(fut: Future[_Chain]) -> None:
        chain = fut.result()
        if len(chain.results) < len(chain.group) or None in chain.results:
            stats.stopped = 1
        for batch, result in zip(chain.group, chain.results, strict=False):
            if result is None:
                continue
            stats.delete_requests += 1
            stats.deleted += result.deleted
            stats.already_gone += len(result.gone)
            stats.changed += len(result.changed)
            stats.gone_unattributed += len(result.gone_unattributed)
            stats.errors += len(result.errors)
            kept = (result.errors.keys() | result.gone | result.changed
                    | result.gone_unattributed)
            stats.bytes_deleted += sum(s for k, s, _, _ in batch if k not in kept)
            if on_error is not None:
                for key, why in result.errors.items():
                    on_error(key, why)

    def settle(pending: set[Future[_Chain]]) -> set[Future[_Chain]]:
        """The groups still in the workers once one more may start: waits for one if
        `depth` are (bounded: never queue the whole key set), and accounts every finished
        one now (a bug's exception stops the loop at once, not `depth` groups later). A
        function, so that no local keeps a finished group's items alive."""
        if len(pending) >= depth:
            waited = time.monotonic()
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            stats.backpressure_s += time.monotonic() - waited
            for fut in done:
                account(fut)
        for fut in [f for f in pending if f.done()]:
            pending.discard(fut)
            account(fut)
        return pending

    inline = pool is None and concurrency == 1
    if inline:
        # One request at a time: run it in this thread. A pool thread would only hand the
        # interpreter lock back and forth with the caller's listing (issue 29). A listing
        # in lister threads (S3's default) still runs ahead meanwhile; one in this thread
        # stands still while the request runs.
        pool = InlineExecutor()
    # The test hooks pause one worker until STOP: with one batch per chain and one chain
    # per slot the next batch's STOP check waits for it, so the paused batch is the only
    # one deleted (as the signal tests rely on); the pipeline's depth and the group's size
    # change no record, only what overlaps and how many intents are written.
    hooked = bool(os.environ.get(PAUSE_ENV) or os.environ.get(HOLD_ENV))
    sizes = group_sizes(1 if hooked else group)
    depth = (max(1, concurrency) if hooked
             else groups_in_flight(concurrency, INTENT_BATCHES if group is None else group))
    with submitter(pool, depth, "epochgc-delete") as submit:
        pending: set[Future[_Chain]] = set()
        try:
            listed = batches(items, batch_size)
            for batch in listed:
                if journal is not None:
                    # This group is ready (its first batch): the clean outcomes of the
                    # groups that finish before its intent is written ride in that intent,
                    # no PUT of their own (issue 38); with no group ready (the listing
                    # behind) each goes alone, as does one that found keys not deleted.
                    journal.coming()
                submitted = False
                try:
                    chain = [batch]
                    # The group's other batches (a listing error meanwhile sends nothing of
                    # it: never journaled, listed again next round).
                    size = next(sizes)
                    chain += itertools.islice(listed, size - 1)
                    if len(chain) < size:
                        slots.ending()  # the listing is over: this is the last group
                    pending = settle(pending)
                    if stop.is_set():
                        stats.stopped = 1
                        break
                    sent = time.monotonic()
                    pending.add(submit(one, chain))
                    submitted = True
                    if inline:  # the listing waited for this request: the metric says so
                        stats.backpressure_s += time.monotonic() - sent
                finally:
                    if journal is not None and not submitted:
                        journal.not_coming(flush=False)  # the end of the task flushes
        finally:
            # Whatever ends the loop (a listing error too), the groups in flight finish
            # and are journaled before the task ends, their outcomes too.
            slots.ending()
            wait(pending)
            if journal is not None:
                _flush(journal)
        for fut in pending:
            account(fut)
    return stats


class _Slots:
    """The `n` delete slots, each free one taken by the first request to wait for it, and
    once the task's listing is over (`ending`) by the waiting request whose group has the
    most batches left to send (ties: the first to wait). A group sends its requests one
    after another: with groups of several batches taken in arrival order the task's last
    group could be left to send its rest alone while the other slots idle; run down
    together, the groups end within a request of each other. Only then: before it, ends
    made to coincide would leave the slots idle while the next groups write their intents
    together (issue 38: 21 idle slot-seconds of the deleting at 120,000 keys). Only the
    order of waiting requests changes: each still asks "go on?" holding its slot, right
    before it is sent."""

    def __init__(self, n: int) -> None:
        self._free = max(1, n)
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, int]] = []  # (batches left, arrival)
        self._arrivals = itertools.count()
        self._ending = False

    def ending(self) -> None:
        """The task's listing is over: no group will start after those in the workers."""
        with self._cond:
            self._ending = True
            self._cond.notify_all()

    def _next(self) -> tuple[int, int]:
        if self._ending:
            return min(self._waiting, key=lambda w: (-w[0], w[1]))
        return min(self._waiting, key=lambda w: w[1])

    @contextlib.contextmanager
    def take(self, left: int) -> Iterator[None]:
        me = (left, next(self._arrivals))
        with self._cond:
            self._waiting.append(me)
            while not (self._free and self._next() == me):
                self._cond.wait()
            self._waiting.remove(me)
            self._free -= 1
            self._cond.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self._cond:
                self._free += 1
                self._cond.notify_all()


@dataclass(frozen=True)
class _Chain:
    """One group's batches and what each request did, in order (None: told "no", not sent;
    fewer results than batches: the group was stopped before its intent)."""

    group: list[list[Doomed]]
    results: list[DeleteResult | None]


def _merged(group: list[list[Doomed]], results: list[DeleteResult | None]) -> DeleteResult:
    """The group's outcome, one record: every key deleted, gone, changed or failed, and each
    key of a batch never sent `UNSENT` (so a reader that does not know the word still never
    counts it deleted)."""
    out = DeleteResult(0)
    # When the latest unanswered request of the keys still to be waited for ended; None if
    # a result has such keys and no time (`NOT_ANSWERED`'s: in flight still): not known.
    ended: list[float | None] = []
    for batch, result in zip(group, results, strict=True):
        if result is None:
            result = DeleteResult(len(batch), {k: UNSENT for k, _, _, _ in batch})
        if result.unknown - result.answered:
            ended.append(result.unanswered_at)
        out = DeleteResult(out.requested + result.requested, {**out.errors, **result.errors},
                           out.gone | result.gone, out.changed | result.changed,
                           out.unknown | result.unknown,
                           out.gone_unattributed | result.gone_unattributed,
                           out.answered | result.answered)
    if ended and None not in ended:
        out.unanswered_at = max(t for t in ended if t is not None)
    return out


def _found_more(result: DeleteResult | None) -> bool:
    """A request answered with some key not deleted by it (gone, changed or failed)."""
    return result is not None and result.deleted != result.requested


def _answered_so_far(group: list[list[Doomed]],
                     results: list[DeleteResult | None]) -> DeleteResult:
    """The group's outcome while its later requests have not answered: their keys are
    `NOT_ANSWERED`, of unknown fate (the read-back asks the store about them)."""
    rest: list[DeleteResult | None] = []
    for batch in group[len(results):]:
        keys = [k for k, _, _, _ in batch]
        rest.append(DeleteResult(len(batch), dict.fromkeys(keys, NOT_ANSWERED),
                                 unknown=set(keys)))
    return _merged(group, [*results, *rest])


def _bounded(store: ObjectStore, journal: JournalWriter | None,
             asked: float) -> contextlib.ExitStack:
    """A batch's intent and delete are sent within the journal's `send_within_s` of the
    "go on?" asked at `asked` (issue 38, review rev38m finding 2: the recovery's wait rests
    on it, `bounds.py`); past it a request is not sent (StoreError; a delete's keys are
    then resolved by asking the store)."""
    bound = contextlib.ExitStack()
    if journal is not None and journal.send_within_s is not None:
        deadline = asked + journal.send_within_s
        bound.enter_context(store.send_by(deadline))
        if journal.store is not store:
            bound.enter_context(journal.store.send_by(deadline))
    return bound


def _flush(journal: JournalWriter) -> None:
    """The outcomes still waiting for an intent, written alone. If one cannot be, its batch
    is an intent without outcome, resolved by asking the store; the error propagates unless
    another already does (`sys.exc_info`: this runs in a `finally`)."""
    if sys.exc_info()[0] is None:
        journal.flush()
        return
    with contextlib.suppress(StoreError):
        journal.flush()


def _send(store: ObjectStore, batch: list[Doomed]) -> DeleteResult:
    try:
        # Conditional: an object rewritten since it was listed is skipped (`changed`).
        return store.delete_if_unchanged([(k, v) for k, _, _, v in batch])
    except StoreError as e:
        return DeleteResult(len(batch), dict.fromkeys((k for k, _, _, _ in batch), str(e)))


def _test_pause(journal: JournalWriter) -> None:
    path = os.environ.get(PAUSE_ENV)
    if not path:
        return
    try:
        os.close(os.open(path + ".reached", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # only the first batch of the round pauses
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while not journal.stop_requested() and time.monotonic() < deadline:
        time.sleep(0.02)


def _test_hold() -> None:
    path = os.environ.get(HOLD_ENV)
    if not path:
        return
    try:
        os.close(os.open(path + ".reached", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # only the first batch of the round is held
    time.sleep(_PAUSE_LIMIT_S)
