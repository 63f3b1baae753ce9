"""Thread pools a GC task body may borrow instead of starting its own each call.

A Spark task runs its body once, so it starts its pools (the re-read ahead of the first
delete, the report readers, the delete requests in flight) and stops them. A caller that
runs task bodies many times in one process (the conformance harness: a round every few
steps) passes long-lived `TaskPools`: starting ~10 threads per round cost a quarter of
its in-process GC round. Borrowing changes neither what runs concurrently nor the bound
on it (each pool has the same worker count as the one it replaces) nor when a call
returns: as a pool's shutdown, `submitter` waits for everything submitted through it.

`TaskPools.inline` is the deterministic schedule for a simulation: every call runs in the
caller's thread when it is submitted (`InlineExecutor`), so nothing depends on thread timing.
It is a legal schedule of the concurrent one: no call of a GC task waits for a call
submitted after it, so one at a time always makes progress.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

Submit = Callable[..., "Future[Any]"]


@dataclass(frozen=True)
class TaskPools:
    recheck: Executor  # one worker: the re-read ahead of the first delete
    reports: Executor  # `readers` workers: the report reads in flight together
    readers: int
    delete: Executor  # `deleters` workers: the delete requests in flight
    deleters: int
    pid: int  # threads do not survive fork: a child must make its own

    @classmethod
    def create(cls, readers: int, deleters: int) -> TaskPools:
        if readers < 1 or deleters < 1:
            raise ValueError(f"pools need at least 1 worker each, got {readers}, {deleters}")
        return cls(
            ThreadPoolExecutor(1, thread_name_prefix="epochgc-recheck"),
            ThreadPoolExecutor(readers, thread_name_prefix="epochgc-reports"),
            readers,
            ThreadPoolExecutor(deleters, thread_name_prefix="epochgc-delete"),
            deleters,
            os.getpid(),
        )

    @classmethod
    def inline(cls, readers: int, deleters: int) -> TaskPools:
        """Pools that run each call at once in the caller's thread (see the module's
        docstring): the bounds asked for are met, as one call at a time is within them."""
        if readers < 1 or deleters < 1:
            raise ValueError(f"pools need at least 1 worker each, got {readers}, {deleters}")
        return cls(InlineExecutor(), InlineExecutor(), readers, InlineExecutor(), deleters,
                   os.getpid())

    def check(self, readers: int, deleters: int) -> None:
        """Refuse pools that would change the concurrency a call asked for."""
        if os.getpid() != self.pid:
            raise ValueError("TaskPools were created in another process (before a fork)")
        if (self.readers, self.deleters) != (readers, deleters):
            raise ValueError(
                f"TaskPools have {self.readers} report readers and {self.deleters} deleters;"
                f" the call asks for {readers} and {deleters}"
            )

    def close(self) -> None:
        for pool in (self.recheck, self.reports, self.delete):
            pool.shutdown(wait=True)


class InlineExecutor(Executor):
    """Runs each submitted call in the caller's thread before `submit` returns; the future
    holds its result or its exception, as a pool's worker would leave it."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:  # as ThreadPoolExecutor's worker: the caller's to see
            fut.set_exception(e)
        else:
            fut.set_result(result)
        return fut


@contextmanager
def submitter(pool: Executor | None, workers: int, name: str) -> Iterator[Submit]:
    """`submit` on `pool`, or on a pool of `workers` threads started for this block; on
    leaving, every future submitted here is finished (cancelling none: a pool's shutdown
    with wait=True runs its queue to the end too)."""
    if pool is None:
        with ThreadPoolExecutor(workers, thread_name_prefix=name) as own:
            yield own.submit
        return
    # The unfinished calls only: a finished one's result (a delete batch) must not live on
    # here until the block ends, or a task deleting millions of keys would hold them all.
    unfinished: set[Future[Any]] = set()

    def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut = pool.submit(fn, *args)
        unfinished.add(fut)
        fut.add_done_callback(unfinished.discard)  # at once if already done (inline)
        return fut

    try:
        yield submit
    finally:
        wait(unfinished)  # copies the set first (under the GIL), then waits on the copy
