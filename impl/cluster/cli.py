"""`epochgc cluster start|status|stop|kill NODE`, `epochgc produce`, `epochgc consume`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from epochgc.impl import closedout, errorline, pathopt, signals
from epochgc.impl.cluster import asked, local
from epochgc.impl.cluster.client import ProcClusterAccess, stderr_line
from epochgc.impl.cluster.errors import DamagedClusterFile
from epochgc.impl.cluster.local import (
    FORCED,
    KILLED,
    NOT_RUNNING,
    LocalCluster,
    NotPermitted,
    PortTaken,
    StartRunning,
    cluster_lock,
    lock_holder,
    nodes_on,
    stop_pids,
)
from epochgc.impl.cluster.meta import NAMED
from epochgc.impl.cluster.owner import new_cluster_id
from epochgc.impl.cluster.placement import placement_problem
from epochgc.impl.cluster.rpc import MAX_RECORD_BYTES
from epochgc.impl.cluster.storeclaim import (
    claim_store,
    owner_store,
    refuse_held_data,
    store_owner,
)
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.finite import FiniteFloat
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.manifest import inside_data_problem
from epochgc.impl.gc.reports import read_cluster_view
from epochgc.impl.preflight import (
    Refused,
    partition_names,
    require_modules,
    store_modules,
    store_writable,
    writable_dir,
    writable_file,
)
from epochgc.impl.raft.identity import (
    LEGACY_CLUSTER_ID,
    IdentityMismatch,
    IdentityMissing,
    IdentityUnreadable,
)
from epochgc.impl.shortlist import short_list, short_tail
from epochgc.impl.signals import checkpoint
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.url import StoreSpec, open_store, parse_store_url

MAX_NODES = 15
# Below the nodes' 0.05 s tick an interval only burns CPU (1e-300 minted ~100 epochs/s);
# above an hour no GC round ever sees an epoch end.
MIN_MINT_INTERVAL_S, MAX_MINT_INTERVAL_S = 0.1, 3600.0


@click.group()
def cluster() -> None:
    """A local multi-process cluster on loopback."""


@cluster.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.option("--store", required=True, help="store URL or directory")
# Every node is a process with three listeners and its Raft log on this machine: a
# bound, not 100,000 processes ending in `OSError: Too many open files` (newuser7 H6).
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, MAX_NODES),
              help=f"how many node processes (1-{MAX_NODES})")
@click.option("--partitions", default="t/0,t/1,t/2,t/3,t/4,t/5,t/6,t/7", show_default=True)
@click.option("--mint-interval", default=3.0, show_default=True,
              type=FiniteFloat(MIN_MINT_INTERVAL_S, MAX_MINT_INTERVAL_S),
              help=f"seconds between the epochs the controller mints "
                   f"({MIN_MINT_INTERVAL_S:g}-{MAX_MINT_INTERVAL_S:g})")
@click.option("--trace", default=None, type=pathopt.Path(dir_okay=False),
              help="every node appends an NDJSON trace here (epochgc check-trace FILE); "
                   "a node that cannot write it (a full disk, a size limit) stops its trace "
                   "at its last whole record and serves on (cluster status says it; if "
                   "another node appended after its torn record, that is left and said, and "
                   "check-trace refuses its line)")
@click.option("--s3-endpoint", default=None,
              help="endpoint of an S3-compatible server, for s3:// stores")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="the nodes' JSON logs (DATA_DIR/n<id>.log); may change on a restart")
@click.option("--new-ports", is_flag=True,
              help="restart an existing cluster on new free ports (every node stopped): for "
                   "when another program took a port recorded in DATA_DIR/cluster.json")
@click.pass_context
def start(ctx: click.Context, data_dir: str, store: str, nodes: int, partitions: str,
          mint_interval: float, trace: str | None, s3_endpoint: str | None,
          log_level: str, new_ports: bool) -> None:
    """Start the cluster under DATA_DIR, or the nodes of an existing one that are not
    running (then every option given must match what the cluster was created with).
    The nodes run on after "cluster ready" (until `cluster stop`); a start that ends before
    it, even by `kill -9`, leaves none of the nodes it started running.

    A store belongs to one cluster: the first start names its cluster in the store
    (_cluster/cluster-id.json, the id also in DATA_DIR/cluster.json); a start of another
    cluster on it is refused (64), naming the data directory that owns it, and so is a new
    cluster on a store that names none but holds a cluster's data (only that older cluster's
    own data directory adopts it). A local store equal to, inside or around DATA_DIR is
    refused (64) for a new cluster (an existing one made so starts, with a warning).
    A node's data directory names its cluster and node (DATA_DIR/nN/node-identity): one of
    another cluster or node is refused (1) before any node starts, and so is one naming no
    cluster (an older version's) unless this cluster's file was written by an older version
    and is not yet marked; docs/operations.md."""
    try:
        spec = parse_store_url(store, s3_endpoint)
    except StoreError as e:
        raise click.BadParameter(str(e), param_hint="--store") from None
    made = _missing_dirs(data_dir)
    if spec.kind == "file":
        made += [d for d in _missing_dirs(spec.location) if d not in made]
    try:
        # A directory it cannot make is a bad argument (64), named, not an OSError's repr.
        data_dir = str(writable_dir(data_dir, "--data-dir"))
        # One start at a time on a data directory (issue 41 item 12), and none beside a stop
        # or kill (newuser25 H3): refused before it reads the cluster's file or binds
        # anything.
        with cluster_lock(data_dir, "start"):
            _start(ctx, LocalCluster(data_dir), spec, store, nodes, partitions,
                   mint_interval, trace, s3_endpoint, log_level, new_ports)
    except StartRunning as e:
        raise click.ClickException(str(e)) from None
    except BaseException:
        # newuser11 M3: a start refused (a preflight, a signal) left the empty data
        # directory it had made. What it made and is still empty goes; nothing else.
        _remove_empty(made)
        raise


def _missing_dirs(path: str) -> list[Path]:
    """The directories `mkdir -p path` would make, deepest first."""
    out: list[Path] = []
    d = Path(path).expanduser().absolute()
    while not d.exists() and d != d.parent:
        out.append(d)
        d = d.parent
    return out


def _remove_empty(made: list[Path]) -> None:
    """Remove each directory of `made` (deepest first) that is still empty: rmdir(2)
    removes only an empty directory, so one a node or another command wrote into stays."""
    for d in sorted(made, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()


def _start(ctx: click.Context, lc: LocalCluster, spec: StoreSpec, store: str, nodes: int,
           partitions: str, mint_interval: float, trace: str | None, s3_endpoint: str | None,
           log_level: str, new_ports: bool) -> None:
    checkpoint("start")
    # Saved absolute: `produce` and the nodes may run from another directory.
    store = spec.location if spec.kind == "file" else store
    parts = [p for p in partitions.split(",") if p]
    if not lc.meta:
        parts = partition_names(parts, "--partitions")
    if trace:
        writable_file(trace, "--trace")
        # newuser9 K5: not where GC lists (the store's data prefix), as gc's outputs.
        problem = inside_data_problem(trace, spec, "--trace")
        if problem is not None:
            raise Refused(problem, ExitCode.USAGE)
    trace = str(Path(trace).absolute()) if trace else None
    if lc.meta:
        _refuse_changes(ctx, lc, {
            "store": store, "nodes": nodes, "partitions": parts, "mint_interval": mint_interval,
            "trace": trace, "s3_endpoint": s3_endpoint})
    if spec.kind == "file":
        # newuser18 U1: a store in (or around) a data directory mixes objects and Raft logs.
        problem = placement_problem(str(lc.dir), spec.location)
        if problem is not None and lc.meta:
            # An existing cluster made so (the old README's `--data-dir run --store
            # run/store`) restarts: moving its store is a changed option, so refusing
            # stranded its data (review41a R3). New clusters are refused.
            _say_start(f"warning: {problem} (this cluster was created so: it starts; "
                       "docs/operations.md \"One store, one cluster\")")
        elif problem is not None:
            raise Refused(f"refused: {problem} (nothing was started)", ExitCode.USAGE)
    # Every node directory this start would start names this cluster, checked before
    # anything is written (newuser21 X1): a directory of another cluster is refused.
    cluster_id = lc.meta.get("cluster_id") or new_cluster_id()
    _check_identities(lc, nodes, cluster_id)
    # The start's first writes (the store's directory, its preflight object, the
    # cluster's file): what a signal's line says from here (newuser15 S3).
    signals.doing(f"no node was started; the cluster's file ({lc.meta_path}) may have been "
                  "written")
    if spec.kind == "file":
        # The default store is a local directory: make it, as a new user expects.
        writable_dir(spec.location, "--store")
    # Before any node starts: the nodes need boto3 for s3:// and a store they can write
    # (issue 41: "cluster ready" on a bucket that did not exist; every produce then failed).
    store_writable(spec, "cluster start", _say_start)
    with owner_store(spec, _say_start) as claimed:
        # The store names the cluster it belongs to (newuser18 U1): another's is refused
        # here, before this start writes anything.
        owned = store_owner(claimed, spec, lc)
        new = not lc.meta
        if owned is None and new:
            # Only an existing data directory adopts a store that names no cluster but holds
            # one's data (review41a R1): a new one would take a live older cluster's store.
            refuse_held_data(claimed, spec, f"the one under {lc.dir}")
        if new:
            extra = ["--trace", trace] if trace else []
            if s3_endpoint:
                extra += ["--s3-endpoint", s3_endpoint]
            lc.init(nodes, store, parts, mint_interval, extra, cluster_id)
            lc.meta["s3_endpoint"] = s3_endpoint
        if "cluster_id" not in lc.meta:  # made before stores named their cluster
            lc.meta["cluster_id"] = cluster_id
        lc.save()  # the id is in the cluster's file before the store names it
        if owned is None:
            claim_store(claimed, spec, lc, new)
    if new_ports and not new:
        running = lc.running()
        if running:
            raise click.UsageError(
                "--new-ports moves every node, so every node must be stopped first; running: "
                + ", ".join(f"node {n}" for n in running)
                + f" (epochgc cluster stop --data-dir {lc.dir})")
        lc.new_ports()
    lc.meta["log_level"] = log_level.upper()
    lc.save()
    # A node killed by `kill -9` (or its start) left its pid behind: started again, never
    # taken for running (newuser7 H5: "cluster ready" with a node down, or 60 s of silence).
    for n, pid in sorted(lc.forget_dead().items()):
        click.echo(f"node {n}: not running (pid {pid} recorded in {lc.meta_path} is gone "
                   "or another program's); starting it")
    to_start = [n for n in lc.ids if str(n) not in lc.meta["pids"]]
    try:
        lc.check_ports(to_start)
    except PortTaken as e:
        raise _port_taken(e, lc, store, []) from None
    started: list[int] = []
    try:
        for n in to_start:
            pid = lc.start(n)
            started.append(n)
            click.echo(f"node {n}: pid {pid}")
        checkpoint("nodes-up")
        signals.run(_until_ready(lc, list(lc.meta["partitions"])))
        # Never "ready" with a node down (newuser7 H5): one that died meanwhile is said.
        down = sorted(set(lc.ids) - set(lc.running()))
        if down:
            raise RuntimeError(
                "every partition has a leader, but " + ", ".join(f"node {n}" for n in down)
                + f" is not running (its log: {lc.dir}/n{down[0]}.log); run the same start "
                "again")
        # Ready: handed over, they run on after this command (until `cluster stop`); a
        # start killed before this point (kill -9) leaves none of its nodes running.
        lc.detach(started)
        if lc.mark_named():  # an upgraded cluster: every node named it at this start
            _say_start(f"every node's data directory now names this cluster ({lc.meta_path}: "
                       f"{NAMED}): one naming no cluster (an older version's) is refused "
                       "from now on")
        # newuser14 R3: a failed stdout write's line says the cluster runs (a bare "cannot
        # write" reads as a start that failed).
        closedout.done(f"the cluster is running ({len(lc.ids)} node(s), "
                       + (f"started node(s) {_ids(started)}" if started
                          else "every node was running already")
                       + f"): every partition has a leader ({lc.dir})")
    except KeyboardInterrupt as e:  # SIGINT or SIGTERM: what this start started is stopped
        sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
        _stop_started(lc, started)
        # Said on the one interrupted line (newuser15 S5: its own line, then a bare one).
        raise signals.Interrupted(sig.signum, f"stopped the {len(started)} node(s) it had "
                                  f"started under {lc.dir}") from None
    except PortTaken as e:  # taken between the check and the node's bind
        _stop_started(lc, started)
        raise _port_taken(e, lc, store, started) from None
    except Exception:
        # A start that fails leaves no node of its own running (the ones running before
        # it stay): a later start begins from a clean state.
        _stop_started(lc, started)
        raise
    # Said, the start is complete: a signal no longer changes its exit code (newuser19
    # V2: one just after this line ended the command 130, no line, its nodes running).
    with signals.finishing(ExitCode.OK):
        click.echo("cluster ready: every partition has a leader")


def _check_identities(lc: LocalCluster, nodes: int, cluster_id: str) -> None:
    """Refuse (1) a start whose nodes to start include a data directory of another node or
    cluster (LocalCluster.check_identities); say each directory an older version wrote
    that takes this cluster's id at this start."""
    if lc.meta:
        running = lc.running()
        nids = [n for n in lc.ids if n not in running]
    else:
        nids = list(range(1, nodes + 1))
    try:
        # Only a cluster an older version made, not yet marked (review41c C1).
        adopted = lc.check_identities(nids, cluster_id, adopt_legacy=lc.legacy_allowed)
    except (IdentityMismatch, IdentityMissing, IdentityUnreadable) as e:
        why = ""
        if isinstance(e, IdentityMismatch) and e.found.cluster_id == LEGACY_CLUSTER_ID:
            why = (" It was written by an older version, which named no cluster; this "
                   + (f"cluster's file ({lc.meta_path}) says {NAMED}: every node of it names "
                      "its id" if lc.meta else "cluster is new at this start")
                   + ", so it came from another cluster or a backup.")
        # One sentence after another (newuser22 Y6: "...invalid start byte See docs/..."):
        # the refusal's own words end with a full stop.
        said = str(e) if str(e).endswith(".") else f"{e}."
        raise Refused(f"{said}{why} See docs/operations.md, \"Never restore a node's data "
                      "directory from a backup\" (no node was started)",
                      ExitCode.FAILED) from None
    for nid, found in adopted:
        _say_start(
            f"warning: node {nid}'s data directory ({lc.node_dir(nid)}) was written by an "
            f"older version, which named no cluster in it (cluster {found.cluster_id!r}): it "
            f"takes this cluster's id {cluster_id!r} ({lc.meta_path}) when node {nid} "
            f"starts. Until every node of this cluster has so started ({lc.meta_path} then "
            f"says {NAMED}), a directory an older version wrote for another cluster cannot "
            "be told apart; docs/operations.md, \"Never restore a node's data directory from "
            "a backup\"")


def _say_start(line: str) -> None:
    stderr_line(f"cluster start: {line}")


def _stop_started(lc: LocalCluster, started: list[int]) -> None:
    with signals.deferred():  # a signal during the stop is raised once every node is gone
        for n in started:
            lc.kill(n, signal.SIGTERM)


def _port_taken(e: PortTaken, lc: LocalCluster, store: str, stopped: list[int]) -> Refused:
    """One line: which node, which listener, which port, and the two ways on."""
    done = (f"stopped the {len(stopped)} node(s) this start had started" if stopped
            else "no node was started")
    held = (f"another program holds it (`ss -ltnp 'sport = :{e.port}'` names it). Free it"
            if "in use" in e.why.lower() else "Fix that")
    return Refused(
        f"node {e.node}'s {e.listener} port {e.port} (from {lc.meta_path}) cannot be bound: "
        f"{e.why}; {held} and run the same start again, or move the stopped cluster to new "
        "ports: "
        f"epochgc cluster start --data-dir {lc.dir} --store {store} --new-ports ({done})",
        ExitCode.FAILED)


def _saved(lc: LocalCluster) -> dict[str, Any]:
    """What an existing cluster was created with, in `start`'s option names."""
    extra = list(lc.meta.get("extra", []))
    trace = extra[extra.index("--trace") + 1] if "--trace" in extra else None
    return {"store": lc.meta["store"], "nodes": len(lc.ids), "partitions": lc.meta["partitions"],
            "mint_interval": lc.meta["mint_interval"], "trace": trace,
            "s3_endpoint": lc.meta.get("s3_endpoint")}


def _refuse_changes(ctx: click.Context, lc: LocalCluster, given: dict[str, Any]) -> None:
    """An existing cluster keeps its configuration: an option given with another value was
    silently ignored, so it is refused naming what differs. --store is always given."""
    saved = _saved(lc)
    differ = [
        f"--{name.replace('_', '-')}: {given[name]!r} (the cluster has {saved[name]!r})"
        for name in given
        if (name == "store" or ctx.get_parameter_source(name)
            in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT))
        and given[name] != saved[name]]
    if differ:
        raise click.UsageError(
            f"{lc.dir} holds a cluster created with other options; start it with its own "
            "(or use a new --data-dir): " + "; ".join(differ))  # one line (newuser17 T5)


