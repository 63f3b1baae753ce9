"""Seeded bugs in the fence's reader/writer lock (`impl/partition/rwlock.py`), each killed by
the exhaustive interleaving check (`tests/impl/test_rwlock_interleavings.py`). They are
listed in `tests.conformance.mutants.MUTANTS` too, so the mutation check keeps them; the
unit test also loads each one in-process (`load_mutant`) and names the invariant that
catches it."""

from __future__ import annotations

import types
from pathlib import Path

from epochgc.proofs.mutate import Mutant

ROOT = Path(__file__).resolve().parents[2]
PATH = "impl/partition/rwlock.py"
CHECK = r"tests/impl/test_rwlock_interleavings.py::.*LockViolation"

# (mutant, the violation message the explorer reports for it)
LOCK_MUTANTS: tuple[tuple[Mutant, str], ...] = (
    (Mutant("lock-cancelled-as-granted-keeps-it",
            "a waiter cancelled just after it was granted keeps the lock (never given back)",
            PATH, "self.release(mode)  # granted just as we were cancelled: give it back",
            "pass  # granted just as we were cancelled", check=CHECK),
     r"count disagrees with its owners|still held after every task"),
    (Mutant("lock-downgrade-no-wake",
            "downgrade does not wake the shared waiters queued behind the exclusive holder",
            PATH, "        self._readers += 1\n        self._wake()\n",
            "        self._readers += 1\n", check=CHECK),
     r"lost wakeup"),
    (Mutant("lock-release-no-notify", "release does not wake the queue",
            PATH, "            self._writer = False\n        self._wake()\n\n",
            "            self._writer = False\n\n", check=CHECK),
     r"lost wakeup"),
    (Mutant("lock-cancelled-waiter-no-wake",
            "a waiter cancelled in the queue leaves without waking the waiters behind it",
            PATH, "                self._waiters = deque(w for w in self._waiters if w[1] is not"
            " fut)\n                self._wake()\n",
            "                self._waiters = deque(w for w in self._waiters if w[1] is not"
            " fut)\n", check=CHECK),
     r"lost wakeup|never finishes"),
    (Mutant("lock-shared-ignores-writer",
            "a shared request is grantable while the exclusive lock is held",
            PATH, "        if mode == SHARED:\n            return not self._writer\n",
            "        if mode == SHARED:\n            return True\n", check=CHECK),
     r"exclusive held together with shared|two exclusive owners"),
    (Mutant("lock-barging", "a free-looking lock is granted at once even with waiters queued"
            " (a writer waiting to slide the window starves)",
            PATH, "if not self._waiters and self._can_grant(mode):",
            "if self._can_grant(mode):", check=CHECK),
     r"granted ahead of earlier waiter"),
    (Mutant("lock-cancel-test-inverted",
            "the cancelled-waiter branch tests the future the wrong way round (a granted"
            " waiter is dropped from the queue and keeps the lock)",
            PATH, "if fut.done() and not fut.cancelled():", "if fut.cancelled():",
            check=CHECK),
     r"count disagrees|still held|failed: RuntimeError"),
)


def load_mutant(m: Mutant) -> type:
    """The RWLock class of `impl/partition/rwlock.py` with `m`'s edits applied, loaded as a
    fresh module (the real module is untouched)."""
    text = (ROOT / PATH).read_text()
    for path, old, new in m.edits():
        if path != PATH or text.count(old) != 1:
            raise ValueError(f"lock mutant {m.name}: patch does not apply to {path}: {old!r}")
        text = text.replace(old, new)
    mod = types.ModuleType(f"rwlock_mutant_{m.name.replace('-', '_')}")
    exec(compile(text, f"<{m.name}>", "exec"), mod.__dict__)
    cls = mod.__dict__["RWLock"]
    assert isinstance(cls, type)
    return cls
