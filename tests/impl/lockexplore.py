"""Exhaustive interleaving check of the fence's reader/writer lock (`impl.partition.rwlock`).

A deterministic scheduler runs a few real asyncio tasks (scripts of acquire shared, acquire
exclusive, hold, downgrade, release) on an event loop of its own whose ready queue it
controls. At every step it may run ANY ready callback (not only the first: the order in
which futures complete is the environment's choice) or cancel any task that is still alive
(at most once per task). So a task is cancelled at every await point: before it starts,
while it waits in the queue, after it was granted but before it resumed ("cancelled as it
is granted"), and while it holds the lock. Every sequence of choices is explored by
stateless depth-first search: each leaf is one full replay from the start.

After every step the lock's invariants are checked (`check_step`); at every leaf (nothing
left to run) the end state is (`check_end`). A violation raises `LockViolation` (an
AssertionError, so the mutation runner counts it as a kill) naming the interleaving.

Why real tasks on a custom loop rather than hand-driven coroutines: cancellation, the
"granted but not yet resumed" window and wakeups are then exactly asyncio's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

TASK: contextvars.ContextVar[str] = contextvars.ContextVar("lockexplore_task")


class Op(enum.Enum):
    """One step of a task's script."""

    SHARED = "acquire shared"
    EXCLUSIVE = "acquire exclusive"
    HOLD = "hold (an await point while holding)"
    DOWNGRADE = "downgrade"
    RELEASE = "release"


class LockLike(Protocol):
    """What the explorer needs of a lock class under test (the real one or a mutant)."""

    _waiters: Any

    @property
    def readers(self) -> int: ...

    @property
    def writer(self) -> bool: ...

    def _can_grant(self, mode: str) -> bool: ...

    async def acquire(self, mode: str) -> None: ...

    def release(self, mode: str) -> None: ...

    def downgrade(self) -> None: ...


@dataclass(frozen=True)
class Script:
    """A task: its name, its steps, and whether the scheduler may cancel it."""

    name: str
    ops: tuple[Op, ...]
    cancellable: bool = True


class LockViolation(AssertionError):
    """An invariant of the lock failed on one interleaving (named by its choices)."""


@dataclass
class TaskView:
    """What a script has told the explorer: the mode it holds, the request it waits on."""

    held: str | None = None
    request: int | None = None  # sequence number of the acquire in progress, if any
    request_mode: str | None = None
    granted: int | None = None  # request number of the hold (kept through a downgrade)
    lock_future: asyncio.Future[None] | None = None