async def _until_ready(lc: LocalCluster, partitions: list[str], timeout_s: float = 60.0) -> None:
    """`start` returns when the cluster can take writes: the controller has created every
    partition and each has a leader (so a `produce` right after it succeeds)."""
    access = ProcClusterAccess(lc.client_addrs(), hint=lc.down_hint(), say=stderr_line)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    missing = partitions
    try:
        while loop.time() < deadline:
            try:
                meta = await access.any_call(op="meta")
            except ConnectionError:
                meta = {"partitions": {}}
            known = meta.get("partitions", {})
            gone = set(meta.get("deleted", [])) - set(known)  # deleted since (epochgc topic)
            missing = [p for p in partitions
                       if p not in gone and not (known.get(p) or {}).get("leader")]
            if not missing:
                return
            await asyncio.sleep(0.2)
    finally:
        await access.close()
    raise RuntimeError(f"cluster not ready after {timeout_s:.0f}s: no leader for "
                       + ", ".join(missing))


@cluster.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
def stop(data_dir: str) -> None:
    """Stop every node of the cluster in DATA_DIR (its data stays). With DATA_DIR's
    cluster.json damaged, the node processes running on DATA_DIR are found by their
    command lines and stopped, and the damage is refused (65). A `cluster start` running on
    DATA_DIR is waited for (said), then what it started is stopped too."""
    with _changing(data_dir, "stop", "no node was stopped (none was asked)"):
        _stop(data_dir)


