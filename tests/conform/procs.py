"""The tests' own reading of Linux's /proc (proc(5): in `/proc/PID/stat`, after comm, the
state, ppid, process group and session come first), apart from `impl.proctree` on
purpose: the oracle that checks conform's clean-up is not the code that does it."""

from __future__ import annotations

from pathlib import Path

STATE, PGRP, SESSION = 0, 2, 3  # indexes among the fields after comm


def _fields(stat: Path) -> list[str] | None:
    try:
        text = stat.read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # comm ends at the last ')'


def session_of(pid: int) -> int | None:
    fields = _fields(Path(f"/proc/{pid}/stat"))
    return None if fields is None else int(fields[SESSION])


def live_where(index: int, value: int) -> list[int]:
    """The processes, zombies excluded, whose stat field `index` (PGRP, SESSION) is `value`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _fields(stat)
        if fields is not None and int(fields[index]) == value and fields[STATE] != "Z":
            found.append(int(stat.parent.name))
    return found
