"""`epochgc barrier --data-dir DIR`: run the epoch barrier (SPEC R36-R38) on a running
cluster on demand.

The controller leader mints with the barrier mint (every broker drops its cached epoch as
it applies it); each partition leader then drains its fence, writes
advance_gc_epoch(candidate) and moves LRLO over command entries. With `--wait S` the
command waits until every partition's leader has applied the candidate, then prints per
partition whether it is still pending (an unreconciled placeholder before the command) or
promoted, and M(p). Exit 0 when every partition applied it, 1 otherwise."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import click

from epochgc.impl import closedout, errorline, pathopt, signals
from epochgc.impl.cluster.client import NoAnswerWithin, ProcClusterAccess, stderr_line
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.cluster.statuspoll import StatusPoll
from epochgc.impl.finite import FiniteFloat
from epochgc.impl.signals import checkpoint


def barrier_rows(nodes: dict[int, Any], candidate: int) -> dict[str, dict[str, Any]]:
    """Per partition, as its leader reports it: the applied barrier epoch, the promoted
    safe epoch, M(p), and `state`: "promoted" (the promoted epoch is the candidate or
    above), "pending" (applied, not yet promoted) or "missing" (not applied, or no leader
    answered)."""
    out: dict[str, dict[str, Any]] = {}
    for n, st in sorted(nodes.items()):
        if st is None:
            continue
        for p, s in st["partitions"].items():
            if s["leader"] != n and p in out:
                continue
            b, g = s.get("barrier_epoch"), s.get("gc_safe_epoch")
            state = ("promoted" if g is not None and g >= candidate else
                     "pending" if b is not None and b >= candidate else "missing")
            row = {"barrier_epoch": b, "gc_safe_epoch": g, "inactive_epoch": s["inactive_epoch"],
                   "state": state, "leader": s["leader"] == n}
            if row["leader"] or p not in out:
                out[p] = row
    return out


# The bound on the barrier's own request, all its nodes and attempts together: a node "waits
# up to 30 s" (docs/operations.md), and so does the whole ask now. Each attempt had its own
# 30 s, the client tried again through ~50 rounds: `barrier --wait 5` ran 10 min 12 s with
# the controller leader alive and its mint not committing (newuser21 X9). It starts once
# the leader search is over (every node asked at once, QUICK_S + a connect's 2 s at most:
# review41c C2, the search spent it). The command ends within QUICK_S + 2 s + ASK_S +
# max(--wait, QUICK_S) (+ a connect's 2 s per node).
ASK_S = 30.0

# A line on stderr this often while the command waits (as `gc`'s progress: newuser11 M12,
# 11 s of silence on 1,032 partitions).
LINE_EVERY_S = 10.0


@dataclass
class BarrierProgress:
    """What the command has done so far, for its progress lines and for the line a signal
    ends it with: asked for the barrier (`asked`), the candidate once the controller
    answered, and the partitions that applied it as of the last answer."""

    began: float
    asked: bool = False
    candidate: int | None = None
    applied: int = 0
    partitions: int = 0
    said_at: float | None = None

    def seen(self, rows: dict[str, dict[str, Any]]) -> None:
        self.applied = sum(x["state"] != "missing" for x in rows.values())
        self.partitions = len(rows)

    def line(self, now: float) -> str | None:
        """The progress line due at `now` (every `LINE_EVERY_S`), if any."""
        if self.candidate is None or now - (self.said_at or self.began) < LINE_EVERY_S:
            return None
        self.said_at = now
        return (f"epochgc barrier: candidate {self.candidate}: {self.applied:,} of "
                f"{self.partitions:,} partition(s) applied it ({now - self.began:.0f} s)")

    def interrupted(self) -> str:
        """What was done, for the interrupted line."""
        if not self.asked:
            # newuser14 R8: only "interrupted by SIGINT", started or not unsaid
            return "the barrier was not started (nothing was asked of the controller)"
        if self.candidate is None:
            return ("the barrier had been asked of the controller, not answered: it may "
                    "have started (`epochgc cluster status` shows the partitions)")
        return (f"the barrier had started (candidate {self.candidate}: every broker drops "
                f"its cached epoch as it applies it); {self.applied:,} of "
                f"{self.partitions:,} partition(s) had applied it, the others do on their "
                "leaders' own barrier rounds (`epochgc cluster status` shows them)")


async def _run(lc: LocalCluster, wait: float, done: BarrierProgress
               ) -> tuple[int, dict[str, dict[str, Any]], list[int]]:
    """The candidate, the rows once every partition applied it (or at `--wait`), and the
    nodes with no answer in them. The nodes are asked at once, each again as soon as it
    answers: a frozen node's read bound is its own, not the wait's (newuser10 L1). `done`:
    what it did so far, and a line every `LINE_EVERY_S` while it waits."""
    access = ProcClusterAccess(lc.client_addrs(), hint=lc.down_hint(), say=stderr_line)
    try:
        done.asked = True
        try:
            r = await access.controller_call(op="barrier", within_s=ASK_S)
        except NoAnswerWithin as e:
            raise click.ClickException(
                f"{e}; " + ("the barrier may have started (a node was sent it and did not "
                            "answer): `epochgc cluster status --json` shows the "
                            "controller's barrier_candidate" if e.sent
                            else "the barrier was not started")) from None
        if r["status"] != "ok":
            # In words, not the answer's repr: "failed" is a proposal whose leader lost
            # its place before it applied (`ProposalFailed`), fate unknown.
            said = str(r.get("message") or r.get("reason") or "")
            raise click.ClickException(
                f"the barrier's request was answered {r['status']}" + (f": {said}" if said
                                                                        else "")
                + "; the barrier may have started: `epochgc cluster status --json` shows "
                "the controller's barrier_candidate")
        cand = done.candidate = int(r["candidate"])
        checkpoint("barrier-started")  # the signal tests' point
        deadline = time.monotonic() + wait
        async with StatusPoll(access, lc.ids) as poll:
            while True:
                rows = barrier_rows(poll.latest, cand)
                done.seen(rows)
                now = time.monotonic()
                left = deadline - now
                # At the deadline, once every node has answered or failed once (`--wait 0`
                # asks each once): its first request's bound started with the wait's.
                if _applied(rows) or (left <= 0 and poll.each_concluded()):
                    return cand, rows, poll.unanswered()
                line = done.line(now)
                if line is not None:
                    stderr_line(line)
                # Woken for the next line too, though no node answers meanwhile.
                next_line = LINE_EVERY_S - (now - (done.said_at or done.began))
                await poll.next_answer(max(0.0, min(left, next_line)) if left > 0
                                       else next_line)
    finally:
        await access.close()


def _applied(rows: dict[str, dict[str, Any]]) -> bool:
    return bool(rows) and all(x["state"] != "missing" for x in rows.values())


@click.command()
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False))
@click.option("--wait", default=10.0, show_default=True, type=FiniteFloat(0, 3600),
              help="seconds to wait for every partition to apply the candidate (0-3600), "
                   "after the controller answered the barrier's request (at most 12 s to "
                   "find the controller leader, then 30 s); a node that does not answer "
                   "stretches it to its 10 s bound")
@click.option("--json", "as_json", is_flag=True)
def barrier(data_dir: str, wait: float, as_json: bool) -> None:
    """Run the epoch barrier now: invalidate every epoch cache, drain, write
    advance_gc_epoch(candidate) to every partition (SPEC R36-R38)."""
    done = BarrierProgress(time.monotonic())
    try:
        lc = LocalCluster(data_dir)
        cand, rows, unanswered = signals.run(_run(lc, wait, done))
        ok = _applied(rows)
        done.seen(rows)
        # newuser12 P4: a failed stdout write (`> /dev/full`) said only "cannot write to
        # stdout"; the barrier changes every partition, so the line says how far it got, as
        # M9's fix does for pause, produce and topic create/delete. Inside the `try`: a
        # signal until then says how far it got too (newuser15 S3).
        closedout.done(f"the barrier was written (candidate {cand}): {done.applied:,} of "
                       f"{done.partitions:,} partition(s) applied it"
                       + ("" if ok else "; the others do on their leaders' own barrier "
                          "rounds"))
    except KeyboardInterrupt as e:
        sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
        raise signals.Interrupted(sig.signum, done.interrupted()) from None
    # Decided: its output is the run's end, a signal no longer changes the exit code
    # (newuser20 W3: after the table, "interrupted ..." and an end by the signal).
    code = 0 if ok else 1
    with signals.finishing(code):
        if unanswered:
            # Every node holds every partition: the rows are whole without it, said so.
            stderr_line(f"epochgc barrier: no answer from node(s) "
                        f"{', '.join(map(str, unanswered))}; the table is from the nodes "
                        "that answered")
        if as_json:
            click.echo(json.dumps({"candidate": cand, "partitions": rows, "applied": ok,
                                   "unanswered": unanswered}))
        else:
            click.echo(f"barrier candidate: {cand}")
            for p, x in sorted(rows.items()):
                click.echo(f"{p:8} {x['state']:8} barrier={x['barrier_epoch']} "
                           f"safe={x['gc_safe_epoch']} M(p)={x['inactive_epoch']}")
        if not ok:
            # Exit 1 says it on stderr's last line, as every error (newuser25 H4: stderr
            # empty, the table on stdout the only word of it).
            missing = sum(1 for x in rows.values() if x["state"] == "missing")
            stderr_line(errorline.line("barrier", (
                f"{missing:,} of {len(rows):,} partition(s) did not apply candidate {cand} "
                f"within --wait {wait:g} s" if rows else
                f"no node showed its partitions within --wait {wait:g} s, so whether they "
                f"applied candidate {cand} is not known")
                + "; their leaders apply it on their own barrier rounds (`epochgc cluster "
                "status` shows them)"))
        raise SystemExit(code)
