"""`epochgc-model-port`: the model's port (`model/port.py`) as a command of its own, so a
`pipx install epochgc` (which puts only the package's commands on PATH, not its Python)
runs `epochgc conform --vectors -- epochgc-model-port` (newuser9 K10).

SIGINT is made quiet before the port's imports, as `python -m epochgc.model.port` does at
its top: a terminal's Ctrl-C during `epochgc conform` must not print a traceback from the
port while it imports (newuser6 H2)."""

from __future__ import annotations

import signal


def main() -> None:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    from epochgc.model.port import main as serve

    serve()
