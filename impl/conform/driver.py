"""Run the shipped vectors and generated programs through a port and the model, step by
step, stopping at the first disagreement; generated programs are shrunk by Hypothesis."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochgc import data_path
from epochgc.impl.conform.client import PortProcess, ProtocolFailure
from epochgc.impl.conform.compare import agrees
from epochgc.impl.conform.steps import Step, line
from epochgc.model.port import Session
from epochgc.model.replay import _HEADER, DEFAULT_VARIANT, variant_from_filename

VECTORS_DIR = Path(data_path("spec", "vectors"))  # package data when installed


@dataclass
class Outcome:
    """One line of a program: what was sent and both answers."""

    step: Step
    port: dict[str, Any] | None  # None: the port broke the protocol at this line
    model: dict[str, Any]

    @property
    def agrees(self) -> bool:
        return self.port is not None and agrees(self.port, self.model)


@dataclass
class Run:
    """A program as run: a reset then its steps, up to the first disagreement."""

    variant: str
    steps: list[Step]
    outcomes: list[Outcome] = field(default_factory=list)
    source: str = "generated"
    # Set by `second_run` on the verdict's run only: what running the same program again,
    # one line at a time, gave (None: not run again).
    second: str | None = None

    @property
    def failed(self) -> bool:
        return bool(self.outcomes) and not self.outcomes[-1].agrees


class Disagreement(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(f"{run.source}: disagreement")
        self.run = run


class Broken(BaseException):
    """The port broke the protocol. A BaseException so that Hypothesis does not try to
    shrink it: the port is gone (or cannot be trusted) and every retry would wait."""

    def __init__(self, failure: ProtocolFailure, run: Run) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.run = run


# Lines written before reading their answers: small enough that neither pipe fills (a
# step line and its answer are well under 1 KiB each; a pipe holds 64 KiB).
CHUNK = 32


def run_program(port: PortProcess, variant: str, steps: list[Step], *,
                source: str = "generated") -> Run:
    """Reset, then each step through the port and the model, until they disagree.
    Outcome 0 is the reset (its step is the reset object).

    The lines are written in chunks and the answers read in order, so the port is not
    woken once per step. Every answer echoes its line's sequence number (client.py), so a
    timeout, exit, garbage or a second answer is pinned to its line, and a wrong answer is
    the run's verdict as it stands. (A disagreement was once "confirmed" by running the
    program again one line at a time, from before the answers carried sequence numbers,
    and a right second answer counted as agreement: a port wrong only sometimes passed,
    issue 41 newuser16 S1. That second run now only adds a note: `second_run`.)"""
    return _pipelined(port, variant, steps, source)


def second_run(port: PortProcess, run: Run) -> None:
    """The verdict's program run again, one line at a time: a port that now agrees at that
    step is not deterministic (or answers by how its lines arrive), which is worth saying;
    the first wrong answer stays the verdict whatever the second run gives."""
    step = len(run.outcomes) - 1
    try:
        again = _lockstep(port, run.variant, run.steps[:step], run.source)
    except Broken as b:
        run.second = (f"a second run of the same program broke the protocol at step "
                      f"{len(b.run.outcomes) - 1}: {b.failure.kind}: {b.failure.detail}")
        return
    if not again.failed:
        run.second = (f"a second run of the same program, one line at a time, agreed at "
                      f"every step: the port answered step {step} differently on a second "
                      "run (it is not deterministic)")
    elif len(again.outcomes) != len(run.outcomes):
        run.second = (f"a second run of the same program, one line at a time, disagreed at "
                      f"step {len(again.outcomes) - 1} instead: the port is not "
                      "deterministic")
    elif again.outcomes[-1].port != run.outcomes[-1].port:
        run.second = (f"a second run of the same program, one line at a time, gave another "
                      f"wrong answer at step {step}: {json.dumps(again.outcomes[-1].port)}")
    else:
        run.second = "a second run of the same program, one line at a time, gave the same answer"


def _lines(variant: str, steps: list[Step]) -> list[Step]:
    return [{"op": "reset", "variant": variant}, *steps]


def _pipelined(port: PortProcess, variant: str, steps: list[Step], source: str) -> Run:
    run = Run(variant, steps, source=source)
    model = Session()
    todo = _lines(variant, steps)
    for at in range(0, len(todo), CHUNK):
        chunk = todo[at:at + CHUNK]
        texts = [line(step) for step in chunk]
        try:
            port.send_many(texts)
        except ProtocolFailure as e:
            run.outcomes.append(Outcome(chunk[0], None, model.handle(texts[0])))
            raise Broken(e, run) from None
        for i, (step, text) in enumerate(zip(chunk, texts, strict=True)):
            expected = model.handle(text)  # while the port works
            try:
                answer = port.receive()
            except ProtocolFailure as e:
                run.outcomes.append(Outcome(step, None, expected))
                raise Broken(e, run) from None
            run.outcomes.append(Outcome(step, answer, expected))
            if not run.outcomes[-1].agrees:
                _drain(port, run, len(chunk) - i - 1)
                return run
    return run


def _drain(port: PortProcess, run: Run, pending: int) -> None:
    """Read the answers still owed for a chunk, so the next program starts in step."""
    for _ in range(pending):
        try:
            port.receive()
        except ProtocolFailure as e:
            raise Broken(e, run) from None


def _lockstep(port: PortProcess, variant: str, steps: list[Step], source: str) -> Run:
    run = Run(variant, steps, source=source)
    model = Session()
    for step in _lines(variant, steps):
        text = line(step)
        expected: dict[str, Any] | None = None
        try:
            port.send(text)
            expected = model.handle(text)  # while the port works on the same line
            answer = port.receive()
        except ProtocolFailure as e:
            if expected is None:
                expected = model.handle(text)
            run.outcomes.append(Outcome(step, None, expected))
            raise Broken(e, run) from None
        run.outcomes.append(Outcome(step, answer, expected))
        if not run.outcomes[-1].agrees:
            break
    return run


# -- shipped vectors --------------------------------------------------------------------------


def vector_files(root: Path = VECTORS_DIR) -> list[Path]:
    return sorted(root.rglob("*.jsonl"))


def read_vector(path: Path) -> tuple[str, list[Step]]:
    """The file's variant (header, else file name, else reference) and its steps without
    `expect` (the driver compares with the model itself)."""
    header: str | None = None
    steps: list[Step] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        text = raw.strip()
        if not text or text.startswith("#"):
            m = _HEADER.fullmatch(text)
            if m is not None and header is None:
                header = m.group(1).strip()
            continue
        obj = json.loads(text)
        if isinstance(obj, dict):
            obj.pop("expect", None)
        steps.append(obj)
    return header or variant_from_filename(path) or DEFAULT_VARIANT, steps


@dataclass
class VectorReport:
    passed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # files of variants the port refuses
    steps: int = 0
    failed: Run | None = None


def replay_vectors(port: PortProcess, claimed: str, files: Iterable[Path],
                   report: VectorReport | None = None,
                   on_file: Callable[[VectorReport], None] | None = None) -> VectorReport:
    """`report` (new if None) is filled as the files run: an interrupted caller still
    knows how far it got; `on_file` is called after each file (progress)."""
    report = report if report is not None else VectorReport()
    for path in files:
        variant, steps = read_vector(path)
        run = run_program(port, variant, steps, source=str(path))
        report.steps += len(run.outcomes) - 1
        if run.failed:
            answer = run.outcomes[0].port or {}
            refused_reset = len(run.outcomes) == 1 and "error" in answer
            if refused_reset and variant != claimed:
                report.skipped.append(str(path))
                if on_file is not None:
                    on_file(report)
                continue
            second_run(port, run)
            report.failed = run
            return report
        report.passed.append(str(path))
        if on_file is not None:
            on_file(report)
    return report


# -- generated programs -----------------------------------------------------------------------


@dataclass
class GenReport:
    programs: int = 0  # run, shrinking's re-runs included
    steps: int = 0
    agreed: int = 0  # programs whose every step agreed
    failed: Run | None = None  # the shrunk program
    found: bool = False  # a disagreement was found (then shrunk)
    first: Run | None = None  # the first disagreement found (the verdict if no shrink holds)


def generate(port: PortProcess, variant: str, *, examples: int, seed: int | None,
             max_steps: int, report: GenReport | None = None,
             on_program: Callable[[GenReport], None] | None = None) -> GenReport:
    """`report` (new if None) is filled as programs run: an interrupted caller still knows
    how many agreed; `on_program` is called after each program (progress)."""
    # Hypothesis (the `conform` extra) only here: replaying the vectors works without it.
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.errors import Flaky

    from epochgc.impl.conform.programs import programs

    report = report if report is not None else GenReport()

    # Database-less (nothing written to the user's directory) and derandomized unless a
    # seed is given, so the same command generates the same programs.
    @settings(max_examples=examples, derandomize=seed is None, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
              report_multiple_bugs=False, phases=(Phase.generate, Phase.shrink))
    @given(programs(variant, max_steps))
    def check(steps: list[Step]) -> None:
        run = run_program(port, variant, steps)
        report.programs += 1
        report.steps += len(run.outcomes) - 1
        if run.failed:
            report.found = True
            if report.first is None:
                report.first = run
            raise Disagreement(run)
        report.agreed += 1
        if on_program is not None:
            on_program(report)

    test = check if seed is None else hypothesis_seed(seed)(check)
    try:
        test()
    except Disagreement as d:
        # Hypothesis re-raises the minimal failing example last.
        report.failed = drop_steps(port, d.run)
    except Flaky:
        # Hypothesis re-runs the shrunk example last and says Flaky when it now agrees: a
        # port wrong only sometimes. Its wrong answer is still the verdict (newuser16 S1).
        if report.first is None:
            raise  # not the port's: Hypothesis' own
    if report.failed is None and report.first is not None:
        # Never a pass once a wrong answer was seen, whatever Hypothesis made of it.
        report.failed = report.first
    if report.failed is not None:
        second_run(port, report.failed)
    return report


def drop_steps(port: PortProcess, run: Run) -> Run:
    """Whole steps Hypothesis could not delete, deleted one at a time while the port still
    disagrees. Steps are drawn against the model's state (an epoch near the current window),
    so deleting one step's choices changes what the later choices mean and the choice-level
    shrinker can stop with redundant steps left (an 11-step program of which 5 steps fail,
    under Hypothesis 6.170); at the level of steps, each deletion is a plain re-run."""
    best = run
    i = 0
    while i < len(best.outcomes) - 1:  # outcome k + 1 is step k; the failing one stays last
        steps = best.steps[:len(best.outcomes) - 1]
        candidate = run_program(port, best.variant, steps[:i] + steps[i + 1:],
                                source=best.source)
        if candidate.failed:
            best = candidate
        else:
            i += 1
    return best
