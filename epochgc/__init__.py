"""epochgc: windowed epoch fencing and epoch-based GC of L0 objects.

Everything is imported under this one name: `epochgc.model` (the pure model),
`epochgc.impl` (the implementation), `epochgc.proofs`, `epochgc.experiments`, and the
spec with its vectors as package data (`epochgc.data_path("spec", "vectors")`).

In a git checkout those subpackages are relative links in this folder to the repository's
top-level folders (`model -> ../model`, ...), so every `epochgc.X.Y` names a file that a
static reader (mypy, an editor, `tests/test_imports.py`) finds by path. A wheel or an sdist
holds the files themselves in this folder (the build copies through the links).
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))

# The sys.path entry from which `import epochgc` works: child processes (nodes, Spark
# workers) get it as PYTHONPATH.
IMPORT_ROOT = os.path.dirname(_HERE)


def data_path(*parts: str) -> str:
    """A shipped data file or folder (`spec/...`), in this package (in a checkout, through
    the `spec` link)."""
    return os.path.join(_HERE, *parts)
