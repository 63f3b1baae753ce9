"""Issue 38 item 7: a key that is not UTF-8 (a local file name with a byte like 0xff) crashed
the plain summary under a strict UTF-8 stdout (`UnicodeEncodeError`, the rest of the summary
lost). Every key printed is escaped; output never raises."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import AHEAD, HOUR, NOW, put_local, simple_cluster


def test_printable_escapes_what_a_terminal_or_encoder_cannot_take() -> None:
    from epochgc.impl.gc.text import printable

    raw = os.fsdecode(b"level_zero/data/007/1/bad\xff")  # surrogateescape: '\udcff'
    assert printable(raw) == "level_zero/data/007/1/bad\\xff"
    assert printable("a\\b") == "a\\\\b"  # a backslash is escaped, so escapes are unambiguous
    assert printable("x\x1b[2Jy\n") == "x\\x1b[2Jy\\x0a"  # no terminal control gets through
    assert printable("\u0665\u202e") == "\\u0665\\u202e"  # ASCII out, whatever the encoding
    assert printable("level_zero/data/007/000000000000000040/k") == \
        "level_zero/data/007/000000000000000040/k"


def test_echo_safe_never_raises_on_a_strict_stream() -> None:
    from epochgc.impl.gc.text import echo_safe

    buf = io.BytesIO()
    out = io.TextIOWrapper(buf, encoding="ascii", errors="strict")
    echo_safe("paused by \u00e9ric \udcff", file=out)
    out.flush()
    assert buf.getvalue() == b"paused by \\xe9ric \\udcff\n"


@pytest.mark.spark
def test_a_non_utf8_key_does_not_crash_the_plain_summary(spark: Any, tmp_path: Path) -> None:
    """Old code: `UnicodeEncodeError: 'utf-8' codec can't encode character '\\udcff'`,
    exit 1 with the rest of the summary lost."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 50)
    put_local(root, format_key(7, 40, "old"), age=13 * HOUR)
    d = os.fsencode(root / "level_zero/data/007/000000000000000040")
    with open(os.path.join(d, b"bad\xff"), "wb") as f:  # a name no UTF-8 decoder takes
        f.write(b"x")
    os.utime(os.path.join(d, b"bad\xff"), (NOW - 13 * HOUR,) * 2)
    r = CliRunner().invoke(main, ["gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q"])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 1, r.output  # incomplete: a malformed key, never deleted
    assert "bad\\xff" in r.output and "round incomplete" in r.output, r.output
