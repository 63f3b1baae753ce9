"""A step of a conformance program and its line on the port's stdin: what replaying the
shipped vectors needs, without Hypothesis (the `conform` extra: only generated programs use
it; newuser9 K8: `conform --vectors` in the base install exited 69). A step is a dict (one
JSON object) or a str (a raw line, for input that is not a JSON object)."""

from __future__ import annotations

import json
from typing import Any

Step = dict[str, Any] | str


def line(step: Step) -> str:
    return step if isinstance(step, str) else json.dumps(step, separators=(",", ":"))
