"""`epochgc topic create NAME --partitions N` and `epochgc topic delete NAME` against the
running cluster (DATA_DIR/cluster.json). The controller leader checks the request against
its partition table before proposing anything: an unknown topic, an existing one or an
ill-formed name is one line naming it on stderr, exit 1, nothing changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from epochgc.impl import closedout, errorline, pathopt, signals
from epochgc.impl.cluster import asked
from epochgc.impl.cluster.client import ProcClusterAccess, stderr_line
from epochgc.impl.cluster.errors import NoCluster
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.controller.topics import TopicError, check_topic_name, topic_names
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.preflight import Refused
from epochgc.impl.shortlist import short_list

# Answers after which a create's outcome is known: done, or refused before anything was
# proposed (`TopicError` is an `error` answer: a bad name, a topic that exists; a node not
# the controller's leader). Any other (no answer, the connection lost, a proposal failed
# mid-way) may leave part of it: `asked.py` keeps its count for `cluster status`.
SEEN = frozenset({"ok", "error", "not_leader"})


@click.group()
def topic() -> None:
    """Create and delete topics on a running cluster."""


def _name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        return check_topic_name(value)
    except TopicError as e:
        raise click.BadParameter(str(e)) from e


def _call(data_dir: str, **req: Any) -> dict[str, Any]:
    lc = LocalCluster(data_dir)
    # A directory with no cluster is a bad argument (64), as for every command that takes
    # --data-dir (s27c: `topic` alone said it otherwise and exited 1).
    if not lc.meta:
        raise NoCluster(f"no cluster under {lc.dir}: start one with `epochgc cluster start`")

    access = ProcClusterAccess(lc.client_addrs(), hint=lc.down_hint(), say=stderr_line)

    async def go() -> dict[str, Any]:
        try:
            return await access.controller_call(**req)
        finally:
            await access.close()

    creating = req["op"] == "create_topic"
    # From here until its outcome is known (newuser15 S3: a signal's line said nothing).
    signals.doing(f"{req['op']} {req['topic']!r} may have been sent to the cluster: `epochgc "
                  f"cluster status --data-dir {data_dir}` shows it")
    # Kept until its outcome is seen: `cluster status` flags a create or a delete cut short.
    # One command per topic at a time (newuser17 T1: a delete run during a create removed
    # the partitions made so far, the create went on, both exit 0; T7: two deletes both
    # printed the same deletions): another live one's entry refuses this one, unsent.
    try:
        asked.begin(data_dir, req["topic"], "create" if creating else "delete",
                    req.get("partitions", 0))
    except asked.Busy as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        # Its ledger cannot be written (newuser25 H6: `run/topics-asked.json.lock:
        # Permission denied`, exit 1, a relative path, not a word of whether it was sent):
        # refused unsent, as `produce` refuses a record it cannot append (64).
        where = Path(e.filename).absolute() if e.filename else lc.dir
        raise Refused(f"{where}: {errorline.os_error(e, with_file=False)}; nothing was sent "
                      f"(a {req['op']} is noted there until its outcome is seen)",
                      ExitCode.USAGE) from None
    try:
        r = signals.run(go())
    except KeyboardInterrupt as e:
        nid = access.change_unanswered
        if nid is None:
            asked.settle(data_dir, req["topic"])  # not sent, or answered
            raise  # not sent, or answered: the group's line says it may have been
        # Said, with where to look (newuser10 L2: only "interrupted by SIGINT", and 12 of
        # 64 partitions left).
        sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
        undo = _undo(req, data_dir)
        # Not "in full": the node proposes one controller entry per partition, and a node
        # stopped in between leaves part of them, never resumed (newuser11 M11).
        raise signals.Interrupted(sig.signum, (
            f"{req['op']} {req['topic']!r} had been sent to node {nid}, not answered: it "
            f"may have been applied, in whole or in part (a node stopped before it ends "
            f"leaves part of it; `epochgc cluster status --data-dir {data_dir}` shows the "
            f"cluster and flags {_left(req)}{undo})")) from None
    if r.get("status") == "no_answer":
        # Sent, never answered (in time, or its connection lost: newuser17 T2 said "no node
        # of the cluster answered ... is it running?"), not sent again (newuser9 K9): what
        # it did is not known, so it is said in the signal path's words, with what the
        # cluster now shows. Its ledger entry stays: `cluster status` flags what is left.
        raise click.ClickException(
            f"{req['op']} {req['topic']!r} had been sent to node {r['node']}, not answered "
            f"({r['reason']}): it may have been applied, in whole or in part "
            f"({_now_holds(lc, req['topic'])}); `epochgc cluster status --data-dir "
            f"{data_dir}` shows the cluster and flags {_left(req)}{_undo(req, data_dir)}")
    if r.get("status") in SEEN:
        # An outcome seen: made or removed whole, or refused before anything was proposed.
        try:
            asked.settle(data_dir, req["topic"])
        except OSError as e:  # the outcome stands: said, never turned into the command's
            stderr_line(f"epochgc topic: warning: {asked.FILE} in {data_dir} could not be "
                        f"updated ({e}); `cluster status` may flag {req['topic']!r}")
    if r.get("status") != "ok":
        raise click.ClickException(f"{req['op']} {req['topic']!r} refused: "
                                   f"{r.get('message', r.get('status'))}")
    return r


def _left(req: dict[str, Any]) -> str:
    """What `cluster status` flags of a create or a delete cut short."""
    return ("a topic short of its partitions" if req["op"] == "create_topic"
            else "partitions a delete left")


def _undo(req: dict[str, Any], data_dir: str) -> str:
    """The way on after a create or delete whose outcome is not known."""
    verb = "removes it" if req["op"] == "create_topic" else "again removes what is left"
    return f"; `epochgc topic delete {req['topic']} --data-dir {data_dir}` {verb}"


def _now_holds(lc: LocalCluster, topic: str) -> str:
    """How many partitions of `topic` exist now, as the first node that answers sees them,
    in words (one look; its own failure said too: the line is about an unknown outcome
    already)."""
    async def go() -> dict[str, Any]:
        access = ProcClusterAccess(lc.client_addrs(), say=stderr_line)
        try:
            return await access.controller_call(op="meta")
        finally:
            await access.close()

    try:
        meta = signals.run(go())
    except (OSError, ConnectionError) as e:
        return f"the cluster could not be asked: {e}"
    if meta.get("status") != "ok":
        return f"the cluster could not be asked: {meta.get('message', meta.get('status'))}"
    names = topic_names(meta["partitions"], topic)
    # "at least": a node stopping as it was asked may still commit one more (newuser26 J3:
    # 62 said, 63 after the restart).
    return (f"a node shows at least {len(names):,} partition(s) of {topic!r}"
            + (f": {short_list(names)}" if names else ""))


@topic.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.option("--partitions", type=click.IntRange(1, 1024), required=True)
@click.argument("name", callback=_name)
def create(data_dir: str, partitions: int, name: str) -> None:
    """Create topic NAME with partitions NAME/0 .. NAME/N-1 (an existing topic is refused)."""
    r = _call(data_dir, op="create_topic", topic=name, partitions=partitions)
    closedout.done(f"topic {name} was created")  # newuser11 M9: said if stdout fails
    with signals.finishing(0):  # then its output: a signal no longer changes the code (W3)
        for p, rev in r["partitions"].items():
            click.echo(json.dumps({"partition": p, "creation_revision": rev}))


@topic.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.argument("name", callback=_name)
def delete(data_dir: str, name: str) -> None:
    """Delete every partition of topic NAME (an unknown topic is refused)."""
    r = _call(data_dir, op="delete_topic", topic=name)
    closedout.done(f"topic {name} was deleted")  # newuser11 M9: said if stdout fails
    with signals.finishing(0):  # then its output: a signal no longer changes the code (W3)
        for p, rev in r["partitions"].items():
            click.echo(json.dumps({"partition": p, "deletion_revision": rev}))
