"""`python -m epochgc.proofs.crosshair_run ITERATIONS check ...`: CrossHair's own command
line, each condition bounded by a number of iterations (paths) instead of CPU seconds.

CrossHair's `--per_condition_timeout` is CPU seconds, so how far a search gets depends on
the machine's load. Its analysis options have `max_iterations` (crosshair/options.py,
`AnalysisOptions.max_iterations`, one of the `directive_fields`; crosshair/core.py runs
`for i in range(1, options.max_iterations + 1)` per condition), but its command line does
not read it (`option_set_from_dict` in crosshair/main.py lists the others): this sets it
on the options CrossHair builds from its arguments, then runs CrossHair's `main`.
CrossHair draws its path choices from a fixed seed (crosshair/statespace.py,
`random.Random(1801243388510242075)`), so the same iterations explore the same paths on a
quiet or a loaded machine. (crosshair-tool 0.0.113, the installed package.)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import crosshair.main as crosshair_main
from crosshair.options import AnalysisOptionSet, option_set_from_dict


def main(argv: list[str]) -> None:
    if len(argv) < 2 or not argv[0].isdigit() or int(argv[0]) < 1:
        raise SystemExit("usage: python -m epochgc.proofs.crosshair_run ITERATIONS "
                         "check [crosshair's arguments]; ITERATIONS >= 1")
    iterations = int(argv[0])

    def with_iterations(source: Mapping[str, object]) -> AnalysisOptionSet:
        options = option_set_from_dict(source)
        options.max_iterations = iterations
        return options

    # crosshair.main calls the name it imported from crosshair.options: replace it there.
    setattr(crosshair_main, "option_set_from_dict", with_iterations)  # noqa: B010
    crosshair_main.main(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
