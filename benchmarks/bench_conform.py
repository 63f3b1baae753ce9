"""`epochgc conform` throughput: protocol steps per second (each step: the port's answer,
the model's answer, the comparison), over the same fixed programs, against

- the model in process behind the protocol's JSON encoding (the baseline: no pipe),
- the model adapter `python -m epochgc.model.port` in a subprocess (the pipe),
- the Node port `node ports/node/cli.js serve`, when `node` and the port are present.

Generation and shrinking are not timed (Hypothesis's cost, the same for every port). Writes
build/bench-conform.json in the benchmark row format.

    python benchmarks/bench_conform.py [--programs N] [--quick] [--node-port cli.js]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = 2000.0  # steps/s through the pipe (issue 15)


class InProcess:
    """The model as a port without the pipe: the same lines, encoded and decoded."""

    def __init__(self) -> None:
        from epochgc.model.port import Session

        self._session = Session()
        self._lines: list[str] = []

    def send(self, line: str) -> None:
        self.send_many([line])

    def send_many(self, lines: list[str]) -> None:
        self._lines.extend(lines)

    def receive(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(json.dumps(self._session.handle(self._lines.pop(0))))
        return out

    def close(self) -> None:
        pass


def fixed_programs(n: int) -> list[list[Any]]:
    """The first n programs the derandomized generator draws (the same every run)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from epochgc.impl.conform.programs import programs

    out: list[list[Any]] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
    @given(programs("reference", 30))
    def collect(p: list[Any]) -> None:
        out.append(p)

    collect()
    return out


def measure(port: Any, progs: list[list[Any]]) -> tuple[int, float]:
    from epochgc.impl.conform.driver import run_program

    steps = 0
    t = time.perf_counter()
    for p in progs:
        run = run_program(port, "reference", p)
        assert not run.failed, f"{port}: disagreement in a benchmark program"
        steps += len(run.outcomes)  # the reset is a protocol line too
    return steps, time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="100 programs")
    ap.add_argument("--node-port", default=str(ROOT / "ports" / "node" / "cli.js"))
    ap.add_argument("--out", default=str(ROOT / "build" / "bench-conform.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.programs = 100
    sys.path.insert(0, str(ROOT))
    from epochgc.impl.conform.client import PortProcess

    progs = fixed_programs(args.programs)
    base_steps, base_secs = measure(InProcess(), progs)
    base = base_steps / base_secs
    rows = [{"name": "conform_steps_per_s_in_process", "value": round(base, 1),
             "unit": "steps/s", "baseline": None, "ratio": None, "target": None,
             "better": "higher"}]
    ports = {"model_pipe": [sys.executable, "-m", "epochgc.model.port"]}
    node = shutil.which("node")
    if node is None:
        print("bench_conform: node port skipped: `node` is not installed", file=sys.stderr)
    elif not Path(args.node_port).exists():
        print(f"bench_conform: node port skipped: {args.node_port} not found", file=sys.stderr)
    else:
        ports["node_pipe"] = [node, args.node_port, "serve"]
    for name, argv_ in ports.items():
        with PortProcess(argv_, cwd=str(ROOT), timeout=30) as port:
            port.ask('{"op":"reset","variant":"reference"}')  # start-up is not throughput
            steps, secs = measure(port, progs)
        rate = steps / secs
        rows.append({"name": f"conform_steps_per_s_{name}", "value": round(rate, 1),
                     "unit": "steps/s", "baseline": round(base, 1),
                     "ratio": round(rate / base, 3), "target": TARGET, "target_of": "value",
                     "better": "higher"})
    for r in rows:
        print(json.dumps(r))
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
