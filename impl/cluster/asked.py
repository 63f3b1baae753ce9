"""The partition counts `topic create` asked for, kept while a create's outcome is not known
(issue 41, newuser11 M11).

The controller leader creates a topic's partitions one controller entry each
(`Broker.create_topic`); a node stopped or killed in between leaves the topic with part of
its partitions, and nothing resumes the create after a restart. The controller's table
knows partitions, not what a create asked for, so the command keeps it here:
`DATA_DIR/topics-asked.json` maps a topic to the count asked, written before the request
is sent and removed once its outcome is known (answered, refused, or never sent). What
remains is a create whose outcome nobody saw (a signal, no answer in time, a crash of the
command); `cluster status` compares it with the partitions the nodes show and flags a topic
short of its count (`short_topics`). A create still running shows as short too: it is.

Written whole or not at all (`atomic_write`); a damaged file is read as empty: it only adds
a warning to `cluster status`, never changes a partition.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from epochgc.impl.controller.topics import topic_names
from epochgc.impl.raft.atomicfile import atomic_write

FILE = "topics-asked.json"


def _path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / FILE


def asked(data_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Topic -> partitions asked, for the creates whose outcome is not known."""
    try:
        doc = json.loads(_path(data_dir).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {t: n for t, n in doc.items()
            if isinstance(t, str) and type(n) is int and n > 0}


def _write(data_dir: str | os.PathLike[str], doc: dict[str, int]) -> None:
    if doc:
        atomic_write(str(_path(data_dir)), json.dumps(doc, indent=1, sort_keys=True).encode())
    else:
        _path(data_dir).unlink(missing_ok=True)


def note(data_dir: str | os.PathLike[str], topic: str, partitions: int) -> None:
    """Before a create of `topic` with `partitions` is sent."""
    _write(data_dir, {**asked(data_dir), topic: partitions})


def settle(data_dir: str | os.PathLike[str], topic: str) -> None:
    """`topic`'s create (or delete) had an outcome the command saw: forgotten."""
    doc = asked(data_dir)
    if topic in doc:
        del doc[topic]
        _write(data_dir, doc)


def short_topics(asked_for: dict[str, int], partitions: Iterable[str]) -> dict[str, int]:
    """Topic -> partitions it has, for each topic with fewer than its create asked for."""
    names = set(partitions)  # each node shows each partition it holds: counted once
    have = {t: len(topic_names(names, t)) for t in asked_for}
    return {t: n for t, n in have.items() if n < asked_for[t]}
