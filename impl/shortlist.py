"""A long list said in one line, cut: its first items and how many more (newuser9 K9: a
`cluster status` line of ~20,000 characters naming every partition without a report)."""

from __future__ import annotations

from collections.abc import Sequence

SHOWN = 10  # enough to recognise a pattern (m1024x3/0, m1024x3/1, ...) at a glance
SHOWN_LINES = 20  # items said one a line (each may be long: a key and why)


def short_list(items: Sequence[str], shown: int = SHOWN) -> str:
    """`a, b, c` when there are at most `shown` items, else the first `shown` and
    "and N more" (N with thousands separators)."""
    if len(items) <= shown:
        return ", ".join(items)
    return f"{', '.join(items[:shown])} and {more(len(items) - shown)}"


def short_tail(text: str, shown: int = SHOWN) -> str:
    """`text` whose part after its last ": " is a ", "-separated list, with that list
    cut by `short_list` (a line built elsewhere, e.g. the model's "no inactive epoch
    reported for: ..."); any other text as it is."""
    head, sep, tail = text.rpartition(": ")
    if not sep:
        return text
    return head + sep + short_list(tail.split(", "), shown)


def more(n: int) -> str:
    """How many items a cut left out, as every cut says it."""
    return f"{n:,} more"


def short_lines(items: Sequence[str], indent: str = "  ",
                shown: int = SHOWN_LINES) -> list[str]:
    """One indented line per item, the first `shown` of them, then "... and N more" (a
    list too long to read whole: `gc-admin expire`'s rounds, markers, damaged records)."""
    lines = [f"{indent}{item}" for item in items[:shown]]
    if len(items) > shown:
        lines.append(f"{indent}... and {more(len(items) - shown)}")
    return lines