@contextlib.contextmanager
def _changing(data_dir: str, command: str, if_interrupted: str) -> Iterator[None]:
    """DATA_DIR's cluster lock for `stop` or `kill` (local.cluster_lock): another command
    holding it (a start still starting nodes) is waited for, said on stderr at once and
    every LOCK_SAY_EVERY_S (newuser26 J1); a signal during the wait ends the command with
    `if_interrupted`. A DATA_DIR that does not exist holds no cluster: nothing to lock
    (the command refuses it as before, making nothing)."""
    if not Path(data_dir).is_dir():
        yield
        return
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(cluster_lock(
                data_dir, command, waiting=lambda holder, waited_s, stopped: click.echo(
                    ("waiting for" if waited_s < 1 else f"still waiting ({waited_s:.0f} s) for")
                    + f" {holder.who()} on {Path(data_dir).absolute()} to finish"
                    + (f"; its process is stopped (Ctrl-Z or SIGSTOP): `kill -CONT "
                       f"{holder.pid}` resumes it" if stopped else ""), err=True)))
        except KeyboardInterrupt as e:
            sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
            raise signals.Interrupted(sig.signum, if_interrupted) from None
        yield


def _stop(data_dir: str) -> None:
    try:
        lc = LocalCluster(data_dir)
    except DamagedClusterFile as e:
        raise Refused(_stopped_without_file(data_dir, e), ExitCode.DATAERR) from None
    except KeyboardInterrupt as e:  # newuser14 R8: "interrupted by SIGINT" only
        sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
        raise signals.Interrupted(sig.signum, "no node was stopped (none was asked)") from None
    stopped: list[int] = []
    being: list[int] = []  # the node asked to exit, not yet seen gone
    idle: list[int] = []  # not running: nothing to stop
    try:
        for nid in lc.ids:  # as `LocalCluster.stop_all`, saying which it stopped
            being.append(nid)
            ended = lc.kill(nid, signal.SIGTERM, waiting=_say_waiting(nid))
            if ended.how == FORCED:
                # It skipped its shutdown: the operator is told (newuser12 P14: 15.7 s
                # silent, exit 0, no word of the SIGKILL).
                click.echo(f"node {nid} (pid {ended.pid}) did not stop within "
                           f"{local.STOP_GRACE_S:g} s: killed", err=True)
            (idle if ended.how == NOT_RUNNING else stopped).append(being.pop())
            checkpoint("node-stopped")  # the signal tests' point
    except NotPermitted as e:
        # newuser18 U4: "Operation not permitted" alone, no node, no pid, nothing of what
        # was stopped. The node was sent nothing; the ones after it were not asked.
        left = [n for n in lc.ids if n not in stopped and n not in idle and n != e.nid]
        said = [f"node(s) {_ids(stopped)} stopped" if stopped else "nothing stopped"]
        if idle:
            said.append(f"node(s) {_ids(idle)} not running")
        if left:
            said.append(f"node(s) {_ids(left)} not asked")
        raise click.ClickException(f"{e.words()}; " + "; ".join(said)) from None
    except KeyboardInterrupt as e:
        # What was done (newuser11 M12: "interrupted by SIGINT" only, 1 of 3 stopped).
        left = [n for n in lc.ids if n not in stopped and n not in being and n not in idle]
        sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
        said = [f"node(s) {_ids(stopped)} stopped" if stopped else "no node stopped"]
        if being:
            said.append(f"node {being[0]} was being stopped (it may still run)")
        if left:
            said.append(f"node(s) {_ids(left)} not asked")
        again = (f": `epochgc cluster stop --data-dir {data_dir}` again stops what still runs"
                 if being or left else "")
        raise signals.Interrupted(sig.signum, "; ".join(said) + again) from None
    if stopped:  # newuser14 R3: said if stdout fails
        closedout.done(f"stopped node(s) {_ids(stopped)}")
    # What was done (newuser13 Q7: nothing was said, for a stop or for nothing to stop), as
    # `cluster kill` says it (newuser12 P5); its work done, a signal no longer changes the
    # exit code (newuser20 W3: "interrupted by SIGINT: stopped node(s) 1, 2, 3", 130).
    with signals.finishing(0):
        click.echo(f"stopped node(s) {_ids(stopped)}"
                   + (f"; node(s) {_ids(idle)} not running" if idle else "")
                   if stopped else "no node was running: nothing stopped")


