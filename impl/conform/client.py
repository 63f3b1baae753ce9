"""The port process: one JSON line out, one JSON line back, with a per-step timeout.

Every line carries a sequence number that its answer echoes (spec/VECTORS.md, "The port
protocol"), so a second answer to one line is caught by its number whenever it arrives: a
check of what happens to be buffered depended on timing (a chatty port once passed for a
disagreement under load).

Every way a port can break the protocol becomes a `ProtocolFailure` naming what happened
(`kind`: exited, garbage, extra-output, timeout) so the driver can report it as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from epochgc import IMPORT_ROOT
from epochgc.impl import proctree
from epochgc.model.replay import MAX_LINE

_TAIL = 300  # characters of a bad line quoted in a report
# The first answer also waits for the port to start (an interpreter, a JIT): not a hang.
STARTUP_S = 10.0
# The longest answer line, its line end included: a vector line's bound (model/replay.py
# MAX_LINE, spec/VECTORS.md "Files"); the model's answers are under 1 KiB.
MAX_ANSWER = MAX_LINE
# A port stopped by the driver: after its stdin is closed, then after SIGTERM.
EOF_GRACE_S = 1.0
TERM_GRACE_S = 5.0


# How long a port may take to end on SIGTERM before the person waiting is told so.
_QUIET_WAIT_S = 1.0


def _start_watchdog() -> subprocess.Popen[bytes]:
    """The process that stops the port's group if conform dies, even by SIGKILL
    (newuser8 I8; watchdog.py says how). Started before the port, in its own session."""
    env = dict(os.environ)
    env["PYTHONPATH"] = IMPORT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-m", "epochgc.impl.conform.watchdog", f"{TERM_GRACE_S:g}"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True, env=env)


class ProtocolFailure(Exception):
    def __init__(self, kind: str, detail: str, answered: bytes | None = None) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.answered = answered  # the line it printed instead of an answer, if any


def _strict_object(text: str) -> dict[str, Any] | None:
    def no_constant(name: str) -> Any:
        raise ValueError(name)

    try:
        obj = json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError):
        # RecursionError: nested deeper than the interpreter's recursion limit (json's C
        # scanner counts each array/object level as one recursive call); newuser8 I3.
        return None
    return obj if isinstance(obj, dict) else None


def request_line(seq: int, text: str) -> str:
    """One line of the driver's: the step's text as it is, numbered."""
    return json.dumps({"seq": seq, "line": text}, separators=(",", ":"))


class PortProcess:
    """The port started once; `ask` sends one line and returns the one object answered."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 5.0,
        cwd: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self._clock = clock
        self._say = say  # a line for the person waiting (the SIGKILL grace), or None
        self._watchdog = _start_watchdog()
        # stderr is inherited: it is the port's log, not part of the protocol.
        # Its own session (setsid(2)), so its own process group, as a shell's job control
        # starts a job: a terminal's Ctrl-C signals the foreground process group (POSIX
        # General Terminal Interface, 11.1.9 "Special Characters", INTR), so it reaches
        # the driver alone, which stops the port itself (`close`). In the driver's group,
        # a Python port printed a KeyboardInterrupt traceback from wherever the signal
        # found it, even in the interpreter's start-up before any code of the port ran
        # (newuser7 H2): no port can prevent that itself.
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, cwd=cwd,
                start_new_session=True,
            )
        except BaseException:
            self._end_watchdog()
            raise
        # Its group's id (it leads its own session): stopped by the watchdog if we die.
        assert self._watchdog.stdin is not None
        with contextlib.suppress(OSError):
            self._watchdog.stdin.write(f"{self._proc.pid}\n".encode())
            self._watchdog.stdin.flush()
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin.fileno()
        os.set_blocking(self._in, False)  # writes wait in select, under the timeout
        self._out = self._proc.stdout.fileno()
        self._buf = b""
        self._answered = False
        self._sent = 0.0
        self._next_seq = 0  # the number the next line sent carries
        self._want_seq = 0  # the number the next answer must echo
        self.failed: ProtocolFailure | None = None

    def ask(self, line: str) -> dict[str, Any]:
        self.send(line)
        return self.receive()

    def send(self, line: str) -> None:
        """Write one line; `receive` then waits for its answer (the driver computes the
        model's answer in between, while the port works)."""
        self._guard(self._send, [line])

    def send_many(self, lines: list[str]) -> None:
        """Write several lines at once; `receive` then returns their answers in order."""
        self._guard(self._send, lines)

    def receive(self) -> dict[str, Any]:
        out: dict[str, Any] = self._guard(self._receive)
        return out

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.failed is not None:
            raise self.failed
        try:
            return fn(*args)
        except ProtocolFailure as e:
            self.failed = e
            self.close()
            raise

    def _send(self, lines: list[str]) -> None:
        if self._buf or self._readable(0):
            self._fill(0)
            # The rest of the line it began: a port writes "garbage" and "\n" in two
            # writes under PYTHONUNBUFFERED=1, and the message must not depend on where its
            # output was cut (i41q: 5 of 6 runs said b'garbage').
            deadline = self._clock() + self.timeout
            while b"\n" not in self._buf and len(self._buf) < _TAIL:
                left = deadline - self._clock()
                if left <= 0 or not self._readable(left) or not self._fill(0):
                    break
            if not self._buf:
                # Readable with nothing in it: end of file, the port exited (or closed its
                # stdout) having printed nothing (newuser12 P9: "printed before it was sent
                # any line: b''" when it exited before the first line was sent, "exited
                # with status 3" when after: the words depended on a race).
                raise self._exited()
            # What it printed, for the table's port column (i41y: a port that printed
            # `garbage` at start-up was shown as "(no answer)").
            printed = self._buf.partition(b"\n")[0]
            if self._next_seq == 0:  # newuser5 G7: there was no previous step to answer
                raise ProtocolFailure(
                    "extra-output", f"printed before it was sent any line: "
                    f"{self._buf[:_TAIL]!r}", printed)
            raise ProtocolFailure(
                "extra-output", f"wrote more than one line for a step of the previous "
                f"program: {self._buf[:_TAIL]!r}", printed)
        framed = []
        for text in lines:
            framed.append(request_line(self._next_seq, text))
            self._next_seq += 1
        data = "".join(f"{text}\n" for text in framed).encode("utf-8")
        deadline = self._clock() + self.timeout
        while data:
            # A port that neither reads nor answers must not block the driver forever.
            left = deadline - self._clock()
            _, ready, _ = select.select([], [self._in], [], max(0.0, left))
            if not ready:
                raise ProtocolFailure("timeout", f"did not read its input within "
                                      f"{self.timeout:g} s")
            try:
                data = data[os.write(self._in, data):]
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise self._exited() from None
        self._sent = self._clock()

    def _receive(self) -> dict[str, Any]:
        wait = self.timeout if self._answered else self.timeout + STARTUP_S
        deadline = self._sent + wait
        scanned = 0  # bytes of the buffer known to hold no line end: each read scanned once
        while (end := self._buf.find(b"\n", scanned)) < 0:
            if len(self._buf) > MAX_ANSWER:
                # A port writing without a line end (s28f, beside newuser16 S3): the buffer
                # grew until the step's time ran out, each read rescanning all of it.
                raise ProtocolFailure(
                    "garbage", f"wrote more than {MAX_ANSWER} bytes without a line end (an "
                    f"answer is one line): {self._buf[:_TAIL]!r}", self._buf[:_TAIL])
            scanned = len(self._buf)
            left = deadline - self._clock()
            if left <= 0 or not self._readable(left):
                raise ProtocolFailure("timeout", self._no_answer(wait))
            if not self._fill(left):
                raise self._exited()
        raw, self._buf = self._buf[:end], self._buf[end + 1:]
        self._answered = True
        self._sent = self._clock()  # the next answer's time starts now
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        obj = None if text is None else _strict_object(text)
        if obj is None:
            raise ProtocolFailure(
                "garbage", f"printed something that is not one JSON object: {raw[:_TAIL]!r}",
                raw)
        return self._unframe(obj, raw)

    def _no_answer(self, wait: float) -> str:
        """The time that ran out, and why it is that long (newuser5 G7: "no answer within
        12 s" to `--timeout-per-step 2`)."""
        if self._answered:
            return f"no answer within {wait:g} s (the per-step timeout)"
        return (f"no answer within {wait:g} s to its first line: the per-step timeout "
                f"({self.timeout:g} s) plus {STARTUP_S:g} s for the port to start")

    def _unframe(self, obj: dict[str, Any], raw: bytes) -> dict[str, Any]:
        """The answer inside `{"seq": N, "answer": {...}}`, N the number of the oldest line
        not yet answered; an N already answered is a second answer to that line."""
        seq, answer = obj.get("seq"), obj.get("answer")
        if set(obj) != {"seq", "answer"} or type(seq) is not int or not isinstance(answer, dict):
            raise ProtocolFailure(
                "garbage", f"printed an object that is not {{\"seq\": N, \"answer\": {{...}}}}: "
                f"{raw[:_TAIL]!r}", raw)
        if seq < self._want_seq:
            raise ProtocolFailure(
                "extra-output", f"wrote more than one line for line {seq}: {raw[:_TAIL]!r}",
                raw)
        if seq != self._want_seq:
            raise ProtocolFailure(
                "garbage", f"answered line {seq} while line {self._want_seq} was owed: "
                f"{raw[:_TAIL]!r}", raw)
        self._want_seq += 1
        return answer

    def _readable(self, wait: float) -> bool:
        ready, _, _ = select.select([self._out], [], [], wait)
        return bool(ready)

    def _fill(self, wait: float) -> bool:
        """Read what is there; False at end of file."""
        if not self._readable(wait):
            return True
        chunk = os.read(self._out, 1 << 16)
        self._buf += chunk
        return bool(chunk)

    def _exited(self) -> ProtocolFailure:
        try:
            code = self._proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return ProtocolFailure("exited", "closed its stdout but kept running")
        # Only ever raised while a line is owed (sending one, or waiting for its answer).
        return ProtocolFailure("exited", f"exited with status {code} before answering")

    def finish(self) -> None:
        """End the session after the last answer: close stdin, let the port exit, and fail
        if it wrote anything more (a second answer to the very last line has no later line
        to be caught at)."""
        def check() -> None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # type: ignore[union-attr]
            deadline = self._clock() + self.timeout
            more = True
            while True:
                # Some may have come with the last answer's read. White space is let
                # pass and dropped once checked: not gathered (and scanned again) for as
                # long as it comes (s28f).
                if self._buf.strip():
                    raise ProtocolFailure(
                        "extra-output", f"wrote more after its last answer: "
                        f"{self._buf[:_TAIL]!r}")
                self._buf = b""  # white space only, checked: not scanned again
                if not more or self._clock() >= deadline:
                    break  # at end of file, or still running: close() kills it
                more = self._fill(max(0.0, deadline - self._clock()))

        self._guard(check)

    def close(self) -> None:
        """Close stdin (a well-behaved port ends at end of input); then SIGTERM, then
        SIGKILL what lingers of the port's process group. The port never sees the
        terminal's SIGINT (its own session), so this is the one way it is stopped.

        The whole group, not the process started (newuser8 I4): a port run through a
        wrapper (`sh -c`, npm, make) has its real port as a child, which outlives a wrapper
        that exits or dies of SIGTERM, reparented to init, unless it is signalled too."""
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=EOF_GRACE_S)
        if self._group_alive():
            self._signal_job(signal.SIGTERM)
            quiet = min(_QUIET_WAIT_S, TERM_GRACE_S)
            if not self._group_gone_within(quiet):
                if self._say is not None:  # newuser8 pass 3: 6 s of silence otherwise
                    self._say(f"waiting up to {TERM_GRACE_S - quiet:g} s for the port to "
                              "stop on SIGTERM; then SIGKILL")
                if not self._group_gone_within(TERM_GRACE_S - quiet):
                    self._signal_job(signal.SIGKILL)
                    self._group_gone_within(TERM_GRACE_S)
                    self._proc.wait()
        for f in (self._proc.stdin, self._proc.stdout):
            if f is not None and not f.closed:
                f.close()
        self._end_watchdog()

    def _end_watchdog(self) -> None:
        """Its pipe closed: it finds the port's group empty (stopped above) and exits."""
        with contextlib.suppress(OSError):
            self._watchdog.stdin.close()  # type: ignore[union-attr]
        self._watchdog.wait()

    def _group_alive(self) -> bool:
        """Whether the port or anything of its process group still runs. The group's id is
        the port's pid (it leads its own session); once the port is reaped, the group is
        signalled only while /proc shows members of it, which keep that id from being
        given to another process (setpgid(2): a group's id is its leader's pid)."""
        return self._proc.poll() is None or bool(proctree.group_members(self._proc.pid))

    def _group_gone_within(self, seconds: float) -> bool:
        deadline = self._clock() + seconds
        while self._group_alive():
            if self._clock() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _signal_job(self, sig: signal.Signals) -> None:
        """The port's process group (its pid: it leads its own session), so that what it
        started goes with it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def __enter__(self) -> PortProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
