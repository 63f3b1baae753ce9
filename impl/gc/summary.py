"""The result of one GC round, its exit code and its one-line/JSON renderings."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field

from epochgc.impl.gc.text import GONE_WHERE, GONE_WHERE_SHORT, printable
from epochgc.impl.shortlist import short_tail

EXIT_OK = 0
EXIT_INCOMPLETE = 1  # malformed keys, delete errors, refused deletes, or a failed round
EXIT_BLOCKED = 2
EXIT_PAUSED = 3  # GC paused on the store by an operator (`epochgc gc-admin pause`), issue 30
EXIT_USAGE = 64  # bad arguments (BSD EX_USAGE), distinct from a blocked round
# A round stopped by a signal exits as a shell reports a process killed by it (128 + n);
# one stopped by its --deadline is incomplete.
# A round stopped mid-way by a pause exits as a paused round; one stopped by the safety
# monitor as a blocked one (issue 30), unless it then failed (an error: incomplete).
SIGNAL_NAMES = ("SIGINT", "SIGTERM", "SIGHUP")  # a stop's reasons that are signals
EXIT_INTERRUPTED = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129,
                    "paused": EXIT_PAUSED, "unhealthy": EXIT_BLOCKED}
# A round whose driver ended without writing its record (issue 38 item 1: killed, its host
# lost, or it failed where it could not reach the store) is recorded afterwards by whoever
# finds its journal unfinished: outcome `driver-gone`, exit code unknown (None in the
# record). Nothing can tell how its driver ended (newuser13 Q3: one that exited 1 on a
# store gone was recorded `killed`, 137, what a shell reports for SIGKILL); records
# written before say `killed`, 137.
OUTCOME_DRIVER_GONE = "driver-gone"
# The stop reason of a round whose Spark ended under it (newuser13 Q11: `stage.py`).
SPARK_STOPPED = "spark-stopped"

# Every value of `GcSummary.outcome`.
OUTCOMES = ("done", "dry-run", "nothing-collectible", "blocked", "refused", "incomplete",
            "error", "interrupted", "paused", OUTCOME_DRIVER_GONE)

# The keys of `--json`, exactly as the issue specifies them.
JSON_KEYS = (
    "M",
    "blocked",
    "listed",
    "eligible",
    "deleted",
    "skipped_too_new",
    "skipped_too_young",
    "malformed",
    "errors",
    "seconds",
    # Issue 12: what the round refused to list (links, special files), how it ended, the
    # deletion record and manifest it wrote, and the error that ended it, if any.
    "refused_entries",
    "outcome",
    "record",
    "manifest",
    "error",
    # Issue 29.
    "already_gone",
    "changed",
    "journal",
    "interrupted",
    # Issue 30: why a paused store refused the round, the safety monitor's verdict.
    "paused",
    "health",
    # Issue 41 item 3: False when the round stopped before every task returned its listing
    # counts; `listed` and `eligible` are then lower bounds (at least what the journal
    # proves was listed and eligible).
    "listing_complete",
    # Issue 38 (review rev38q findings 1, 2 and 5): keys whose deletion the store could not
    # tell, even at the read-back, and journal entries the read-back could not read; while
    # either is above 0, `deleted` is a lower bound ("at least N deleted").
    "unknown",
    "journal_unreadable",
    # Review rev38v finding 3: keys of batches no answer says the round deleted (an
    # attempt killed mid-group; or an ambiguous answer, rev38x finding 1) found absent:
    # they left the store, by the round's requests or another writer's; not counted in
    # `deleted` (what answers said).
    "gone_unattributed",
    # i41y: the command's exit code, as `gc-admin --json` gives it on failure (one shape:
    # `outcome`, `error`, `exit_code`).
    "exit_code",
    # newuser14 R1: the signal the command ends by (128 + its number is `exit_code`), also
    # when another stop (`interrupted`: unhealthy, deadline, paused) came first; else null.
    "signal",
    # review41a R5: why the round's own record could not be written (null: written, or
    # none to write); the exit code is then 1 and `record` null.
    "record_error",
)


class Refusal(enum.Enum):
    """Why a round was turned away before it began (its record's `refusal`)."""

    PAUSED = "paused"  # an operator paused GC on the store (gc-admin pause)
    LEASE = "lease"  # the store's GC lease could not be taken (another round holds it)


@dataclass
class GcSummary:
    M: int | None = None
    blocked: str | None = None
    listed: int = 0
    eligible: int = 0
    deleted: int = 0
    skipped_too_new: int = 0
    skipped_too_young: int = 0
    malformed: int = 0
    errors: int = 0
    seconds: float = 0.0
    # Beyond the JSON summary: for metrics, messages and tests.
    revision: int | None = None
    dry_run: bool = False
    fetched: int = 0
    list_requests: int = 0
    delete_requests: int = 0
    eligible_bytes: int = 0
    bytes_deleted: int = 0
    refused: str | None = None  # why the delete phase did not run, when it should have
    # Why the round failed although it deleted what was safe (malformed keys, refused
    # entries: never deleted, R21a).
    failed_check: str | None = None
    malformed_keys: list[str] = field(default_factory=list)  # a sample
    error_samples: list[str] = field(default_factory=list)
    stale_nodes: list[str] = field(default_factory=list)
    list_seconds: float = 0.0
    delete_seconds: float = 0.0
    started_at: float = 0.0  # wall clock (the injected one) when the round started
    refused_entries: int = 0  # entries under the data prefix the store would not list
    refused_samples: list[str] = field(default_factory=list)
    reports_used: list[dict[str, object]] = field(default_factory=list)
    manifest: str | None = None  # set only once the manifest is completely written
    record: str | None = None  # the deletion record's key in the store
    record_error: str | None = None
    # The record not written: what records the round later and frees its lease (the last
    # line of a failed round says it too: newuser13 Q2).
    record_advice: str | None = None
    error: str | None = None  # the error that ended the round (exit 1)
    # Issue 29: the round's id (its record and journal are named by it), where its
    # deletion journal is, keys found already gone or rewritten (counted apart from
    # `deleted`), and the signal (or "deadline") that stopped it early.
    round_id: str = ""
    journal: str | None = None
    already_gone: int = 0
    changed: int = 0
    interrupted: str | None = None
    would_delete: list[str] | None = None  # a dry run's keys, for `--list -` (stdout)
    listed_to: str | None = None  # the file a dry run's `--list` wrote
    # Issue 30: the store's GC is paused (the refusal, naming who paused it and why); the
    # safety monitor's verdict ({"state", "reasons"}; None before it ran); whether a
    # safety check (the monitor or the model's missing reports) blocked the round; the
    # minimum over partitions of their GC epoch M(p) and the highest epoch deleted.
    paused: str | None = None
    health: dict[str, object] | None = None
    safety_blocked: bool = False
    min_partition_epoch: int | None = None
    max_deleted_epoch: int | None = None
    backpressure_s: float = 0.0  # the tasks' waits for a free delete slot, summed
    # Issue 38 item 2: journal entries the read-back could not read (`deleted` is then a
    # lower bound), and whether the journal could be read back at all (False: the round's
    # deletions are unknown, never "none").
    unreadable_entries: int = 0
    journal_read: bool = True
    # Review rev38q findings 1 and 5: keys whose delete may have been applied and whose
    # state the store could not tell, even at the read-back: not errors ("listed again next
    # round" is not known), not deleted; `deleted` is a lower bound while this is above 0.
    unknown: int = 0
    # Review rev38v finding 3: keys (and their bytes) that left the store while the round
    # ran, found absent in batches with no answer saying the round deleted them (none
    # recorded, or ambiguous: review rev38x finding 1): by the round's requests or another
    # writer's, not known which; apart from `deleted` and
    # `bytes_deleted` (what the round's answered requests removed), and not an error.
    gone_unattributed: int = 0
    bytes_gone_unattributed: int = 0
    # Issue 38 item 6: the round's number in the store's sequence of records
    # (`sequence.py`); None until its record claims one (or if the store cannot).
    seq: int | None = None
    # Review rev38z10 finding 5: when its claim failed, the highest number the store had
    # handed out (`record.number_round`): what places the record among the numbered ones.
    seq_after: int | None = None
    # Issue 38 item 1: a round whose driver died, recorded afterwards from its journal:
    # who recorded it (the next round, `gc-admin show`, `gc-admin reset`) and when; and the
    # dead rounds this round recorded before it started.
    recovered_by: str | None = None
    recovered_at: float | None = None
    recovered: list[str] = field(default_factory=list)
    # Issue 41 item 3: see JSON_KEYS.
    listing_complete: bool = True
    # Issue 41 F5: what turned the round away before it began (nothing listed, nothing
    # deleted): a refusal, recorded, but not a round that ran (`show`'s last round and
    # `expire --keep-last` count only rounds that ran).
    refusal: Refusal | None = None
    # A dry run on a paused store (it runs, exit 0): the pause, said on stderr at the end.
    paused_note: str | None = None
    # A dry run on a versioned bucket (it runs, exit 0): a real round would be refused.
    versioned_note: str | None = None
    # Issue 41 (newuser8 I10): interrupted before the round wrote anything to the store (no
    # lease, no START, no record); not in JSON_KEYS: `interrupted` with `record: null`.
    unstarted: bool = False
    # newuser10 L10: the conditional-write probe's object, if a probe cut short may have
    # left it (its PUT sent, its delete not answered); the next probe removes it.
    probe_left: str | None = None
    # newuser12 P11: refused because another live round holds the lease (`lease.LeaseBusy`):
    # blocked, retry later (exit 2), not failed; not in JSON_KEYS (`exit_code` says it).
    lease_busy: bool = False
    # Under spark-submit, Spark ended under the round (`SPARK_STOPPED`: its JVM gone,
    # SIGKILLed or ended on its own): the command's exit code is spark-submit's, which the
    # JVM gives and this driver cannot see (SIGKILL: 137); its record says unknown, as a
    # `driver-gone` one does, not the driver's own 1 (issue 41, s27a). Not in JSON_KEYS.
    exit_unseen: bool = False
    # newuser14 R1: the first signal that came after a stop of another kind (the safety
    # monitor's, the deadline's, a pause's), before the exit code was decided: the command
    # ends by it (`exit_code` 128 + its number); `interrupted` keeps the stop's reason.
    signal_after_stop: str | None = None

    @property
    def outcome(self) -> str:
        if self.recovered_by is not None:
            return OUTCOME_DRIVER_GONE
        if self.interrupted is not None:
            return "interrupted"
        if self.paused is not None:
            return "paused"
        if self.error is not None:
            return "error"
        if self.blocked is not None:
            return "blocked"
        if self.refused is not None:
            return "refused"
        if (self.errors or self.failed_check is not None or self.unreadable_entries
                or self.unknown):
            return "incomplete"
        if self.M is None:
            return "nothing-collectible"
        return "dry-run" if self.dry_run else "done"

    @property
    def recorded_exit_code(self) -> int | None:
        """The exit code its record says: None for a round recorded after its driver
        ended (`recovered_by`), or whose command's exit is not this driver's to see
        (`exit_unseen`): how that process ended is not known."""
        return None if self.recovered_by is not None or self.exit_unseen else self.exit_code

    @property
    def signal(self) -> str | None:
        """The signal the command ends by (impl/entry.py), its exit code 128 + its number:
        the first signal after a stop of another kind (`signal_after_stop`), or the one
        that stopped the round; None if none did."""
        if self.signal_after_stop is not None:
            return self.signal_after_stop
        return self.interrupted if self.interrupted in SIGNAL_NAMES else None

    @property
    def exit_code(self) -> int:
        """This process's exit code for the round (a recovered round's record says
        `recorded_exit_code`, not this)."""
        by = self.signal
        if by is not None:  # the first signal decides, whatever stopped the round first
            return EXIT_INTERRUPTED[by]
        if self.record_error is not None:
            # newuser18 U3: a round whose record the store did not take is incomplete (1):
            # not 2 or 3 ("retry later"; a retry on a store that takes no write never
            # records), nor 0. Known only once the record was tried (`job._write_record`),
            # so the record itself never says 1 for this; a signal still decides above.
            return EXIT_INCOMPLETE
        if self.interrupted == "unhealthy" and self.error is not None:
            # newuser12 P15: the monitor stopped the round because the store went away,
            # and the round then failed with deletes sent and no record: the table's 1
            # ("an incomplete round"), not 2 ("blocked ... retry later": a scheduler would
            # retry a round whose deletes are not known).
            return EXIT_INCOMPLETE
        if self.interrupted is not None:
            return EXIT_INTERRUPTED.get(self.interrupted, EXIT_INCOMPLETE)
        if self.paused is not None:
            return EXIT_PAUSED
        if self.error is not None:
            return EXIT_BLOCKED if self.lease_busy else EXIT_INCOMPLETE
        if self.blocked is not None:
            return EXIT_BLOCKED
        if (self.refused is not None or self.errors or self.failed_check is not None
                or self.unreadable_entries or self.unknown):
            return EXIT_INCOMPLETE
        return EXIT_OK

    @property
    def journal_unreadable(self) -> int:
        """`unreadable_entries` under the record's name for it."""
        return self.unreadable_entries

    def to_json(self) -> str:
        return json.dumps({k: getattr(self, k) for k in JSON_KEYS})

    def done_words(self) -> str:
        """What the round did, in words, for the line of a stdout that failed after it
        (`closedout.done`; newuser14 R3: `gc --json > /dev/full` said only "cannot write to
        stdout", exit 1, after a round that deleted 100 keys and recorded `done`: read as
        "nothing happened", the operator re-runs it or misses what it did). Its outcome,
        the keys it deleted and its record's name, as its summary line and record say."""
        if self.dry_run:  # a dry run deletes nothing and writes nothing (issue 29)
            return f"the dry run ended {self.outcome}: nothing deleted, nothing written"
        if self.journal is not None and not self.journal_read:
            deleted = (f"which keys were deleted is not known (journal {self.journal}, "
                       "which names every key a delete was sent for)")
        elif self.deleted or self.unreadable_entries or self.unknown:
            at_least = "at least " if self.unreadable_entries or self.unknown else ""
            deleted = f"{at_least}{self.deleted:,} key(s) deleted"
        else:
            deleted = "nothing deleted"
        if self.gone_unattributed:
            deleted += f", {self.gone_unattributed:,} more left the store {GONE_WHERE_SHORT}"
        if self.record is not None:
            record = f"record {self.record}"
        elif self.record_error is not None:  # its warning line said why
            record = "its record was not written" + (
                f": {self.record_advice}" if self.record_advice else "")
        else:
            record = "no record written"
        return f"the round ended {self.outcome}: {deleted}; {record}"

    def gone_lines(self) -> list[str]:
        """`gone_unattributed`, said apart from `deleted` (none when it is 0)."""
        if not self.gone_unattributed:
            return []
        return [f"gc: {self.gone_unattributed:,} key(s) left the store {GONE_WHERE}: by "
                "this round's requests or another writer's, not known which; not counted in "
                f"deleted (journal {self.journal})"]

    def lines(self) -> list[str]:
        """The human summary; `gone_lines` after its first line (an interrupted or failed
        round, whose early lines end there, is where attempts are killed mid-group)."""
        out = self._lines()
        return [*out[:1], *self.gone_lines(), *out[1:]]

    def _none_deleted(self) -> str:
        """"nothing deleted", unless keys left the store unattributed (said on the next
        line): then only what answers say (review rev38x finding 3)."""
        if self.gone_unattributed:
            return "no key deleted by the round's answered requests"
        return "nothing deleted"

    def _lines(self) -> list[str]:
        out = self._round_lines()
        if self.interrupted == "paused" and self.paused is not None and out:
            # newuser11 M10: a round a pause stopped says who paused it, why and how to
            # resume, as the refusal of a new round does (escaped: from the store, K6).
            out[0] = f"{out[0]}: {printable(self.paused)}"
        if self.record_error is not None:
            # On every path, the last line (newuser18 U3: a blocked, paused or interrupted
            # round's lines ended at their first, and its record's failure went unsaid).
            out.append(f"gc: warning: deletion record not written: {self.record_error}"
                       + (f"; {self.record_advice}" if self.record_advice else ""))
        return out

    def _interrupted_line(self) -> str:
        """What an interrupted round did. Stopped by a signal, the documented last line of
        every signalled command, `epochgc gc: interrupted by SIGNAL: WHAT WAS DONE`
        (impl/errorline.py RULE; newuser15 S5: "gc: round interrupted (SIGHUP) after
        deleting ..."); by another stop (paused, deadline, unhealthy), the round's own
        `gc: round interrupted (WHY) ...`."""
        why = self.interrupted
        if why in SIGNAL_NAMES:
            return f"epochgc gc: interrupted by {why}: {self._interrupted_words()}"
        if self.unstarted:
            return f"gc: interrupted ({why}) {self._interrupted_words()}"
        words = self._interrupted_words().removeprefix("the round stopped ")
        return f"gc: round interrupted ({why}) {words}"

    def _interrupted_words(self) -> str:
        if self.unstarted and self.probe_left is not None:
            return ("before the round started: no key deleted; the conditional-write probe's "
                    f"object '{printable(self.probe_left)}' may have been written (harmless: "
                    "outside level_zero/; the next round's probe removes it)")
        if self.unstarted:
            return ("before the round started: nothing was written to the store, no key "
                    "deleted")
        if self.journal is None:  # stopped before its deletion journal began (issue 41)
            return "the round stopped before any delete; nothing was deleted"
        if self.listing_complete:  # stopped once its work was done (newuser8 I1)
            return (f"the round stopped after it had listed everything and deleted "
                    f"{self.deleted:,} key(s) (journal: {self.journal})")
        return (f"the round stopped after deleting {self.deleted:,} key(s); the rest are "
                f"listed again next round (journal: {self.journal})")

    def _round_lines(self) -> list[str]:
        if self.interrupted is not None:
            return [self._interrupted_line()]
        if self.paused is not None:
            # Who paused and why come from the store: escaped as `gc-admin show` does
            # (newuser9 K6: CR, LF, OSC and BEL went raw to the terminal).
            return [f"gc: round refused, nothing deleted: {printable(self.paused)}"]
        if self.error is not None:
            if self.deleted:
                return [f"gc: round failed after deleting {self.deleted:,} key(s) (journal: "
                        f"{self.journal}): {self.error}"]
            return [f"gc: round failed: {self.error}"]
        if self.blocked is not None and not self.deleted:
            return [f"gc: round blocked, {self._none_deleted()}: {short_tail(self.blocked)}"]
        m = "none (nothing collectible)" if self.M is None else str(self.M)
        verb = "would delete" if self.dry_run else "deleted"
        out = [
            f"gc: M={m} listed={self.listed} eligible={self.eligible} {verb}="
            f"{self.eligible if self.dry_run else self.deleted} "
            f"skipped_too_new={self.skipped_too_new} "
            f"skipped_too_young={self.skipped_too_young} malformed={self.malformed} "
            f"errors={self.errors} in {self.seconds:.1f}s"
        ]
        if self.stale_nodes:
            out.append(
                "gc: health reports too old, counted as absent: " + ", ".join(self.stale_nodes)
            )
        # Keys come from the store: escaped (a non-UTF-8 name crashed the output, issue 38).
        out.extend(f"gc: malformed key (never deleted): {printable(k)}"
                   for k in self.malformed_keys)
        out.extend(f"gc: delete error: {printable(e)}" for e in self.error_samples)
        out.extend(
            f"gc: refused entry (never followed, never deleted): {printable(k)}"
            for k in self.refused_samples
        )
        # Each task re-reads M before its own first delete: one that found the round
        # blocked or M moved back deleted nothing, the others may have deleted before it.
        stopped = (self._none_deleted() if not self.deleted
                   else "the tasks that saw it deleted nothing")
        if self.blocked is not None:
            out.append(f"gc: round blocked, {stopped}: {short_tail(self.blocked)}")
        if self.refused is not None:
            out.append(f"gc: {stopped}: {self.refused}")
        if self.failed_check is not None:
            out.append(f"gc: round incomplete: {self.failed_check}")
        if self.unreadable_entries:
            out.append(f"gc: round incomplete: {self.unreadable_entries} journal entr(ies) "
                       f"unreadable (journal {self.journal}); deleted counts at least the "
                       "keys the rest names")
        if self.unknown:
            out.append(f"gc: round incomplete: {self.unknown} key(s) whose deletion is "
                       f"unknown (the store could not say, even at the read-back; journal "
                       f"{self.journal}); deleted counts at least the keys known gone")
        return out