def _say_waiting(nid: int) -> Callable[[int], None]:
    def say(pid: int) -> None:
        click.echo(f"waiting for node {nid} (pid {pid}) to stop: SIGKILL if it has not "
                   f"within {local.STOP_GRACE_S:g} s", err=True)
    return say


def _ids(nids: list[int]) -> str:
    return ", ".join(map(str, nids))


def _stopped_without_file(data_dir: str, e: DamagedClusterFile) -> str:
    """Stop the nodes running on `data_dir` found by their command lines (`nodes_on`), and
    say it (newuser11 M5: the refusal's "move the data directory aside and start a new
    cluster" left them running, holding its ports). Stopped, not only named: a process
    running node_main on DATA_DIR/n<id> is a node of this data directory by the same test
    `is_node` applies to every recorded pid, and stopping them is what was asked."""
    found = nodes_on(data_dir)
    with signals.deferred():  # a signal during the stop is raised once they are gone
        stop_pids(sorted(found.values()))
    nodes = ", ".join(f"node {n} (pid {pid})" for n, pid in sorted(found.items()))
    did = (f"stopped {nodes}, found running on {Path(data_dir).absolute()} by their "
           "command lines" if found
           else f"no node process runs on {Path(data_dir).absolute()}")
    return (f"{e.path}: {e.what} (a damaged cluster file); {did}; restore the file, or move "
            "the data directory aside and start a new cluster")


@cluster.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.argument("node", type=int)
def kill(data_dir: str, node: int) -> None:
    """SIGKILL one node (a `cluster start` running on DATA_DIR is waited for, said)."""
    with _changing(data_dir, "kill", "nothing was killed"):
        _kill(data_dir, node)


def _kill(data_dir: str, node: int) -> None:
    lc = LocalCluster(data_dir)
    if node not in lc.ids:
        raise click.BadParameter(
            f"no node {node} in the cluster under {lc.dir} (nodes: "
            + ", ".join(map(str, lc.ids)) + ")", param_hint="NODE")
    signals.doing(f"node {node} may have been killed")  # newuser15 S3: said if signalled
    try:
        ended = lc.kill(node, signal.SIGKILL)
    except NotPermitted as e:  # newuser18 U4, as `cluster stop` says it
        raise click.ClickException(f"{e.words()}; nothing was killed") from None
    if ended.how == KILLED:  # newuser14 R3: said if stdout fails
        closedout.done(f"node {node} (pid {ended.pid}) was killed")
    else:
        signals.doing(f"nothing was killed: node {node} was not running")
    # Said either way (newuser12 P5: nothing, and exit 0 also for a node not running; the
    # wanted state holds then, so 0 stays, and the line says nothing was killed).
    with signals.finishing(0):  # its output is the run's end (newuser22 Y4)
        click.echo(f"node {node} (pid {ended.pid}) killed" if ended.how == KILLED
                   else f"node {node} is not running: nothing killed")


