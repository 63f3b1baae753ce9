"""The exit codes of every `epochgc` command: one table, one meaning per code.

0-3 are ours; the others are BSD's sysexits(3) codes (FreeBSD `sysexits.h`: EX_USAGE 64,
EX_DATAERR 65, EX_UNAVAILABLE 69, EX_PROTOCOL 76), so that 2 keeps the one meaning
schedulers already act on for `gc` ("blocked: try again later") instead of also being
click's usage error; a signal is reported as a shell reports a process killed by it,
128 + the signal's number (POSIX `sh`, "Exit Status for Commands"): the command, once it
has said so and cleaned up, ends by that signal (impl/entry.py), so a shell script running
it stops at a Ctrl-C, and a parent that reads wait(2)'s status sees the signal."""

from __future__ import annotations

import signal
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    BLOCKED = 2
    PAUSED = 3
    USAGE = 64  # EX_USAGE
    DATAERR = 65  # EX_DATAERR
    UNAVAILABLE = 69  # EX_UNAVAILABLE
    PROTOCOL = 76  # EX_PROTOCOL
    SIGHUP = 128 + signal.SIGHUP  # 129
    SIGINT = 128 + signal.SIGINT  # 130
    SIGTERM = 128 + signal.SIGTERM  # 143


# One line each (an epilog row): what the code means for every command that uses it.
MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "done",
    ExitCode.FAILED: "failed: a check, a disagreement, an incomplete round (output says what)",
    ExitCode.BLOCKED: "blocked: GC may not run now (reports missing or invalid, or another "
                      "round holds the lease); retry later",
    ExitCode.PAUSED: "paused: an operator paused GC on the store (gc-admin pause); a "
                     "gc --dry-run still runs (exit 0) and says so on stderr",
    ExitCode.USAGE: "usage error: bad argument, option, name or output path; nothing done",
    ExitCode.DATAERR: "bad input data: the file given is unreadable or malformed",
    ExitCode.UNAVAILABLE: "missing extra or program: pip install 'epochgc[EXTRA]' (named)",
    ExitCode.PROTOCOL: "the port broke the port protocol (exited, garbage, timed out)",
    ExitCode.SIGHUP: "interrupted by SIGHUP (the terminal hung up: a dropped ssh session)",
    ExitCode.SIGINT: "interrupted by SIGINT (Ctrl-C)",
    ExitCode.SIGTERM: "interrupted by SIGTERM",
}

# Said under `epochgc --help`'s table and in the READMEs (issue 41, s27e).
SIGNAL_RULE = ("An interrupted command says so and cleans up (its records, its lease, the "
               "processes it started), then ends by that signal: a shell reports 130 / 143 / "
               "129, and a script that runs it stops at a Ctrl-C. Once its work is complete "
               "(its result decided and written), a signal is said in one line and no "
               "longer changes the exit code. A SIGINT or SIGHUP ignored at start (nohup, a "
               "script's `cmd &`) stays ignored.")

_ALWAYS = (ExitCode.USAGE, ExitCode.SIGHUP, ExitCode.SIGINT, ExitCode.SIGTERM)
_OK = (ExitCode.OK, ExitCode.FAILED)
_GC = (*_OK, ExitCode.BLOCKED, ExitCode.PAUSED, ExitCode.UNAVAILABLE)
# Commands that read DATA_DIR/cluster.json: a damaged one is bad input data (newuser10 L7).
_CLUSTER = (*_OK, ExitCode.DATAERR)

# The codes each command can exit with, by its full name. A command missing here is a
# test failure (tests/impl/test_exitcodes.py walks the click tree).
USES: dict[str, tuple[ExitCode, ...]] = {
    "epochgc": tuple(ExitCode),
    "replay": (*_OK, ExitCode.DATAERR),
    "check-trace": (*_OK, ExitCode.DATAERR),
    "conform": (*_OK, ExitCode.UNAVAILABLE, ExitCode.PROTOCOL),
    "gc": _GC,
    "gc-package": (*_OK, ExitCode.UNAVAILABLE),
    # The group lists what any of its commands may exit with; only `show` says 2 and 3
    # (newuser23 F5: every subcommand's --help listed them).
    "gc-admin": (*_CLUSTER, ExitCode.BLOCKED, ExitCode.PAUSED, ExitCode.UNAVAILABLE),
    "gc-admin show": (*_CLUSTER, ExitCode.BLOCKED, ExitCode.PAUSED, ExitCode.UNAVAILABLE),
    **{f"gc-admin {c}": (*_CLUSTER, ExitCode.UNAVAILABLE) for c in (
        "advance-epoch", "expire", "pause", "reset", "resume", "start")},
    "cluster": (*_CLUSTER, ExitCode.UNAVAILABLE),
    "produce": _CLUSTER,
    "consume": _CLUSTER,
    "topic": _CLUSTER,
    "demo": (*_OK, ExitCode.UNAVAILABLE),
    "chaos": (*_OK, ExitCode.UNAVAILABLE),
    "barrier": _CLUSTER,
}


def codes_for(path: str) -> tuple[ExitCode, ...]:
    """The codes of command `path` ("gc-admin show": its group's entry), usage and the
    signals included, in order."""
    parts = path.split()
    for n in range(len(parts), 0, -1):
        name = " ".join(parts[:n]) if n > 1 else parts[0]
        if name in USES:
            return tuple(sorted(set(USES[name]) | set(_ALWAYS)))
    raise KeyError(f"no exit codes declared for command {path!r} (impl/exitcodes.py USES)")


def table(codes: tuple[ExitCode, ...]) -> str:
    """An epilog for click: `\\b` keeps click from rewrapping the rows."""
    rows = [f"  {int(c):>3}  {MEANING[c]}" for c in codes]
    return "\b\nExit codes:\n" + "\n".join(rows)
