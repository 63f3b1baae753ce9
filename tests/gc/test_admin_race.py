"""newuser16 S7: `gc-admin pause --replace` and `gc-admin start` at once on S3 both read the
old pause and both wrote `_cluster/gc/admin.json`: the pause said done was lost (start wrote
"running" over it, and said it lifted the old pause), or the pause said it replaced a pause
that had been lifted. Each write is now conditional on the store (S3 If-Match / If-None-Match,
a local store under its lock) and a conflict reads again and decides again.

The race is made exact, with no sleeps: both writers have read the same state before either
write is let through (a barrier on their first write). Then, in a linear order of the two,
the second one's `before` is the first one's write, and the store holds the second's."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from epochgc.impl.gc.admin import (
    ADMIN_KEY,
    AdminChange,
    AdminState,
    change_admin_state,
    new_admin_state,
    read_admin_state,
    write_admin_state,
)
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from tests.gc.helpers import _Delegating, simple_cluster
from tests.store.backends import Opener
from tests.store.s3proxy import Call, Fault, s3_proxy
from tests.store.s3server import DUMMY_AWS_ENV, new_bucket

pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]
_BOUND_S = 120.0  # a hang fails the test; never reached by a run that works


class _HeldFirstWrite(_Delegating):
    """The real store; its first write of the admin state waits at `barrier` (so both
    writers have read before either writes). `plain`: the seed, every write by name."""

    def __init__(self, inner: ObjectStore, barrier: threading.Barrier,
                 plain: bool = False) -> None:
        super().__init__(inner)
        self.barrier = barrier
        self.plain = plain
        self.held = False

    def _hold(self, key: str) -> None:
        if key == ADMIN_KEY and not self.held:
            self.held = True
            self.barrier.wait(_BOUND_S)

    def put(self, key: str, data: bytes) -> None:
        self._hold(key)
        super().put(key, data)

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        self._hold(key)
        if self.plain:
            self.inner.put(key, data)
            return "written by name"
        return super().create_if_absent(key, data)

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        self._hold(key)
        if self.plain:
            self.inner.put(key, data)
            return "written by name"
        return super().replace_if_match(key, data, version)


def _pause(reason: str) -> AdminState:
    return new_admin_state(True, reason, 1000.0, "op")


def _race(open_store: Opener, plain: bool) -> tuple[AdminChange, AdminChange, AdminState]:
    """`pause --replace` (reason "new") and `start` at once on a store paused ("base"), as
    gc-admin decides them; their changes and the state the store holds after."""
    setup = open_store()
    try:
        write_admin_state(setup, True, "base", 999.0, "op")
    finally:
        setup.close()
    barrier = threading.Barrier(2)
    done: dict[str, AdminChange] = {}
    failed: list[BaseException] = []

    def run(name: str) -> None:
        store = _HeldFirstWrite(open_store(), barrier, plain)
        try:
            if name == "pause":
                done[name] = change_admin_state(store, lambda _now: _pause("new"))
            else:
                resumed = new_admin_state(False, "", 1001.0, "op")
                done[name] = change_admin_state(
                    store, lambda now: resumed if now.paused else None)
        except BaseException as e:  # re-raised in the test's thread
            failed.append(e)
            barrier.abort()
        finally:
            store.inner.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in ("pause", "start")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(_BOUND_S)
    assert not failed, failed
    after = open_store()
    try:
        return done["pause"], done["start"], read_admin_state(after)
    finally:
        after.close()


def _check_linear(pause: AdminChange, start: AdminChange, after: AdminState) -> None:
    """What each said it did is true in one order of the two."""
    assert pause.written is not None and pause.written.reason == "new"
    assert start.written is not None and not start.written.paused
    if after.paused:  # start, then pause: the pause replaced the running state
        assert after.reason == "new", after
        assert start.before.reason == "base", start
        assert not pause.before.paused, f"pause says it replaced {pause.before}, lifted"
    else:  # pause, then start: start lifted the new pause, not the old one
        assert pause.before.reason == "base", pause
        assert start.before.reason == "new", \
            f"start says it lifted {start.before.reason!r}; the pause said done is lost"


def test_pause_and_start_at_once_are_in_one_order(open_store: Opener) -> None:
    """Local store, moto and SeaweedFS. Old code (read, then `put`): both wrote what they
    decided from "base" (`_check_linear` fails, as the seed below shows)."""
    _check_linear(*_race(open_store, plain=False))


def test_seed_writes_by_name_lose_the_pause(open_store: Opener) -> None:
    """The seed: the same race with every write by name (as before S7) is caught."""
    with pytest.raises(AssertionError):
        _check_linear(*_race(open_store, plain=True))


# --- the commands themselves: in-process on a local store (fast), then as the tester ran
# them, in processes, on both S3 servers ---


class _BeforeWrite(_Delegating):
    """The real store; `meanwhile(inner)` runs once, just before its first write of the
    admin state (whichever request the command uses)."""

    def __init__(self, inner: ObjectStore, meanwhile: Callable[[ObjectStore], None]) -> None:
        super().__init__(inner)
        self.meanwhile: Callable[[ObjectStore], None] | None = meanwhile

    def _hook(self, key: str) -> None:
        if key == ADMIN_KEY and self.meanwhile is not None:
            run, self.meanwhile = self.meanwhile, None
            run(self.inner)

    def put(self, key: str, data: bytes) -> None:
        self._hook(key)
        super().put(key, data)

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        self._hook(key)
        return super().create_if_absent(key, data)

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        self._hook(key)
        return super().replace_if_match(key, data, version)


def _command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             meanwhile: Callable[[ObjectStore], None], *args: str) -> tuple[str, AdminState]:
    """`epochgc gc-admin ARGS` on a local store paused ("base"), with `meanwhile` (another
    command's write) landing between its read and its write; its output and the state."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.gc import admin_cli

    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 5)
    write_admin_state(store, True, "base", 999.0, "op")
    opened = admin_cli._open
    monkeypatch.setattr(admin_cli, "_open",
                        lambda *a: _BeforeWrite(opened(*a), meanwhile))
    r = CliRunner().invoke(main, ["gc-admin", *args, "--store", str(root)])
    assert r.exit_code == 0, r.output
    return r.output, read_admin_state(store)