@cluster.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
def status(data_dir: str, as_json: bool) -> None:
    """Per partition: leader, term, applied window, seen window, LRO, M(p); and cluster M.

    Exit 0 when every node answers and the cluster's M is known, 1 otherwise (a node
    unreachable, GC blocked, the reports unreadable, or a topic with fewer partitions than
    a `topic create` whose outcome was not seen asked for; one none of whose partitions
    exists, its command ended, is said but not counted; partitions left by a `topic delete`
    whose outcome was not seen; a topic some of whose partitions were deleted below one that
    exists; a node whose object-store writes keep failing): a script can wait on it. A node
    whose `--trace` stopped (a write failed) is said, not counted."""
    closedout.output_is_work()  # its output is what it was asked for
    lc = LocalCluster(data_dir)
    lc.client_addrs()  # no cluster under DATA_DIR: refused (64) before anything else
    _require_store_modules(lc, "cluster status")

    async def gather() -> dict[int, Any]:
        # Every node at once, as `barrier` asks them (statuspoll.py): asked one after
        # another, a frozen node (SIGSTOP: its socket still accepts) held the rest for its
        # whole read bound, QUICK_S each (newuser10 L10).
        access = ProcClusterAccess(lc.client_addrs(), hint=lc.down_hint(), say=stderr_line)
        try:
            answers = await asyncio.gather(*(access.call(n, op="status") for n in lc.ids))
        finally:
            await access.close()
        return {n: r.get("data") for n, r in zip(lc.ids, answers, strict=True)}

    nodes = signals.run(gather())  # a signal cancels it (newuser20 W7: see consume)
    cluster_m = _cluster_m(lc)
    answered = all(st is not None for st in nodes.values())
    # A create cut short (a node stopped mid-create: newuser11 M11), judged only when every
    # node answered (a node unreachable is said already, and its partitions unknown).
    ledger = asked.entries(data_dir)
    asked_for = {t: a.partitions for t, a in ledger.items()}
    short = asked.short_topics(asked_for, (p for st in nodes.values() if st is not None
                                           for p in st["partitions"])) if answered else {}
    # None of it made and its command gone: said, not counted (newuser16 S4: an entry left
    # by a create that failed before it was sent made every later status exit 1).
    unmade = asked.never_made(short, ledger)
    short = {t: n for t, n in short.items() if t not in unmade}
    # A delete cut short (newuser17 T2), and a topic some of whose partitions were deleted
    # below one that exists (T1: a delete and a create of it crossed): judged, as `short`,
    # only when every node answered.
    live = [p for st in nodes.values() if st is not None for p in st["partitions"]]
    cut = asked.cut_deletes(asked.deletes(data_dir), live) if answered else {}
    gone = {d[0] for st in nodes.values() if st is not None
            for d in (st.get("controller") or {}).get("deleted") or []}
    holed = {t: ns for t, ns in asked.holes(live, gone).items()
             if t not in cut} if answered else {}
    # A node whose services keep failing on the object store (newuser16 S8: a reconciler
    # that cannot write L1 holds GC back for good, and status said 0).
    failing = {n: st.get("storage_failing") or {} for n, st in nodes.items() if st is not None}
    healthy = (answered and cluster_m["M"] is not None and not short and not cut
               and not holed and not any(failing.values()))
    # A start, stop or kill running on DATA_DIR (newuser26 J2: "node 2: unreachable" alone
    # beside a stop): said, not counted against health (the nodes' answers are).
    changing = lock_holder(data_dir)
    # Decided: its output is the run's end, a signal no longer changes the exit code
    # (newuser20 W3: after `cluster M: N`, "interrupted ...: nothing was written yet").
    with signals.finishing(0 if healthy else 1):
        if as_json:
            click.echo(json.dumps({"nodes": nodes, "cluster": cluster_m, "healthy": healthy,
                                   "short_topics": {t: {"partitions": n, "asked": asked_for[t]}
                                                    for t, n in short.items()},
                                   "never_made": {t: {"asked": asked_for[t]}
                                                  for t in sorted(unmade)},
                                   "deletes_cut_short": {t: {"partitions": n}
                                                         for t, n in cut.items()},
                                   "deleted_below_existing": holed,
                                   "changing": None if changing is None else {
                                       "command": changing.command,
                                       "pid": changing.pid}},
                                  default=str))
            raise SystemExit(0 if healthy else 1)
        for n, st in nodes.items():
            if st is None:
                click.echo(f"node {n}: unreachable{_stop_reason(lc, n)}")
                continue
            for p, s in st["partitions"].items():
                if s["leader"] != n:
                    continue
                click.echo(
                    f"{p:8} leader={n} term={s['term']} applied={s['applied_window']} "
                    f"seen={s['seen_window']} LRO={s['lro']} M(p)={s['inactive_epoch']}"
                )
        if changing is not None:
            click.echo(f"{changing.who()} is running on {lc.dir}: its nodes may be starting "
                       "or stopping")
        if cluster_m["M"] is not None:
            click.echo(f"cluster M: {cluster_m['M']}")
        else:
            blocked = cluster_m.get("blocked")
            # The partitions without a report, cut (newuser9 K9: a line of 20,000 characters).
            why = short_tail(str(blocked)) if blocked else cluster_m.get("error") or "unknown"
            click.echo(f"cluster M: none ({why})")
        for n, services in failing.items():
            for f in services.values():
                click.echo(f"node {n}: object store failing: {f['writes']} cannot be written, "
                           f"{f['rounds']:,} round(s) in a row since "
                           f"{time.strftime('%H:%M:%S', time.localtime(f['since']))}: "
                           f"{f['error']} (its log: {lc.dir / f'n{n}.log'})")
        for n, st in nodes.items():
            # A trace that could not grow (newuser18 U7): said, not counted against health (the
            # node serves on; only the observation aid stopped).
            ts = (st or {}).get("trace_stopped")
            if ts:
                click.echo(f"node {n}: trace stopped at record {ts['record']:,}: {ts['error']} "
                           f"({ts['path']} holds its records before it; the node serves on)")
        for t, n in short.items():
            click.echo(f"topic {t!r}: {n:,} of the {asked_for[t]:,} partitions its create asked "
                       f"for (a create cut short, or still running: `epochgc topic delete {t} "
                       f"--data-dir {data_dir}`, then create it again)")
        for t, n in cut.items():
            click.echo(f"topic {t!r}: {n:,} partition(s) left by a `topic delete` of it that "
                       f"ended without seeing its outcome, or still runs (run `epochgc topic "
                       f"delete {t} --data-dir {data_dir}` again)")
        for t, ns in holed.items():
            click.echo(f"topic {t!r}: partition(s) {short_list(ns)} were deleted while higher "
                       f"ones exist (a delete and a create of it crossed, or a delete cut short: "
                       f"`epochgc topic delete {t} --data-dir {data_dir}`, then create it again)")
        for t in sorted(unmade):
            click.echo(f"topic {t!r}: no partition of it exists; a `topic create` of it "
                       f"({asked_for[t]:,} partition(s)) ended without seeing its outcome, so it "
                       f"was most likely never applied (not counted against health; a `topic "
                       f"create {t}` or `topic delete {t}` with --data-dir {data_dir} clears "
                       f"this line)")
        raise SystemExit(0 if healthy else 1)


