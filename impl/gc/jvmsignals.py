"""Under spark-submit, the JVM's signals handed to this process (newuser13 Q11).

spark-submit runs the driver's JVM, and Spark's PythonRunner starts this Python driver as
its child; spark-submit exits with the driver's exit code (PythonRunner raises
`SparkUserAppException(exitCode)` for a non-zero one and SparkSubmit exits with it:
core/src/main/scala/org/apache/spark/deploy/PythonRunner.scala, SparkSubmit.scala). A
SIGTERM to spark-submit (a scheduler's stop: YARN, Kubernetes, systemd, `timeout`) reaches
the JVM only, whose default handler (`java.lang.Terminator`) begins its shutdown: Spark's
shutdown hook stops the SparkContext under the round and the JVM exits 143 at once, its
Python workers killed mid-batch ("Python worker exited unexpectedly (crashed)" on the
console). A terminal's Ctrl-C reaches both processes (one foreground process group), and
the JVM's shutdown cut the driver's graceful stop short.

Here the JVM's handlers of SIGINT, SIGTERM and SIGHUP are replaced (`sun.misc.Signal.handle`,
jdk.unsupported: the API Spark's own `SignalUtils` uses) by one that hands the signal to
this process's main thread (py4j's callback server: PySpark's
`ensure_callback_server_started`, as its streaming API does), so the round stops as on its
own signal: STOP, the batches in flight finished and journaled, the record `interrupted`,
128 + the signal's number, which spark-submit then exits with. A signal the JVM ignores
(SIG_IGN: `nohup`'s SIGHUP, a background job's SIGINT) stays ignored. A signal that came to
both processes (a terminal's) is acted on once: the two copies are counted apart and the
round's handler runs once for each signal that either process received more of.
If anything of this cannot be set up, the JVM keeps its own handlers and a round whose
SparkContext is stopped under it is recorded from its journal (`stage.SPARK_STOPPED`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, ClassVar

from epochgc.impl.gc.stop import SIGNALS

Handler = Callable[[int, FrameType | None], Any]


class _Copies:
    """How many of each signal this process and the JVM received, and the JVM's copies
    handed on but not yet acted on by the handler (`pending`)."""

    def __init__(self) -> None:
        self.own: dict[int, int] = {}
        self.jvm: dict[int, int] = {}
        self.pending: dict[int, int] = {}
        self.lock = threading.Lock()

    def from_jvm(self, signum: int) -> None:
        """The JVM received `signum` (py4j's callback thread): handed to the main thread
        unless this process received as many of it already (the same Ctrl-C)."""
        with self.lock:
            self.jvm[signum] = self.jvm.get(signum, 0) + 1
            if self.jvm[signum] <= self.own.get(signum, 0):
                return
            self.pending[signum] = self.pending.get(signum, 0) + 1
        # Python runs the handler in the main thread (signal(7): a thread-directed signal;
        # Python's `signal` module: handlers always run in the main thread).
        signal.pthread_kill(threading.main_thread().ident or 0, signum)

    def wrap(self, handler: Handler) -> Handler:
        def own(signum: int, frame: FrameType | None) -> Any:
            # The main thread's signal handler: the lock is held by the callback thread for
            # a few bytecodes only, never while it waits for this thread.
            with self.lock:
                if self.pending.get(signum, 0) > 0:  # the JVM's copy, handed on
                    self.pending[signum] -= 1
                else:
                    self.own[signum] = self.own.get(signum, 0) + 1
                    if self.own[signum] <= self.jvm.get(signum, 0):
                        return None  # the JVM's copy of it was acted on first
            return handler(signum, frame)

        return own


class _Forward:
    """The JVM's `sun.misc.SignalHandler` for one signal, implemented here (py4j proxy)."""

    def __init__(self, signum: int, copies: _Copies) -> None:
        self._signum = signum
        self._copies = copies

    def handle(self, _signal: Any) -> None:
        self._copies.from_jvm(self._signum)

    class Java:
        implements: ClassVar[list[str]] = ["sun.misc.SignalHandler"]  # py4j reads it


def forward_jvm_signals() -> bool:
    """Under spark-submit (call only there, after the round's own handlers are installed,
    from the main thread): the JVM's SIGINT, SIGTERM and SIGHUP come to this process's
    handlers from now until it exits. False (nothing changed in the JVM) if it could not be
    set up."""
    try:
        from pyspark import SparkContext
        from pyspark.java_gateway import ensure_callback_server_started

        SparkContext._ensure_initialized()  # attaches to spark-submit's JVM: it runs
        gateway: Any = SparkContext._gateway
        jvm: Any = SparkContext._jvm
        ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
        copies = _Copies()
        for sig in SIGNALS:
            current = signal.getsignal(sig)
            if callable(current):
                signal.signal(sig, copies.wrap(current))
        ignore = jvm.sun.misc.SignalHandler.SIG_IGN
        for sig in SIGNALS:
            java_signal = jvm.sun.misc.Signal(sig.name.removeprefix("SIG"))
            previous = jvm.sun.misc.Signal.handle(java_signal, _Forward(int(sig), copies))
            if previous.equals(ignore):  # ignored on purpose (nohup, a background job)
                jvm.sun.misc.Signal.handle(java_signal, previous)
    except Exception:  # e.g. a JVM run with -Xrs, or a gateway without callbacks
        return False
    return True


def watch_jvm(on_gone: Callable[[], None]) -> Callable[[], None]:
    """Under spark-submit: call `on_gone()` once, from a daemon thread, when the JVM (this
    process's parent: PythonRunner starts the driver as its child) ends, however it ended
    (SIGKILL, a crash, the OOM killer: nothing of it runs to tell us). Without it the
    driver, orphaned, went on with whatever it was doing that is not a call into Spark (the
    dead-round recovery's wait before Spark starts: minutes, holding and renewing the
    store's lease), and spark-submit had long exited 137. The end is seen through a pidfd
    of the parent: pidfd_open(2), "the file descriptor ... becomes readable" (poll,
    select) "when the process terminates"; where pidfd_open is missing (Linux < 5.3, not
    Linux), a reparented process (`getppid` changes) is looked for every second. Returns a
    function that ends the watch (the round is over)."""
    import os
    import select

    parent = os.getppid()
    wake_r, wake_w = os.pipe()
    done = threading.Event()

    def gone() -> bool:
        return os.getppid() != parent

    def run() -> None:
        try:
            try:
                pidfd = os.pidfd_open(parent)
            except (AttributeError, OSError):  # missing, or the parent already gone
                pidfd = None
            ended = gone()
            try:
                if pidfd is not None and not ended:
                    ended = pidfd in select.select([pidfd, wake_r], [], [])[0]
                else:
                    while not ended and not select.select([wake_r], [], [], 1.0)[0]:
                        ended = gone()
            finally:
                if pidfd is not None:
                    os.close(pidfd)
            if ended and not done.is_set():
                on_gone()
        finally:
            os.close(wake_r)

    threading.Thread(target=run, name="epochgc-jvm-watch", daemon=True).start()

    def stop_watching() -> None:
        if not done.is_set():
            done.set()
            # A watch that saw the JVM go has ended and closed its end: the wake-up then
            # fails with EPIPE (pipe(7): "If all file descriptors referring to the read end
            # of a pipe have been closed, then a write(2) will cause ... EPIPE"). s28b:
            # that BrokenPipeError escaped the driver's `gc` after every spark-submit
            # SIGKILL: no metrics file, and a traceback in place of the command's own end.
            try:
                with contextlib.suppress(BrokenPipeError):
                    os.write(wake_w, b"\0")
            finally:
                os.close(wake_w)

    return stop_watching
