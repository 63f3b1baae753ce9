"""epochgc: windowed epoch fencing and epoch-based GC of L0 objects.

Everything is imported under this one name: `epochgc.model` (the pure model),
`epochgc.impl` (the implementation), `epochgc.proofs`, `epochgc.experiments`, and the
spec with its vectors as package data (`epochgc.data_path("spec", "vectors")`).

In a wheel those are subpackages of this folder. In a git checkout they stay in the
repository's top-level folders (`model/`, `impl/`, ...), and this package's path is
extended to the repository root, so the checkout imports the same names without an
install (the mutation runners test copies of the tree that way).
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_PARENT = os.path.dirname(_HERE)

# A checkout (or a copy of its folders): the subpackages are not in this folder but beside
# it. Installed, they are in this folder, so a foreign top-level `model` is never picked up.
_CHECKOUT = not os.path.isdir(os.path.join(_HERE, "model")) and os.path.isdir(
    os.path.join(_PARENT, "model"))
if _CHECKOUT:
    __path__.append(_PARENT)

# The sys.path entry from which `import epochgc` works: child processes (nodes, Spark
# workers) get it as PYTHONPATH.
IMPORT_ROOT = _PARENT


def data_path(*parts: str) -> str:
    """A shipped data file or folder (`spec/...`): inside the package when installed, at
    the repository root in a checkout."""
    return os.path.join(_PARENT if _CHECKOUT else _HERE, *parts)