def _stop_reason(lc: LocalCluster, node: int) -> str:
    """The node's own last words if its log ends with why it stopped ("stopping: Raft
    storage: ...", newuser16 S12: status said "unreachable" alone), else nothing. Its
    log's last 4 KiB only: a log may be large."""
    path = lc.dir / f"n{node}.log"
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            tail = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    # Among its last lines only (a stop from an earlier run is not this one's reason; a
    # warning or two may follow it, e.g. "transport did not close in 5 s").
    last = [x for x in tail[-5:] if x.startswith(("stopping:", "refusing to start:"))]
    return f" (its log {path} says: {last[-1][:300]})" if last else ""


def _require_store_modules(lc: LocalCluster, command: str) -> None:
    """Refused (69) naming the extra, as `cluster start` is (preflight.require_modules), if
    the cluster's store needs a module that is not installed (newuser9 K8: with the base
    install on an s3:// cluster, `produce` said "object store unreachable (... No module
    named 'boto3')" and `cluster status` "cluster M: none (...)", exit 1)."""
    try:
        spec = parse_store_url(lc.meta["store"], lc.meta.get("s3_endpoint"))
    except StoreError:
        return  # its own command says what is wrong with it, where it opens the store
    require_modules(command, store_modules(spec))


def _cluster_m(lc: LocalCluster) -> dict[str, Any]:
    """The cluster's M from the reports in the store, or why there is none."""
    try:
        store = open_store(lc.meta["store"], lc.meta.get("s3_endpoint"))
        m = read_cluster_view(store, time.time(), 60).gc_epoch()
    except (ReportError, StoreError, OSError, ValueError) as e:  # no reports yet, store down
        return {"M": None, "error": str(e)}
    return {"M": m.M, "blocked": m.blocked}


# Records per partition in one L0 object: ~0.8 MB at the default size, built in ~50 ms.
BATCH_RECORDS = 10_000
# Records per partition one command produces: at the default batch, 100,000 objects. Without
# a bound `--count 99999999999999999999` was accepted and ran until killed (issue 41).
MAX_COUNT = 1_000_000_000
# One batch is built in memory before it is uploaded: its bodies are bounded, so no
# `--batch`/`--size` holds more than this at once (the default batch: 480 KB per partition).
MAX_BATCH_BYTES = 256 << 20


@click.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.option("--partition", "partitions", multiple=True, required=True)
@click.option("--count", default=10, show_default=True,
              type=click.IntRange(min=1, max=MAX_COUNT),
              help=f"records per partition, at most {MAX_COUNT:,}")
@click.option("--size", default=48, show_default=True,
              type=click.IntRange(min=1, max=MAX_RECORD_BYTES),
              help=f"payload body bytes per record, at most {MAX_RECORD_BYTES >> 20} MiB (one "
                   "record is one read page's answer at most)")
@click.option("--batch", default=BATCH_RECORDS, show_default=True,
              type=click.IntRange(min=1),
              help="records per partition in one L0 object; a signal stops it at once, "
                   "the batch in flight abandoned; "
                   f"one batch's bodies (records x --size x partitions) at most "
                   f"{MAX_BATCH_BYTES >> 20} MiB")
@click.option("--epoch", type=int, default=None, help="override the stamp (tests)")
def produce(data_dir: str, partitions: tuple[str, ...], count: int, size: int, batch: int,
            epoch: int | None) -> None:
    """Produce `count` verifiable records to each partition, `--batch` records per
    partition in each L0 object (one object when count <= batch).

    Records are deterministic and checksummed (impl/cluster/payload.py); every acknowledged
    batch is appended to DATA_DIR/acked.jsonl, which `consume --verify` checks byte for
    byte (tried first: one it cannot append to is refused, 64, nothing sent).
    SIGINT/SIGTERM stop it at once, within one record's build (the batch in flight is
    abandoned, not acknowledged) and it says how many records were acknowledged."""
    from epochgc.impl.broker.producer import ProduceError, check_epoch
    from epochgc.impl.cluster.manifest import unappendable

    partitions = tuple(partition_names(partitions, "--partition"))  # before any connection
    check_batch_bytes(batch, count, size, len(partitions))
    if epoch is not None:
        try:
            check_epoch(epoch)
        except ProduceError as e:  # a bad argument (64), newuser8 I7: it exited 1
            raise click.UsageError(f"--epoch: {e}") from e
    lc = LocalCluster(data_dir)
    lc.client_addrs()  # no cluster under DATA_DIR: refused (64) before anything else
    # Before anything is sent (newuser18 U2): a record the command cannot append is a
    # path of the operator's it cannot write, refused as `gc --list` refuses one (64).
    why = unappendable(lc.dir)
    if why is not None:
        raise Refused(f"{why}; nothing was sent (every acknowledged batch is recorded "
                      "there)", ExitCode.USAGE)
    name = f"cli-{uuid.uuid4().hex[:12]}"  # a fresh producer id: its seqs start at 0
    rng = random.Random()
    recorded = _Tally()  # records acknowledged and recorded in the manifest
    try:
        # Inside: a signal while the store's modules import (boto3: the slow part of the
        # start) is said as the others are (newuser13 Q9: only "interrupted by SIGTERM").
        _require_store_modules(lc, "produce")
        checkpoint("start")
        # One batch per event loop: between batches the command is in plain Python, where
        # the first SIGINT/SIGTERM raises at once (impl/signals.py), so no new batch is
        # built or uploaded after it. One batch of 500,000 records took seconds to build
        # in the loop, deaf to the signal (issue 41: 6-8 s to exit after SIGINT).
        last: list[str] = []
        for first in range(0, count, batch):
            n = min(batch, count - first)
            recorded.begun = True
            last = signals.run(_produce_batch(lc, partitions, name, first, n, size, epoch,
                                              rng, recorded, first + n >= count))
            checkpoint("acked")  # the signal tests' point: between batches
    except KeyboardInterrupt as e:
        # Said on the one interrupted line (newuser15 S5: "produce interrupted: ..." then
        # a bare "epochgc produce: interrupted by SIGINT").
        sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
        raise signals.Interrupted(
            sig.signum, _acked_words(recorded, count, partitions, lc)) from None
    except _NotAcked as e:
        # newuser12 P13: the same account as a signal's, after the cluster's own words.
        raise click.ClickException(
            f"{e}; {_acked_words(recorded, count, partitions, lc)}") from e
    except _Unrecorded as e:  # acknowledged, not recorded: said so, not "not acknowledged"
        raise click.ClickException(
            f"{e}; {_acked_words(recorded, count, partitions, lc, in_flight=False)}") from e
    except (ConnectionError, OSError) as e:
        # newuser16 S6: the cluster stopped mid-run ("no node of the cluster answered")
        # said nothing of the batches acknowledged before it.
        raise click.ClickException(
            f"{errorline.os_error(e)}; {_acked_words(recorded, count, partitions, lc)}"
        ) from e
    # The last batch's lines are the run's end, written under `finishing` (newuser22 Y4:
    # a signal right after "5 of 5" acknowledged ended a done run 130, and a script that
    # retries on it sent the records twice).
    with signals.finishing(0):
        for text in last:
            click.echo(text)


