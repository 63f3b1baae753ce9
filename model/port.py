"""The model behind the port protocol (spec/VECTORS.md, "The port protocol").

`python -m epochgc.model.port` reads JSON lines on stdin and answers each with one JSON line on
stdout, exactly as a port must. Each line is framed: `{"seq":N,"line":TEXT}` in,
`{"seq":N,"answer":{...}}` out (`read_request`, `answer_line`), so the driver tells a second
answer to one line from the answer to the next whatever the timing. Inside the frame, a
`{"op":"reset","variant":NAME}` starts a new program, a
step is run by `model.replay.Replayer` (the code behind `epochgc replay`, so there is one
source of truth), and a step `epochgc replay` would refuse is answered `{"error": ...}`
and changes nothing. `epochgc conform` uses `Session` in process for the expected answers.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any, TextIO

# Run as the port, SIGINT is made quiet before the imports below (`quiet_on_sigint`): a
# terminal's Ctrl-C during `epochgc conform` 1 s in reached the port while it imported and
# printed a KeyboardInterrupt traceback (newuser6 H2).
if __name__ == "__main__" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, signal.SIG_DFL)

from epochgc.model.replay import (
    DEFAULT_VARIANT,
    Replayer,
    ReplayError,
    _Bad,
    parse_step,
    resolve_variant,
)

_RESET_FIELDS = ("op", "variant")


class Session:
    """One port's state across programs: the current program's replayer."""

    def __init__(self) -> None:
        self.replayer = Replayer(DEFAULT_VARIANT)
        self.steps = 0  # steps since the last reset (only to locate error messages)

    def handle(self, line: str) -> dict[str, Any]:
        """One protocol line in, one answer out (never raises on bad input)."""
        try:
            obj = parse_step(line)
        except _Bad as e:
            return {"error": f"{e.field}: {e.message}"}
        if isinstance(obj, dict) and obj.get("op") == "reset":
            return self._reset(obj)
        self.steps += 1
        try:
            result = self.replayer.step(obj, self.steps)
        except ReplayError as e:
            # The replayer checks everything before changing state: a refusal changes nothing.
            return {"error": str(e)}
        del result["step"]  # optional in the protocol; the driver numbers steps itself
        return result

    def _reset(self, obj: dict[str, Any]) -> dict[str, Any]:
        unknown = [k for k in obj if k not in _RESET_FIELDS]
        if unknown:
            return {"error": f"reset: {unknown[0]}: unknown field (expected: op, variant)"}
        name = obj.get("variant")
        if not isinstance(name, str):
            return {"error": f"reset: variant: must be a variant name, got {json.dumps(name)}"}
        try:
            variant = resolve_variant(name)
        except ReplayError as e:
            return {"error": f"reset: {e}"}
        self.replayer = Replayer(variant)
        self.steps = 0
        return {}


class FrameError(ValueError):
    """A line that is not `{"seq": N, "line": TEXT}`: not the driver's, so not answerable."""


def read_request(raw: str) -> tuple[int, str]:
    """The sequence number and the step's text of one framed line from the driver."""
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise FrameError(f"not a JSON object: {e}") from None
    if not isinstance(obj, dict) or set(obj) != {"seq", "line"}:
        raise FrameError('expected {"seq": N, "line": TEXT}')
    seq, text = obj["seq"], obj["line"]
    if type(seq) is not int or seq < 0 or not isinstance(text, str):
        raise FrameError("seq must be a whole number and line a string")
    return seq, text


def answer_line(seq: int, answer: dict[str, Any]) -> str:
    """One framed answer line (without its newline)."""
    return json.dumps({"seq": seq, "answer": answer}, separators=(",", ":"))


def serve(stdin: TextIO, stdout: TextIO) -> None:
    """Answer every line until end of input; each answer is flushed before the next read
    (the driver waits for it). A line that is not framed ends the session: the driver
    never sends one, so whatever sent it is not following the protocol."""
    session = Session()
    for raw in stdin:
        try:
            seq, text = read_request(raw)
        except FrameError as e:
            sys.stderr.write(f"epochgc.model.port: {e}\n")
            raise SystemExit(65) from None  # EX_DATAERR (impl/exitcodes.py)
        stdout.write(answer_line(seq, session.handle(text)) + "\n")
        stdout.flush()


def quiet_on_sigint() -> None:
    """SIGINT ends the port by the signal, as SIGTERM does, with nothing on stderr (a shell
    reports 130). Python turns SIGINT into KeyboardInterrupt, whose traceback a terminal's
    Ctrl-C during `epochgc conform` printed: the terminal signals the whole process group,
    the port too. SIG_DFL is termination (POSIX <signal.h>, SIGINT's default action "T");
    Python installs its handler only where SIGINT was not ignored at start ("Python
    installs a small number of signal handlers by default: ... SIGINT is translated into a
    KeyboardInterrupt exception if the parent process has not changed it", docs.python.org
    library/signal.html), so an ignored SIGINT (a background job of a non-interactive
    shell) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def main() -> None:
    quiet_on_sigint()
    try:
        serve(sys.stdin, sys.stdout)
    except BrokenPipeError:
        # The reader went away: end quietly with exit 1 (the output is incomplete), as
        # `epochgc` does (impl/cli.py), the way Python's documentation advises (library/
        # signal.html, "Note on SIGPIPE": stdout to devnull so that the flush at exit
        # cannot fail again, then exit 1), not with a BrokenPipeError traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()