class ExploringLoop:
    """Just enough of an event loop for tasks and futures (duck-typed: asyncio's Task and
    Future only call these methods); the explorer runs its callbacks."""

    def __init__(self) -> None:
        self.ready: list[tuple[str, asyncio.Handle]] = []  # (task name, callback)
        self.errors: list[dict[str, Any]] = []
        self.futures: dict[str, asyncio.Future[Any]] = {}

    def call_soon(self, callback: Callable[..., object], *args: Any,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        h = asyncio.Handle(callback, args, self.as_loop(), context)
        name = context.get(TASK, "?") if context is not None else "?"
        self.ready.append((name, h))
        return h

    def as_loop(self) -> asyncio.AbstractEventLoop:
        return cast(asyncio.AbstractEventLoop, self)

    def get_debug(self) -> bool:
        return False

    def is_closed(self) -> bool:
        return False

    def is_running(self) -> bool:
        return True

    def create_future(self) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.Future(loop=self.as_loop())
        name = TASK.get(None)
        if name is not None:  # the lock's waiter future, created inside a task's step
            self.futures[name] = fut
        return fut

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        self.errors.append(context)

    def run_handle(self, h: asyncio.Handle) -> None:
        asyncio._set_running_loop(self.as_loop())
        try:
            h._run()
        finally:
            asyncio._set_running_loop(None)


class Run:
    """One replay: a fresh loop, lock and tasks, driven by a list of choice indices."""

    def __init__(self, lock_cls: Callable[[], LockLike], scripts: Sequence[Script]) -> None:
        self.loop = ExploringLoop()
        self.lock = lock_cls()
        self.scripts = {s.name: s for s in scripts}
        self.views = {s.name: TaskView() for s in scripts}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.cancelled: set[str] = set()
        self.trace: list[str] = []
        self.seq = 0
        for s in scripts:
            ctx = contextvars.copy_context()
            ctx.run(TASK.set, s.name)
            asyncio._set_running_loop(self.loop.as_loop())
            try:
                self.tasks[s.name] = asyncio.Task(self._script(s), loop=self.loop.as_loop(),
                                                  context=ctx)
            finally:
                asyncio._set_running_loop(None)
        self.granted_before: set[int] = set()

    async def _script(self, s: Script) -> None:
        v = self.views[s.name]
        lock = self.lock
        try:
            for op in s.ops:
                if op in (Op.SHARED, Op.EXCLUSIVE):
                    mode = "shared" if op is Op.SHARED else "exclusive"
                    self.seq += 1
                    v.request, v.request_mode, v.lock_future = self.seq, mode, None
                    self.loop.futures.pop(s.name, None)
                    try:
                        await lock.acquire(mode)
                    finally:
                        req, v.request, v.request_mode = v.request, None, None
                        self.loop.futures.pop(s.name, None)
                    v.held, v.granted = mode, req
                elif op is Op.HOLD:
                    await asyncio.sleep(0)
                elif op is Op.DOWNGRADE:
                    lock.downgrade()
                    v.held = "shared"
                else:
                    mode, v.held, v.granted = v.held or "shared", None, None
                    lock.release(mode)
        finally:
            if v.held is not None:  # like the fence's `finally: release`
                mode, v.held, v.granted = v.held, None, None
                lock.release(mode)

    def choices(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = [("run", i) for i in range(len(self.loop.ready))]
        for name, t in self.tasks.items():
            if (not t.done() and name not in self.cancelled
                    and self.scripts[name].cancellable):
                out.append(("cancel", name))
        return out

    def step(self, choice: tuple[str, object]) -> None:
        kind, arg = choice
        if kind == "run":
            assert isinstance(arg, int)
            name, h = self.loop.ready.pop(arg)
            self.trace.append(f"run {name}")
            self.loop.run_handle(h)
        else:
            assert isinstance(arg, str)
            self.cancelled.add(arg)
            self.trace.append(f"cancel {arg}")
            self.tasks[arg].cancel()

    # --- invariants ---------------------------------------------------------------

    def fail(self, what: str) -> LockViolation:
        state = (f"lock readers={self.lock.readers} writer={self.lock.writer}; "
                 + "; ".join(f"{n}: held={v.held} waiting={v.request_mode}"
                             for n, v in self.views.items()))
        return LockViolation(f"{what} after [{', '.join(self.trace)}] ({state})")

    def _in_flight(self, name: str) -> bool:
        """Granted by the lock but not yet resumed (its wakeup is queued)."""
        v = self.views[name]
        fut = self.loop.futures.get(name)
        return (v.request is not None and fut is not None and fut.done()
                and not fut.cancelled())

    def _waiting(self, name: str) -> bool:
        v = self.views[name]
        fut = self.loop.futures.get(name)
        return v.request is not None and fut is not None and not fut.done()

    def check_step(self) -> None:
        lock = self.lock
        if lock.writer and lock.readers > 0:
            raise self.fail("exclusive held together with shared holders")
        owners: list[str] = []
        granted: dict[int, str] = {}
        for name, v in self.views.items():
            if v.held is not None:
                owners.append(v.held)
                assert v.granted is not None
                granted[v.granted] = name
            elif self._in_flight(name):
                assert v.request_mode is not None and v.request is not None
                owners.append(v.request_mode)
                granted[v.request] = name
        if owners.count("exclusive") > 1:
            raise self.fail("two exclusive owners")
        if lock.readers != owners.count("shared") or lock.writer != ("exclusive" in owners):
            raise self.fail(f"the lock's count disagrees with its owners {sorted(owners)}")
        # No lost wakeup: the first live waiter is not grantable, unless a cancelled waiter
        # is still queued (its own task will wake the queue when it resumes).
        waiters = list(lock._waiters)
        live = [w for w in waiters if not w[1].done()]
        if live and lock._can_grant(live[0][0]) and not any(w[1].cancelled() for w in waiters):
            raise self.fail(f"lost wakeup: a {live[0][0]} waiter could be granted")
        # FIFO: a new grant never overtakes a request that is still waiting.
        for req in set(granted) - self.granted_before:
            for name in self.views:
                wr = self.views[name].request
                if self._waiting(name) and wr is not None and wr < req:
                    raise self.fail(f"{granted[req]} granted ahead of earlier waiter {name}")
        self.granted_before = set(granted)

    def abandon(self) -> None:
        """Close the coroutines of a run cut short by a violation (no never-awaited noise)."""
        for t in self.tasks.values():
            if not t.done():
                with contextlib.suppress(Exception):
                    t.get_coro().close()

    def check_end(self) -> None:
        for name, t in self.tasks.items():
            if not t.done():
                raise self.fail(f"task {name} never finishes (a waiter never granted)")
            if t.cancelled():
                if name not in self.cancelled:
                    raise self.fail(f"task {name} cancelled without being cancelled")
                continue
            exc = t.exception()
            if exc is not None:
                raise self.fail(f"task {name} failed: {type(exc).__name__}: {exc}")
        if self.lock.readers or self.lock.writer:
            raise self.fail("the lock is still held after every task ended")
        if any(not w[1].done() for w in self.lock._waiters):
            raise self.fail("a live waiter is left in the queue")
        if self.loop.errors:
            raise self.fail(f"the loop reported errors: {self.loop.errors[0].get('message')}")


@dataclass
class Exploration:
    interleavings: int = 0
    steps: int = 0
    longest: int = 0
    leaves: list[list[str]] = field(default_factory=list)


def explore(lock_cls: Callable[[], LockLike], scripts: Sequence[Script],
            limit: int = 2_000_000) -> Exploration:
    """Run every interleaving of `scripts` on `lock_cls`; raise LockViolation on the first
    violated invariant. Returns how many interleavings (leaves) and steps were explored."""
    out = Exploration()
    path: list[tuple[int, int]] = []  # (chosen index, number of choices) per depth
    while True:
        run = Run(lock_cls, scripts)
        try:
            depth = _replay(run, path)
        except LockViolation:
            run.abandon()
            raise
        out.interleavings += 1
        out.steps += depth
        out.longest = max(out.longest, depth)
        if out.interleavings >= limit:
            raise RuntimeError(f"more than {limit} interleavings")
        del path[depth:]
        while path and path[-1][0] + 1 == path[-1][1]:
            path.pop()
        if not path:
            return out
        i, n = path[-1]
        path[-1] = (i + 1, n)


def _replay(run: Run, path: list[tuple[int, int]]) -> int:
    """Follow `path`, then extend it with first choices to a leaf; return the depth."""
    run.check_step()
    depth = 0
    while True:
        ch = run.choices()
        if not ch:
            break
        if depth < len(path):
            idx, n = path[depth]
            if n != len(ch):
                raise RuntimeError("the replay is not deterministic")
        else:
            idx = 0
            path.append((0, len(ch)))
        run.step(ch[idx])
        run.check_step()
        depth += 1
    run.check_end()
    return depth


S, X, H, D, R = Op.SHARED, Op.EXCLUSIVE, Op.HOLD, Op.DOWNGRADE, Op.RELEASE

# The scenarios the CI test explores: each is a few tasks, every one cancellable.
SCENARIOS: dict[str, tuple[Script, ...]] = {
    "writer-then-readers": (Script("w", (X, H, R)), Script("r1", (S, H, R)),
                            Script("r2", (S, R))),
    "downgrade-wakes-readers": (Script("d", (X, H, D, H, R)), Script("r", (S, H, R)),
                                Script("w", (X, R))),
    "readers-then-writer": (Script("r1", (S, H, R)), Script("w", (X, H, R)),
                            Script("r2", (S, H, R))),
    "two-writers-downgrade": (Script("d", (X, D, H, R)), Script("w", (X, H, R)),
                              Script("r", (S, R))),
}