class _Unrecorded(Exception):
    """A batch the cluster acknowledged whose records could not be appended to the manifest
    (newuser16 S6: a full file system said only "File too large")."""


class _NotAcked(Exception):
    """A batch the cluster did not acknowledge after every attempt (`NotAcknowledgedError`,
    or the store refused its object): what was done is said where the totals are known."""


def _acked_words(recorded: _Tally, count: int, partitions: tuple[str, ...],
                 lc: LocalCluster, in_flight: bool = True) -> str:
    """How much was acknowledged in all, and what the batch in flight may be.
    newuser11 M4: a batch in flight may have been applied by the cluster before its
    acknowledgement was lost (then it is read back, and its object is in use); "its object
    is garbage" was only true if it was not."""
    if not recorded.begun:  # newuser13 Q9: before the first batch, nothing to account for
        return (f"nothing was sent: none of {count * len(partitions):,} record(s) "
                "acknowledged")
    said = (f"{recorded.records:,} of {count * len(partitions):,} record(s) acknowledged "
            f"and recorded in {lc.dir / 'acked.jsonl'}")
    if not in_flight:  # the batch in flight is said by the line's own words
        return said + " before it"
    said += "; "
    if recorded.building is not None:  # stopped before its object was made: nothing sent
        return said + (f"the batch in flight was being built ({recorded.building}): "
                       "nothing of it was sent")
    return said + ("the batch in flight, if any, was not acknowledged: it may have been "
                   "applied (then it is read back); if not, its object is garbage GC "
                   "collects")


def _done(recorded: _Tally, lc: LocalCluster) -> None:
    """What a failed stdout write's line says was done (newuser11 M9: a re-run after a bare
    "cannot write to stdout" produced the acknowledged records again)."""
    closedout.done(f"{recorded.records:,} record(s) were acknowledged "
                   f"({lc.dir / 'acked.jsonl'})")


def _said(warning: str | None) -> None:
    if warning is not None:
        stderr_line(f"epochgc produce: {warning}")


def check_batch_bytes(batch: int, count: int, size: int, partitions: int) -> None:
    """Refuse (64) a batch whose record bodies exceed MAX_BATCH_BYTES: one batch is what
    `produce` holds in memory (a batch of `count` records when count < batch)."""
    batch_bytes = min(batch, count) * size * partitions
    if batch_bytes > MAX_BATCH_BYTES:
        raise click.UsageError(
            f"one batch would hold {batch_bytes:,} bytes of record bodies (--batch {batch} "
            f"x --size {size} x {partitions} partition(s)), over {MAX_BATCH_BYTES:,}: "
            "give a smaller --batch")


@dataclass
class _Tally:
    """Records acknowledged so far: one number, not one per batch (a billion batches of one
    record would otherwise hold a billion numbers)."""

    records: int = 0
    begun: bool = False  # a batch was sent (or began to be)
    building: str | None = None  # the batch in flight is being built: how far


async def _produce_batch(lc: LocalCluster, partitions: tuple[str, ...], name: str, first: int,
                         n: int, size: int, epoch: int | None, rng: random.Random,
                         recorded: _Tally, last: bool) -> list[str]:
    """Records first..first+n-1 of each partition in one L0 object; the acknowledged ones
    are appended to the manifest at once, before anything else is awaited (a signal then
    cannot leave acknowledged records out of it), and their number to `recorded`. Their
    lines are written here, or returned if the batch is the `last` (written by the caller
    under `signals.finishing`)."""
    from epochgc.impl.broker.producer import (
        Ack,
        NotAcknowledgedError,
        PartitionDeletedError,
        ProduceError,
        Producer,
        UnknownPartitionError,
    )
    from epochgc.impl.broker.raftport import thread_io
    from epochgc.impl.cluster.manifest import append_manifest
    from epochgc.impl.cluster.payload import AckedRun, make_record

    def stored(_key: str, phase: str) -> None:
        if phase == "stored":
            checkpoint("work")  # the signal tests' point: uploaded, not yet acknowledged

    access = ProcClusterAccess(lc.client_addrs(), hint=lc.down_hint(), say=stderr_line)
    store = open_store(lc.meta["store"], lc.meta.get("s3_endpoint"))
    prod = Producer(access, store, thread_io, rng)
    prod.on_attempt = stored
    prod.say = stderr_line  # a batch unacknowledged for 10 s is said (newuser12 P13)

    def record(acks: dict[str, Ack]) -> None:
        """Append what was acknowledged to the manifest (it is what was acked) and count it."""
        runs = [AckedRun(a.partition, a.base, a.count, name, first, size, a.epoch, a.key)
                for a in acks.values()]
        try:
            _said(append_manifest(lc.dir, runs))
        except OSError as e:
            where = ", ".join(f"{r.partition} offsets {r.base:,}..{r.base + r.count - 1:,}"
                              for r in runs)
            raise _Unrecorded(
                f"the cluster acknowledged {sum(r.count for r in runs):,} record(s) of the "
                f"batch in flight ({where}; producer {name}, seqs from {first:,}) but they "
                f"could not be recorded in {lc.dir / 'acked.jsonl'}: "
                f"{e.strerror or e}") from e
        recorded.records += sum(r.count for r in runs)
        _done(recorded, lc)

    async def build() -> dict[str, list[bytes]]:
        """The batch's records, the loop given a turn after each (newuser16 S13: a batch of
        16 MiB records was built in one go, deaf to SIGINT/SIGTERM: a record costs ~0.4 s
        at the largest size, so a signal is acted on within one record's build)."""
        batch: dict[str, list[bytes]] = {}
        for p in partitions:
            recs = batch.setdefault(p, [])
            for i in range(n):
                recorded.building = f"{i:,} of {n:,} record(s) of {p} built"
                recs.append(make_record(name, p, first + i, size))
                recorded.building = f"{i + 1:,} of {n:,} record(s) of {p} built"
                checkpoint("built")  # the signal tests' point: a record built, not sent
                await asyncio.sleep(0)  # where a signal's cancel lands
        recorded.building = None
        return batch

    try:
        try:
            acks = await prod.produce(await build(), epoch)
        except PartitionDeletedError as e:
            record(e.acks)  # what the other partitions acknowledged is kept
            raise _NotAcked(str(e)) from e  # with the count so far (newuser16 S6)
        except UnknownPartitionError as e:
            raise Refused(f"--partition: {e}", ExitCode.USAGE) from e
        except NotAcknowledgedError as e:
            record(e.acks)  # what the other partitions acknowledged is kept
            raise _NotAcked(str(e)) from e
        except ProduceError as e:
            raise _NotAcked(str(e)) from e
        record(acks)  # only after every ack: the manifest is what was acked
        lines = [json.dumps({"partition": a.partition, "base": a.base, "count": a.count,
                             "epoch": a.epoch, "key": a.key, "producer": name})
                 for a in acks.values()]
        if not last:
            for text in lines:
                click.echo(text)
    finally:
        await access.close()
    # The signal tests' point: the task is past its last await (`close` awaits nothing
    # that yields), where a signal the event loop had to dispatch was lost (newuser5 G5).
    checkpoint("batch-end")
    return lines if last else []


