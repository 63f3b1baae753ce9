"""`epochgc gc-admin show|pause|start|reset --store URL`: GC operations on a store (issue 30).

- `show`: the cluster's M and each partition's GC epoch M(p), the safety monitor's verdict,
  paused or not, the lease holder, and the last round's record (`--json` for one object).
- `pause [--reason TEXT]`: new rounds refuse (exit 3); a running round stops at its next
  delete batch (its driver polls the state), its record saying `interrupted: paused`.
- `start`: resumes.
- `reset [--force]`: removes the GC lease only (see `admin.reset_gc_state`); refused while a
  round holds a live lease unless `--force`.
- `advance-epoch --data-dir D --partition P`: break glass on a running local cluster: the
  partition's leader writes `advance_epoch(its cached cluster epoch)` now; refused where it
  cannot help (`impl/broker/breakglass.py`: the leader's cache lags the partition's epochs).

Every command first checks the location is an epochgc store (`_cluster/partitions.json`):
a mistyped path is refused before anything is written. Exit 0 done, 1 refused or failed.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click
from epochgc.impl.gc.admin import (
    MAX_REASON_BYTES,
    LeaseState,
    ResetRefused,
    load_strict,
    read_admin_state,
    read_lease,
    reset_gc_state,
    write_admin_state,
)
from epochgc.impl.gc.errors import GcError, ReportError
from epochgc.impl.gc.job import DEFAULT_MAX_REPORT_AGE_S, check_is_store
from epochgc.impl.gc.lease import LEASE_KEY
from epochgc.impl.gc.monitor import check_health
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.reports import read_cluster_view
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.url import open_store
from epochgc.model.cluster import partition_epochs

_MAX_RECORD = 1 << 20  # bytes of a round record `show` reads
_STORE = click.option("--store", required=True, help="store URL or directory")
_ENDPOINT = click.option("--s3-endpoint", default=None, help="S3-compatible endpoint")


def _open(store: str, s3_endpoint: str | None) -> ObjectStore:
    try:
        s = open_store(store, s3_endpoint)
        check_is_store(s)
    except (StoreError, GcError) as e:
        raise click.ClickException(str(e)) from None
    return s


@click.group("gc-admin")
def gc_admin() -> None:
    """Pause, start, reset and show the GC state of a store."""


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--reason", default="",
              help="recorded with the pause and shown in refusals; at most "
                   f"{MAX_REASON_BYTES} bytes as JSON (a longer one is cut, marked [cut])")
def pause(store: str, s3_endpoint: str | None, reason: str) -> None:
    """Pause GC: new rounds refuse, running ones stop at their next delete batch."""
    s = _open(store, s3_endpoint)
    try:
        state = write_admin_state(s, True, reason, time.time())
    finally:
        s.close()
    click.echo(f"gc-admin: paused ({state.reason or 'no reason given'})")


@gc_admin.command()
@_STORE
@_ENDPOINT
def start(store: str, s3_endpoint: str | None) -> None:
    """Resume GC after a pause."""
    s = _open(store, s3_endpoint)
    try:
        write_admin_state(s, False, "", time.time())
    finally:
        s.close()
    click.echo("gc-admin: running")


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--force", is_flag=True,
              help="remove the lease even while it is live (its holder is known dead)")
def reset(store: str, s3_endpoint: str | None, force: bool) -> None:
    """Remove the GC lease (and nothing else: pause state, records and journals stay)."""
    s = _open(store, s3_endpoint)
    try:
        removed = reset_gc_state(s, time.time(), force)
    except ResetRefused as e:
        raise click.ClickException(str(e)) from None
    finally:
        s.close()
    click.echo("gc-admin: reset: " + (", ".join(f"removed {k}" for k in removed)
                                      or "nothing to remove"))


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--max-report-age", default=DEFAULT_MAX_REPORT_AGE_S, show_default=True,
              type=click.FloatRange(min=0, min_open=True), help="seconds, as `epochgc gc`")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def show(store: str, s3_endpoint: str | None, max_report_age: float, as_json: bool) -> None:
    """M and per-partition GC epochs, health, paused or not, lease, last round."""
    s = _open(store, s3_endpoint)
    try:
        doc = gc_state(s, time.time(), max_report_age)
    finally:
        s.close()
    if as_json:
        # Strict JSON (RFC 8259): whatever the store holds was read strictly (load_strict).
        click.echo(json.dumps(doc, sort_keys=True, allow_nan=False))
        return
    click.echo(f"M: {doc['M']}" + (f" (blocked: {doc['blocked']})" if doc["blocked"] else ""))
    for p, e in doc["partition_epochs"].items():
        click.echo(f"  {p}: M(p)={e}")
    h = doc["health"]
    click.echo(f"health: {h['state']}" + ("".join(f"\n  {r}" for r in h["reasons"])))
    click.echo("paused: " + (doc["paused_reason"] if doc["paused"] else "no"))
    click.echo("lease: " + _lease_line(doc["lease"]))
    last = doc["last_round"]
    click.echo("last round: " + ("none" if last is None else
                                 f"{last.get('key')}: {last.get('outcome')}, M={last.get('M')}, "
                                 f"deleted={(last.get('counts') or {}).get('deleted')}"))


def gc_state(store: ObjectStore, now: float, max_report_age_s: float) -> dict[str, Any]:
    """What `show` prints: every part read independently, a part that cannot be read says
    why instead of failing the rest."""
    doc: dict[str, Any] = {"M": None, "blocked": None, "partition_epochs": {}}
    try:
        view = read_cluster_view(store, now, max_report_age_s)
        decision = view.gc_epoch()
        doc["M"], doc["blocked"] = decision.M, decision.blocked
        doc["partition_epochs"] = partition_epochs(list(view.partitions), view.counted())
    except (ReportError, StoreError) as e:
        doc["blocked"] = f"the reports cannot be read: {e}"
    doc["health"] = check_health(store, now, max_report_age_s).as_dict()
    state = read_admin_state(store)
    doc["paused"], doc["paused_reason"] = state.paused, state.why() if state.paused else None
    doc["lease"] = read_lease(store, now).as_dict()
    doc["last_round"] = _last_round(store)
    return doc


def _lease_line(lease: dict[str, Any]) -> str:
    state = LeaseState(lease["state"])
    if state is LeaseState.ABSENT:
        return "none"
    if state in (LeaseState.LIVE, LeaseState.EXPIRED):
        return f"{state.value}, held by {lease['holder']}"
    what = "is not a regular object" if state is LeaseState.NOT_AN_OBJECT else "cannot be read"
    return f"{LEASE_KEY} {what}: {lease['problem']} (gc-admin reset --force removes it)"


def _last_round(store: ObjectStore) -> dict[str, Any] | None:
    """The newest round record (their names start with the round's UTC start time)."""
    try:
        keys = sorted(o.key for o in store.list_all(ROUNDS_PREFIX))
        if not keys:
            return None
        rec = load_strict(store.get(keys[-1], 0, _MAX_RECORD + 1), keys[-1], _MAX_RECORD)
    except (StoreError, ValueError) as e:
        return {"error": f"cannot read the round records: {e}"}
    return {"key": keys[-1], **rec} if isinstance(rec, dict) else {"key": keys[-1]}


@gc_admin.command("advance-epoch")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False),
              help="the local cluster's directory (epochgc cluster start --data-dir)")
