"""Topics on the controller: a topic is its partitions `TOPIC/0 .. TOPIC/N-1`. Creating one
proposes one create command per partition (each its own creation revision, R14); deleting
one proposes one delete command per partition (each its own revision, R32). Both are checked
against the controller leader's applied table first, so bad input changes nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable

from epochgc.impl.controller.statemachine import ControllerStateMachine
from epochgc.impl.shortlist import short_list

TOPIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
MAX_PARTITIONS = 1024


class TopicError(ValueError):
    """Bad topic input (unknown, existing, ill-named): nothing was proposed."""


def check_topic_name(name: str) -> str:
    if not isinstance(name, str) or not TOPIC_NAME.fullmatch(name):
        raise TopicError(
            f"invalid topic name {name!r}: must be an identifier (a letter or '_', then "
            "letters, digits, '_', '.', '-'; at most 128 characters)"
        )
    return name


def topic_partitions(sm: ControllerStateMachine, topic: str) -> list[str]:
    """The topic's current partitions, in partition order."""
    return topic_names(sm.partitions, topic)


def topic_names(partitions: Iterable[str], topic: str) -> list[str]:
    """The names `topic/N` among `partitions`, in partition order."""
    prefix = topic + "/"
    names = [n for n in partitions if n.startswith(prefix) and n[len(prefix):].isdigit()]
    return sorted(names, key=lambda n: int(n[len(prefix):]))


def check_create(sm: ControllerStateMachine, topic: str, partitions: int) -> list[str]:
    """The partition names to create, or TopicError."""
    check_topic_name(topic)
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not (
        1 <= partitions <= MAX_PARTITIONS
    ):
        raise TopicError(f"topic {topic!r}: --partitions must be in [1, {MAX_PARTITIONS}], "
                         f"got {partitions!r}")
    existing = topic_partitions(sm, topic)
    if existing:
        raise TopicError(f"topic {topic!r} already exists (partitions {short_list(existing)}, "
                         f"controller revision {sm.revision}); delete it first")
    return [f"{topic}/{i}" for i in range(partitions)]


def check_delete(sm: ControllerStateMachine, topic: str) -> list[str]:
    """The partition names to delete, or TopicError."""
    check_topic_name(topic)
    names = topic_partitions(sm, topic)
    if not names:
        gone = sorted({d.deletion_revision for d in sm.deleted.values()
                       if d.name.startswith(topic + "/")})
        why = f" (deleted at revision {gone[-1]})" if gone else ""
        raise TopicError(f"unknown topic {topic!r}{why}: no partition {topic}/N exists "
                         f"at controller revision {sm.revision}")
    return names
