"""A local multi-process cluster on loopback under one data directory: `cluster.json` holds
ports and pids, `n<id>/` each node's Raft data, `n<id>.log` its JSON logs."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from epochgc import IMPORT_ROOT
from epochgc.impl.cluster.errors import NoCluster
from epochgc.impl.cluster.meta import NAMED, load_meta
from epochgc.impl.cluster.owner import new_cluster_id
from epochgc.impl.ports import free_ports
from epochgc.impl.raft.identity import (
    IDENTITY_FILE,
    LEGACY_CLUSTER_ID,
    IdentityUnreadable,
    NodeIdentity,
    check_identity,
)

LOCK_NAME = "cluster.lock"
# A node's listeners, as cluster.json names their ports.
LISTENERS = ("raft", "client", "metrics")
# What a node prints instead of READY when it cannot listen (node_main.py).
LISTEN_FAILED = "LISTEN-FAILED"
# The line on a node's stdin that hands it over (`LocalCluster.detach`, node_main --owned).
DETACH = "detach\n"


class StartRunning(RuntimeError):
    """Another command that changes the cluster (`cluster start`, `stop` or `kill`) holds
    the data directory's lock, and this one (a start) does not wait for it."""


class PortTaken(RuntimeError):
    """A port cluster.json gives one of a node's listeners cannot be bound (another program
    holds it, typically after the cluster was stopped and the port reused)."""

    def __init__(self, node: int, listener: str, port: int, why: str) -> None:
        super().__init__(f"node {node}'s {listener} port {port} cannot be bound ({why})")
        self.node, self.listener, self.port, self.why = node, listener, port, why


@dataclass(frozen=True)
class Holder:
    """Who holds a data directory's lock: its pid and command (`start`, `stop`, `kill`)."""

    pid: str
    command: str

    @staticmethod
    def read(fd: int) -> Holder:
        pid, _, command = os.pread(fd, 64, 0).decode(errors="replace").strip().partition(" ")
        return Holder(pid or "unknown", command or "start")  # an older start wrote its pid

    def who(self) -> str:
        return f"`epochgc cluster {self.command}` (pid {self.pid})"


# A stop or kill waiting for the lock says so again this often (as the other waits do).
LOCK_SAY_EVERY_S = 10.0
LOCK_POLL_S = 0.1