@click.option("--partition", required=True, help="e.g. t/0")
def advance_epoch(data_dir: str, partition: str) -> None:
    """Break glass: the partition's leader advances it to its cached cluster epoch now.
    Refused (exit 1) where it cannot help: the leader's cached epoch is not above the
    epochs the partition already accepted."""
    import asyncio

    from epochgc.impl.cluster.client import ProcClusterAccess
    from epochgc.impl.cluster.local import LocalCluster

    async def go() -> dict[str, Any]:
        access = ProcClusterAccess(LocalCluster(data_dir).client_addrs())
        try:
            meta = await access.any_call(op="meta")
            leader = ((meta.get("partitions") or {}).get(partition) or {}).get("leader")
            if not leader:
                return {"status": "error", "message": f"no leader known for {partition!r}"}
            return await access.call(int(leader), op="break_glass_advance", partition=partition)
        finally:
            await access.close()

    r = asyncio.run(go())
    if r.get("status") != "ok":
        raise click.ClickException(f"advance-epoch {partition}: {r.get('status')}: "
                                   f"{r.get('message', r)}")
    click.echo(f"gc-admin: {partition} advanced to {r['advanced_to']} (cached cluster epoch "
               f"{r['cached_epoch']}); M(p) now {r['inactive_epoch']}")