@click.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.option("--partition", "partitions", multiple=True, required=True)
@click.option("--verify", is_flag=True,
              help="dense offsets, every record's checksum, and every acknowledged record "
                   "(DATA_DIR/acked.jsonl) present with exactly its produced bytes")
def consume(data_dir: str, partitions: tuple[str, ...], verify: bool) -> None:
    """Read every record of the partitions (L1 below LRO, L0 above)."""
    from epochgc.impl.cluster.manifest import ManifestError, read_manifest
    from epochgc.impl.cluster.payload import AckedRun, PayloadError, check_record, compare

    closedout.output_is_work()  # its output is what it was asked for

    partitions = tuple(partition_names(partitions, "--partition"))  # before any connection
    lc = LocalCluster(data_dir)
    runs: list[AckedRun] = []
    if verify:  # read before any connection: a damaged record is refused at once
        try:
            manifest = read_manifest(lc.dir)
        except ManifestError as e:  # newuser10 L8: FILE:LINE and what, bad input data
            raise Refused(str(e), ExitCode.DATAERR) from None
        for warning in manifest.warnings:
            stderr_line(f"epochgc consume: {warning}")
        runs = manifest.runs

    # The last partition's line is written once the connections are closed and the result
    # decided, under `finishing` (newuser20 W3: a signal right after it ended the complete
    # run by the signal, "interrupted ...: nothing was written yet").
    held: list[str] = []
    written: list[str] = []  # the partitions whose line is out, for a signal's line

    def line(p: str, text: str) -> None:
        if p == partitions[-1]:
            held.append(text)
            # review41b B4: a signal while the connections close ends the run with this
            # line unwritten; it was read.
            before = (f"the line(s) of {len(written)} partition(s) were written "
                      f"({', '.join(written)}); " if written else "")
            signals.doing(f"{before}partition {p} was read, its line not written")
            signals.checkpoint("closing")
        else:
            click.echo(text)
            written.append(p)
            # Said if a signal ends the run now (s30a: it said "nothing was written yet"
            # after the lines of earlier partitions were written).
            signals.doing(f"the line(s) of {len(written)} partition(s) were written "
                          f"({', '.join(written)}); the partitions after them were not read")
            signals.checkpoint("line")

    async def go() -> list[str]:
        problems: list[str] = []
        access = ProcClusterAccess(lc.client_addrs(), hint=lc.down_hint(), say=stderr_line)
        try:
            meta = await access.any_call(op="meta")
            for p in partitions:
                if p not in meta["partitions"] and p in meta.get("deleted", []):
                    # The deletion's revision, as `topic delete` printed it (newuser18's notes:
                    # the controller's current revision, 620 for a deletion at 615, was said).
                    at = (meta.get("deletions") or {}).get(p)
                    when = (f"at controller revision {at}" if at is not None else
                            f"before controller revision {meta.get('revision')}")
                    raise click.ClickException(f"partition {p!r} was deleted {when}: nothing "
                                               "to read")
                if p not in meta["partitions"]:
                    # A bad name is a usage error, as `produce` answers it (newuser5 G7:
                    # produce gave 64, consume 1).
                    raise Refused(f"--partition: partition {p!r} is unknown to the cluster "
                                  f"(controller revision {meta.get('revision')}): nothing "
                                  "to read", ExitCode.USAGE)
                crev = int(meta["partitions"][p]["revision"])
                recs = await access.read_partition(p)
                out: dict[str, object] = {"partition": p, "records": len(recs)}
                if verify:
                    if [o for o, _ in recs] != list(range(len(recs))):
                        problems.append(f"{p}: offsets are not dense")
                    for o, data in recs:
                        try:
                            check_record(data, p)
                        except PayloadError as e:
                            problems.append(f"{p}@{o}: {e}")
                    # Runs of an earlier, deleted incarnation of the name were deleted with it
                    # (R33): their epochs are below this incarnation's creation revision.
                    mine = [r for r in runs if r.partition == p and r.epoch >= crev]
                    problems += compare(mine, {p: dict(recs)})
                    out["acked_checked"] = sum(r.count for r in mine)
                line(p, json.dumps(out))
        finally:
            await access.close()
        return problems

    # signals.run: a signal cancels the task, and the connections close on the way out
    # (newuser20 W7: a SIGHUP raised inside a loop callback of a plain asyncio.run was
    # swallowed there, and consume waited on an open connection for good).
    problems = signals.run(go())
    with signals.finishing(1 if problems else 0):
        for text in held:
            click.echo(text)
        for text in problems[:20]:
            click.echo(f"verify: {text}", err=True)
    if problems:  # its line is the group's, the exit code decided above
        raise click.ClickException(f"verification failed: {len(problems)} problem(s)")
