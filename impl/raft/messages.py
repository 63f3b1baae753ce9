"""Value types shared by the core, the storage and the transport.

Node ids are positive integers; 0 means "nobody" (no vote, no known leader).
Everything here is immutable so that a message handed to the host can be encoded,
duplicated or reordered without aliasing the core's own state.
"""

from __future__ import annotations

import inspect
from dataclasses import MISSING, dataclass, field, fields
from enum import IntEnum
from typing import TypeVar

_T = TypeVar("_T")


def _slot_init(cls: type[_T]) -> type[_T]:
    """Give a frozen, slotted dataclass an `__init__` that stores each field through its
    slot descriptor instead of the generated `object.__setattr__` call per field: the
    same signature, defaults and immutability at about half the cost (a Message is built
    for every Raft message, ~60 per harness step in the simulator; issue 14)."""
    params, body, env = [], [], {}
    for i, f in enumerate(fields(cls)):  # type: ignore[arg-type]
        if f.default is not MISSING:
            env[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
        elif f.default_factory is not MISSING:  # only immutable factories (tuple) here
            env[f"_d{i}"] = f.default_factory()
            params.append(f"{f.name}=_d{i}")
        else:
            params.append(f.name)
        env[f"_s{i}"] = inspect.getattr_static(cls, f.name).__set__
        body.append(f"    _s{i}(self, {f.name})\n")
    src = f"def __init__(self, {', '.join(params)}) -> None:\n{''.join(body)}"
    exec(src, env)  # as dataclasses itself builds __init__
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


NONE = 0  # the "no node" id: no vote cast, leader unknown

# Entry types: 0 is reserved for the leader's no-op; applications choose any other u32.
ENTRY_NOOP = 0
ENTRY_NORMAL = 1


@_slot_init
@dataclass(frozen=True, slots=True)
class Entry:
    index: int
    term: int
    type: int = ENTRY_NORMAL
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class HardState:
    term: int = 0
    vote: int = NONE
    commit: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Opaque application state as of (index, term); data is never interpreted here."""

    index: int = 0
    term: int = 0
    data: bytes = b""


class MsgType(IntEnum):
    APP = 1
    APP_RESP = 2
    VOTE = 3
    VOTE_RESP = 4
    PRE_VOTE = 5
    PRE_VOTE_RESP = 6
    HEARTBEAT = 7
    HEARTBEAT_RESP = 8
    SNAP = 9
    TIMEOUT_NOW = 10


@_slot_init
@dataclass(frozen=True, slots=True)
class Message:
    type: MsgType
    to: int
    frm: int
    term: int
    log_term: int = 0  # APP: term of the entry at `index`; VOTE: candidate's last term
    index: int = 0  # APP: previous index; APP_RESP: match or rejected index; VOTE: last index
    entries: tuple[Entry, ...] = field(default_factory=tuple)
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0  # APP_RESP reject: the follower's last index
    force: bool = False  # VOTE/PRE_VOTE sent because of a leadership transfer
    snapshot: Snapshot | None = None


@dataclass(frozen=True, slots=True)
class InitialState:
    """What a Storage recovered: the node is rebuilt from this after a restart."""

    hard_state: HardState = HardState()
    snapshot: Snapshot = Snapshot()
    entries: tuple[Entry, ...] = ()
    origin: str = ""  # where it was recovered from (a directory), for error messages