def test_a_start_landing_before_the_pause_write(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Old code: "paused by ... (new); replaces the pause by op (base)": base was lifted."""
    out, after = _command(tmp_path, monkeypatch,
                          lambda s: write_admin_state(s, False, "", 1001.0, "other"),
                          "pause", "--reason", "new", "--replace")
    assert after.paused and after.reason == "new", after
    assert "paused by" in out and "replaces" not in out, out


def test_a_pause_landing_before_the_start_write(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Old code: "resumed ... (it was paused by op ...: base)", and the pause ("new") said
    done was gone without a word."""
    out, after = _command(tmp_path, monkeypatch,
                          lambda s: write_admin_state(s, True, "new", 1001.0, "other"),
                          "start")
    assert not after.paused, after
    assert "resumed" in out and "paused by other" in out and ": new)" in out, out

@pytest.fixture
def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
    e.update(PYTHONPATH=str(ROOT), **DUMMY_AWS_ENV)
    return e


def _admin(env: dict[str, str], bucket: str, endpoint: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "epochgc", "gc-admin", *args,
                             "--store", f"s3://{bucket}/p1", "--s3-endpoint", endpoint],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def bucket(s3_endpoint: str) -> Iterator[str]:
    b = new_bucket(s3_endpoint)
    store = S3Store(b, "p1", endpoint_url=s3_endpoint)
    try:
        simple_cluster(store, 5)  # an epochgc store (`check_is_store`)
        write_admin_state(store, True, "base", 999.0, "op")
    finally:
        store.close()
    yield b


def test_gc_admin_pause_and_start_at_once_on_s3(s3_endpoint: str, bucket: str,
                                                env: dict[str, str]) -> None:
    """newuser16 S7's commands. The proxy holds the first PUT of admin.json until the other
    command's has arrived: both have read "base". Old code: start said "resumed ... base",
    pause said "replaces the pause by op (base)", and one of the two was false."""
    barrier = threading.Barrier(2)
    path = f"/{bucket}/p1/{ADMIN_KEY}"

    def plan(call: Call) -> Fault | None:
        if (call.kind, call.key) == ("put", path) and call.attempt < 2:
            barrier.wait(_BOUND_S)
        return None

    with s3_proxy(s3_endpoint, faults=plan) as proxy:
        a = _admin(env, bucket, proxy.endpoint, "start")
        b = _admin(env, bucket, proxy.endpoint, "pause", "--reason", "new", "--replace")
        start_out, start_err = a.communicate(timeout=300)
        pause_out, pause_err = b.communicate(timeout=300)
    assert (a.returncode, b.returncode) == (0, 0), (start_err, pause_err)
    direct = S3Store(bucket, "p1", endpoint_url=s3_endpoint)
    try:
        after = read_admin_state(direct)
    finally:
        direct.close()
    if after.paused:  # start, then pause
        assert after.reason == "new"
        assert "base" in start_out, start_out
        assert "replaces" not in pause_out, f"{pause_out!r}: base was lifted by start"
    else:  # pause, then start
        assert "replaces the pause by op (base)" in pause_out, pause_out
        assert "new" in start_out, f"{start_out!r}: the pause said done is lost"