def _stopped(pid: str) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, Ctrl-Z: proc(5) state T): it holds the
    lock until continued."""
    from epochgc.impl.proctree import _stat

    st = _stat(int(pid)) if pid.isdigit() else None
    return st is not None and st[1] in ("T", "t")


@contextlib.contextmanager
def cluster_lock(data_dir: str | os.PathLike[str], command: str = "start",
                 waiting: Callable[[Holder, float, bool], None] | None = None
                 ) -> Iterator[None]:
    """Hold DATA_DIR/cluster.lock (flock(2), exclusive) while a command that changes the
    cluster's processes and its cluster.json runs: `cluster start`, `stop` and `kill`.
    Each reads cluster.json, starts or stops nodes, and writes the file back: two at once
    lost each other's pids (newuser25 H2/H3: a stop during a start, or a start during a
    stop, left a node running that no stop or kill could see, and said "cluster ready" or
    "not running" contrary to the processes), and two starts on a new directory chose the
    same ports (issue 41 item 12).

    `waiting` None (a start): not waited for; another holder is refused (StartRunning,
    naming its command and pid). Otherwise (stop, kill: what they are asked to end may be
    being started) the lock is waited for, and `waiting(holder, waited_s, stopped)` is
    called at once and every LOCK_SAY_EVERY_S (newuser26 J1: said once, then silent for as
    long as a start stopped by Ctrl-Z held it; `stopped`: the holder's process is); a
    signal ends the wait (its handler raises out of the sleep).

    The file is removed on every exit path by the command that holds it, while it still
    holds it, and only if the name still refers to the file it locked (a refused command
    removes nothing). One that locked a file which was unlinked meanwhile holds nothing
    anyone else can see, so it opens the name again (the usual lock-file protocol: the lock
    is on the open file, the name is what the next command opens). SIGKILL leaves the file;
    the kernel drops the lock, so the next command takes it."""
    d = Path(data_dir).absolute()
    d.mkdir(parents=True, exist_ok=True)
    path = d / LOCK_NAME
    began = time.monotonic()
    said_at: float | None = None
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = Holder.read(fd)
                    if waiting is None:
                        raise StartRunning(_busy(holder, d)) from None
                    now = time.monotonic()
                    if said_at is None or now - said_at >= LOCK_SAY_EVERY_S:
                        waiting(holder, now - began, _stopped(holder.pid))
                        said_at = now
                    time.sleep(LOCK_POLL_S)  # a signal's handler raises out of it
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, path):
            break
        os.close(fd)  # locked a file its holder removed as we opened it: open the name again
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        yield
    finally:
        if _same_file(fd, path):
            path.unlink()  # before the lock goes: no other command can hold this name now
        os.close(fd)  # releases the lock


def lock_holder(data_dir: str | os.PathLike[str]) -> Holder | None:
    """Who holds DATA_DIR's lock now (a start, stop or kill running), read without taking
    it: `cluster status` must never make a start refuse. The lock file's inode among the
    flock(2) locks /proc/locks lists (proc(5): "FLOCK ADVISORY WRITE PID MAJOR:MINOR:INODE
    ..."; a waiter's line has "->" before FLOCK). None if no one holds it or /proc/locks
    cannot be read (not Linux)."""
    path = Path(data_dir).absolute() / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        try:
            lines = Path("/proc/locks").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            f = line.split()
            if "FLOCK" not in f:
                continue
            i = f.index("FLOCK")
            if f[i - 1] == "->" or len(f) < i + 5:
                continue
            major, minor, inode = f[i + 4].split(":")
            if (int(inode), int(major, 16), int(minor, 16)) == (
                    st.st_ino, os.major(st.st_dev), os.minor(st.st_dev)):
                return Holder.read(fd)
        return None
    finally:
        os.close(fd)


def _busy(holder: Holder, d: Path) -> str:
    """A start's refusal while `holder` runs on `d`."""
    if holder.command == "start":
        return (f"another {holder.who()} is running on {d}; wait for it to finish, then "
                "`epochgc cluster status --data-dir` shows the cluster")
    return (f"{holder.who()} is running on {d}; start the cluster again once it has "
            "finished (a start beside it could have its nodes stopped and unrecorded)")


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def port_free(port: int) -> str | None:
    """None if `port` can be bound on loopback now, else why not (the strerror). Bound with
    SO_REUSEADDR as the node's own listeners are (asyncio's start_server sets it on POSIX,
    http.server's HTTPServer has allow_reuse_address), so a port whose last connections are
    in TIME_WAIT counts as free, exactly as it is for the node."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            return e.strerror or str(e)
    return None


NODE_MODULE = "epochgc.impl.cluster.node_main"


class LocalCluster:
    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(data_dir).absolute()
        self.meta_path = self.dir / "cluster.json"
        self.meta: dict[str, Any] = load_meta(self.meta_path)  # checked (cluster/meta.py)

    def init(self, n: int, store: str, partitions: list[str], mint_interval: float,
             extra: list[str] | None = None, cluster_id: str | None = None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        ports = free_ports(3 * n)
        ids = list(range(1, n + 1))
        self.meta = {
            "ids": ids,
            "raft": {str(i): ports[i - 1] for i in ids},
            "client": {str(i): ports[n + i - 1] for i in ids},
            "metrics": {str(i): ports[2 * n + i - 1] for i in ids},
            "store": store,
            "partitions": partitions,
            "mint_interval": mint_interval,
            "extra": extra or [],
            "pids": {},
            # The node directories' `node-identity` name it (check_identities); so does the
            # store's _cluster/cluster-id.json once `cluster start` claims it (storeclaim.py).
            "cluster_id": cluster_id or new_cluster_id(),
            # Created by this version: every node directory will name `cluster_id`, so one
            # naming no cluster is never this cluster's (review41c C1: `legacy_allowed`).
            NAMED: True,
        }
        self.save()

    def save(self) -> None:
        # Whole or not at all (rename(2) is atomic): a reader running beside a start read
        # a half-written file (`JSONDecodeError`, issue 41 item 12).
        tmp = self.meta_path.with_name(f".{self.meta_path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(self.meta, indent=1))
        os.replace(tmp, self.meta_path)

    def cluster_id(self) -> str:
        """The cluster's id, made and saved by the first call on a cluster's file from
        before ids were kept (never started since: `cluster start` saves one first)."""
        if not self.meta.get("cluster_id"):
            self.meta["cluster_id"] = new_cluster_id()
            self.save()
        return str(self.meta["cluster_id"])

    @property
    def ids(self) -> list[int]:
        if not self.meta:
            raise NoCluster(
                f"no cluster under {self.dir}: start one with `epochgc cluster start`")
        return [int(i) for i in self.meta["ids"]]

    def down_hint(self) -> str:
        """What to do when no node answers: the start that brings the cluster back."""
        endpoint = self.meta.get("s3_endpoint")
        again = (f"epochgc cluster start --data-dir {self.dir} --store {self.meta['store']}"
                 + (f" --s3-endpoint {endpoint}" if endpoint else ""))
        return f"is it running? Start it with `{again}`"

    def client_addrs(self) -> dict[int, tuple[str, int]]:
        return {i: ("127.0.0.1", int(self.meta["client"][str(i)])) for i in self.ids}

    def peer_addr(self, nid: int, peer: int) -> str:
        """The address `nid` dials for `peer` (epochgc chaos puts a proxy there)."""
        return f"127.0.0.1:{self.meta['raft'][str(peer)]}"

    def node_env(self, nid: int) -> dict[str, str]:
        """Extra environment for node `nid` (epochgc chaos: its fault file)."""
        return {}

    def check_ports(self, nids: list[int]) -> None:
        """Every port the nodes `nids` will listen on can be bound, else PortTaken for the
        first that cannot: checked before any of them starts, so a taken port leaves no
        node running (issue 41: `node 1 failed to start: 'OSError: [Errno 98] ...'`)."""
        for nid in nids:
            for listener in LISTENERS:
                port = int(self.meta[listener][str(nid)])
                why = port_free(port)
                if why is not None:
                    raise PortTaken(nid, listener, port, why)

    def new_ports(self) -> None:
        """Give every listener of every node a new free port (no node may be running: the
        Raft peers know each other only by the ports they were started with)."""
        n = len(self.ids)
        ports = free_ports(3 * n)
        for k, listener in enumerate(LISTENERS):
            self.meta[listener] = {str(i): ports[k * n + i - 1] for i in self.ids}
        self.save()

    @property
    def legacy_allowed(self) -> bool:
        """Whether a node directory that names no cluster (an older version's
        `cluster=epochgc`, or format 3 without the file) may be this cluster's: only in a
        cluster whose file an older version wrote and that has not had every node's identity
        rewritten since (no NAMED mark). A new cluster, or a marked one, has none such: a
        directory naming no cluster came from another cluster or a backup (review41c C1)."""
        return bool(self.meta) and not self.meta.get(NAMED)

    def mark_named(self) -> bool:
        """Set the NAMED mark once every node's `node-identity` names this cluster's id
        (an upgraded cluster whose nodes have all started on this version); True if set
        now. From then on a directory naming no cluster is refused (`legacy_allowed`)."""
        if not self.meta or self.meta.get(NAMED):
            return False
        cid = self.cluster_id()
        for nid in self.ids:
            path = self.node_dir(nid) / IDENTITY_FILE
            try:
                found = NodeIdentity.decode(str(path), path.read_bytes())
            except (OSError, IdentityUnreadable):
                return False
            if found.cluster_id != cid or found.node_id != nid:
                return False
        self.meta[NAMED] = True
        self.save()
        return True

    def check_identities(self, nids: list[int], cluster_id: str,
                         adopt_legacy: bool) -> list[tuple[int, NodeIdentity]]:
        """Every data directory of the nodes `nids` belongs to that node of cluster
        `cluster_id`, else the first refusal (IdentityMismatch, IdentityMissing,
        IdentityUnreadable), raised before any of them starts (newuser21 X1: B's node 2
        started on A's `n2`, led B's t/1 with A's log, and B's acknowledged records were
        lost). `adopt_legacy`: a directory naming LEGACY_CLUSTER_ID (written by an older
        version, which named no cluster) is this cluster's, only where this cluster's file
        was there before this start; the ones so adopted are returned, to be said (the node
        rewrites the file at its start). In a cluster new at this start such a directory
        came from elsewhere and is refused."""
        adopt = (LEGACY_CLUSTER_ID,) if adopt_legacy else ()
        adopted = []
        for nid in nids:
            found = check_identity(str(self.node_dir(nid)), cluster_id, nid, adopt,
                                   adopt_unnamed=adopt_legacy)
            if found is not None and found.cluster_id != cluster_id:
                adopted.append((nid, found))
        return adopted

    def node_dir(self, nid: int) -> Path:
        return self.dir / f"n{nid}"

    def running(self) -> list[int]:
        """The nodes whose recorded pid is alive and is that node (`is_node`)."""
        return [int(n) for n, pid in self.meta.get("pids", {}).items()
                if self.is_node(int(n), int(pid))]

    def is_node(self, nid: int, pid: int) -> bool:
        """Whether process `pid` is node `nid` of this cluster: alive, and its command line
        (Linux proc(5): /proc/PID/cmdline, the arguments NUL-separated; empty for a
        zombie) runs node_main on this node's data directory. A pid alone is not enough:
        a node killed by `kill -9` leaves its pid in cluster.json, and the kernel may give
        that pid to any later process (newuser7 H5)."""
        if not _alive(pid):
            return False
        if not Path("/proc/self").exists():  # no proc(5) here: the pid is all there is
            return True
        try:
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone since
            return False
        if NODE_MODULE.encode() not in argv or b"--data-dir" not in argv[:-1]:
            return False
        given = os.fsdecode(argv[argv.index(b"--data-dir") + 1])
        want = self.dir / f"n{nid}"
        with contextlib.suppress(OSError):  # the same directory by another path
            return given == str(want) or os.path.samefile(given, want)
        return False

    def forget_dead(self) -> dict[int, int]:
        """Drop the recorded pids that are not their node any more (`is_node`): node id ->
        the pid dropped. Those nodes are then started like nodes never started."""
        dead = {int(n): int(pid) for n, pid in self.meta.get("pids", {}).items()
                if not self.is_node(int(n), int(pid))}
        for nid in dead:
            del self.meta["pids"][str(nid)]
        if dead:
            self.save()
        return dead

    def start(self, nid: int, timeout: float = 30.0) -> int:
        peers = ",".join(
            f"{i}=127.0.0.1:{self.meta['raft'][str(i)]}" if i == nid
            else f"{i}={self.peer_addr(nid, i)}"
            for i in self.ids
        )
        cmd = [
            sys.executable, "-m", NODE_MODULE, "--id", str(nid),
            "--peers", peers,
            "--client-port", str(self.meta["client"][str(nid)]),
            "--metrics-port", str(self.meta["metrics"][str(nid)]),
            "--data-dir", str(self.node_dir(nid)), "--store", self.meta["store"],
            "--cluster-id", self.cluster_id(),
            # The broker adopts a directory naming no cluster only when told (review41c C1).
            *(["--adopt-legacy-identity"] if self.legacy_allowed else []),
            "--partitions", ",".join(self.meta["partitions"]),
            "--mint-interval", str(self.meta["mint_interval"]), *self.meta["extra"],
            "--log-level", self.meta.get("log_level", "WARNING"), "--owned",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = IMPORT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env.update(self.node_env(nid))
        logf = open(self.dir / f"n{nid}.log", "ab")  # noqa: SIM115 - handed to the child
        # stdin: the owner's pipe (`--owned`, node_main.watch_owner); the node stops at its
        # EOF, so a node outlives this process only once handed over (`detach`). Only this
        # process holds the write end: Popen closes every other descriptor in its children.
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logf,
                             env=env, text=True, start_new_session=True)
        logf.close()
        assert p.stdout is not None and p.stdin is not None
        _OWNED[p.pid] = p.stdin  # kept open (an unreferenced file is closed: EOF)
        try:
            line = p.stdout.readline()
        except BaseException:  # interrupted (issue 41): a node not yet recorded is not left
            p.kill()
            p.wait()
            raise
        if line.startswith(LISTEN_FAILED):  # a port taken after check_ports looked
            p.wait(timeout)
            _, listener, port, why = line.rstrip("\n").split(" ", 3)
            raise PortTaken(nid, listener, int(port), why)
        if not line.startswith("READY"):
            p.wait(timeout)
            err = (self.dir / f"n{nid}.log").read_text().strip().splitlines()
            raise RuntimeError(f"node {nid} failed to start: {err[-1] if err else line!r}")
        self.meta["pids"][str(nid)] = p.pid
        self.save()
        return p.pid

    def detach(self, nids: list[int]) -> None:
        """Hand the nodes `nids` this process started over to the cluster's file: they run
        on after it exits, until `cluster stop` (what `cluster start` promises once every
        partition has a leader)."""
        for nid in nids:
            pipe = _OWNED.pop(int(self.meta["pids"].get(str(nid), -1)), None)
            if pipe is not None:
                with contextlib.suppress(OSError):  # the node already gone
                    pipe.write(DETACH)
                    pipe.close()

    def kill(self, nid: int, sig: int = signal.SIGKILL,
             waiting: Callable[[int], None] | None = None) -> Ended:
        """Send `sig` to node `nid`; a SIGTERM not obeyed within STOP_GRACE_S is followed by
        SIGKILL. What happened is returned, for the CLI to say (newuser12 P5/P14: `cluster
        kill` and a stop that had to kill said nothing). `waiting(pid)` is called once
        when the node has not exited after WAIT_SAY_S (a frozen node: 10 s silent)."""
        # The pid leaves the cluster's file only once the node is known gone: a signal
        # (Ctrl-C of `cluster stop`) between forgetting it and killing it left a running
        # node that no later `stop` knew of.
        pid = self.meta["pids"].get(str(nid))
        if pid is None:
            return Ended(nid, None, NOT_RUNNING)
        ended = self._end(nid, pid, sig, waiting)
        self.meta["pids"].pop(str(nid), None)
        self.save()
        return ended

    def _end(self, nid: int, pid: int, sig: int,
             waiting: Callable[[int], None] | None) -> Ended:
        """Signal node `nid`'s process `pid` and wait for it (`kill`)."""
        pipe = _OWNED.pop(pid, None)
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
        if not self.is_node(nid, pid):  # dead, or its pid now another process's: not ours
            with contextlib.suppress(ChildProcessError):  # a child of ours that died: reaped
                os.waitpid(pid, os.WNOHANG)
            return Ended(nid, pid, NOT_RUNNING)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return Ended(nid, pid, NOT_RUNNING)
        except PermissionError as e:  # kill(2) EPERM: another user's process (newuser18 U4)
            raise NotPermitted(nid, pid, e.strerror or str(e)) from None
        if sig == signal.SIGKILL:
            _wait_exit(pid, STOP_GRACE_S)
            return Ended(nid, pid, KILLED)
        gone = _wait_exit(pid, min(WAIT_SAY_S, STOP_GRACE_S))
        if not gone and waiting is not None:
            waiting(pid)
        if gone or _wait_exit(pid, max(0.0, STOP_GRACE_S - WAIT_SAY_S)):
            return Ended(nid, pid, STOPPED)
        # A node that ignores or hangs on SIGTERM must not outlive `stop`.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_exit(pid, STOP_GRACE_S)
        return Ended(nid, pid, FORCED)

    def stop_all(self) -> None:
        for nid in self.ids:
            self.kill(nid, signal.SIGTERM)


# How long a node is given to obey SIGTERM before SIGKILL, and after how long the wait is
# said (a frozen node takes the whole grace).
STOP_GRACE_S = 10.0
# Half the grace: a healthy node took over 2 s (the value before) to obey on a loaded host,
# and every stop warned of a SIGKILL that never came (newuser13 Q7, 4 stops of 4).
WAIT_SAY_S = 5.0
# How a node ended (`Ended.how`).
NOT_RUNNING = "not running"  # no process of the node's: nothing was signalled
STOPPED = "stopped"  # exited on the signal sent
KILLED = "killed"  # SIGKILL sent (`cluster kill`)
FORCED = "forced"  # did not obey SIGTERM within STOP_GRACE_S: SIGKILLed


class NotPermitted(PermissionError):
    """Node `nid`'s process `pid` may not be signalled by this user: kill(2) "EPERM The
    calling process does not have permission to send the signal to any of the target
    processes" (a process of another user's, without CAP_KILL). Nothing was sent to it."""

    def __init__(self, nid: int, pid: int, why: str) -> None:
        super().__init__(why)
        self.nid, self.pid, self.why = nid, pid, why

    def owner(self) -> str | None:
        """The user the process runs as (its /proc entry's owner, proc(5)), if known."""
        import pwd

        try:
            uid = os.stat(f"/proc/{self.pid}").st_uid
        except OSError:
            return None
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"

    def words(self) -> str:
        """`cannot signal node N (pid P): WHY (it runs as USER: ...)`."""
        owner = self.owner()
        runs = (f"it runs as user {owner}: run this as that user, or as root" if owner
                else "run this as the user that started it, or as root")
        return f"cannot signal node {self.nid} (pid {self.pid}): {self.why} ({runs})"


@dataclass(frozen=True)
class Ended:
    """What `LocalCluster.kill` did to one node."""

    nid: int
    pid: int | None  # None: the cluster's file records no process for it
    how: str


# The write ends of the owner pipes of the nodes this process started and has not handed
# over (`detach`) or stopped, by pid: module-level, so that a LocalCluster object dropped
# (a new one is made from the cluster's file) does not close them and stop its nodes.
_OWNED: dict[int, IO[str]] = {}


def nodes_on(data_dir: str | os.PathLike[str]) -> dict[int, int]:
    """Node id -> pid of every node process running on DATA_DIR, found by its command line
    (`proctree.command_lines`) as `LocalCluster.is_node` checks one: node_main with
    `--data-dir DATA_DIR/n<id>`. Not the cluster's file: `cluster stop` uses it when that
    file is damaged (newuser11 M5: the stop refused, and its advice left the nodes running
    and holding their ports)."""
    from epochgc.impl.proctree import command_lines

    base = Path(data_dir).absolute()
    found: dict[int, int] = {}
    for pid, argv in command_lines().items():
        if pid == os.getpid() or NODE_MODULE.encode() not in argv \
                or b"--data-dir" not in argv[:-1]:
            continue
        given = Path(os.fsdecode(argv[argv.index(b"--data-dir") + 1]))
        name = given.name
        if not (name.startswith("n") and name[1:].isascii() and name[1:].isdigit()):
            continue
        with contextlib.suppress(OSError):  # the same directory by another path
            if given.parent == base or os.path.samefile(given.parent, base):
                found[int(name[1:])] = pid
    return found


def stop_pids(pids: list[int], grace_s: float = 10.0) -> None:
    """SIGTERM each, SIGKILL what is still alive after `grace_s` (as `LocalCluster.kill`
    stops a node), and wait for them to exit."""
    from epochgc.impl.proctree import alive, stop

    stop(pids, grace_s)
    deadline = time.monotonic() + grace_s  # after a SIGKILL: its exit (a zombie counts)
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:  # a child of ours is reaped; another process's is its parent's
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return True
        except ChildProcessError:  # not our child (another `epochgc` invocation started it)
            if not _alive(pid):
                return True
        time.sleep(0.02)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # kill(2): EPERM, it exists but is another user's (newuser18 U4)
        return True
    return True
