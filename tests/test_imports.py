"""Every `epochgc.*` import in the checkout names a file a static reader finds by path.

mypy, an editor's go-to-definition and a reader opening `epochgc/` follow an import only
through the file system: `epochgc.impl.gc.reports` must be `epochgc/impl/gc/reports.py` (or
a package's `__init__.py`) under the checkout, links followed, with no code run. This parses
every module of the checkout (no import), resolves each `import epochgc...`, `from epochgc...
import name` (a submodule or a name the module binds at its top level) and each lazily
imported `"epochgc.x.y:attr"` / `import_module("epochgc.x")` string the same way, and names
every one that does not resolve. `tests.*` and `benchmarks.*` imports are checked alike.
An import of a shipped folder by its own name (`import model`) is refused: it would load a
second copy of a module that is already `epochgc.model`.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ("epochgc", "tests", "benchmarks")  # top-level import names resolved in the tree
SHIPPED = ("model", "impl", "proofs", "experiments", "spec")  # only as `epochgc.X`
SKIP_DIRS = {"build", "node_modules", "__pycache__"}
# A string that names a module the code imports lazily: SUBCOMMANDS' "module:attribute".
LAZY = re.compile(r"epochgc(?:\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")


@dataclass(frozen=True)
class Unresolved:
    where: str  # path:line
    what: str  # the import as written
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}: {self.why}"


def sources(root: Path) -> list[Path]:
    """The checkout's own .py files, each once: links are not walked (epochgc/model is
    model/), hidden folders (.git, .tox), virtualenvs and build output are left out."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):  # followlinks=False
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not (d.startswith(".") and d != ".ci")
                             and not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg")))
        out += [Path(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    return out


def module_file(root: Path, module: str) -> Path | None:
    """The file `module` is under `root` (links followed, the target still inside `root`)."""
    base = root.joinpath(*module.split("."))
    real_root = root.resolve()
    for cand in (base.parent / (base.name + ".py"), base / "__init__.py"):
        if cand.is_file():
            real = cand.resolve()
            return real if real.is_relative_to(real_root) else None
    return None


def top_level_names(tree: ast.Module) -> set[str] | None:
    """Names a module binds outside its functions and classes; None: any name may be bound
    (`from x import *`, a module `__getattr__`)."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        else:  # if / try / with / for at module level: their bodies bind at the top too
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, ()):
                    todo += child.body if isinstance(child, ast.ExceptHandler) else [child]
    return names


class Resolver:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._names: dict[Path, set[str] | None] = {}

    def names(self, f: Path) -> set[str] | None:
        if f not in self._names:
            self._names[f] = top_level_names(ast.parse(f.read_bytes(), str(f)))
        return self._names[f]

    def module(self, module: str) -> str | None:
        """Why `module` does not resolve; None when it does."""
        if module_file(self.root, module) is not None:
            return None
        rel = "/".join(module.split("."))
        return f"no {rel}.py or {rel}/__init__.py under the checkout"

    def name_in(self, module: str, name: str) -> str | None:
        """Why `from module import name` does not resolve; None when it does."""
        if (why := self.module(module)) is not None:
            return why
        if module_file(self.root, f"{module}.{name}") is not None:
            return None
        f = module_file(self.root, module)
        assert f is not None
        bound = self.names(f)
        if bound is None or name in bound:
            return None
        return f"{module} has no submodule {name} and binds no name {name} at its top level"


def own_name(module: str) -> str:
    return f"a shipped folder by its own name (a second copy of epochgc.{module})"


def check(root: Path) -> list[Unresolved]:
    r = Resolver(root)
    out: list[Unresolved] = []
    for f in sources(root):
        rel = f.relative_to(root).as_posix()
        try:
            tree = ast.parse(f.read_bytes(), rel)
        except SyntaxError as e:
            out.append(Unresolved(f"{rel}:{e.lineno}", "(the module)", f"does not parse: {e}"))
            continue
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    if top in SHIPPED:
                        out.append(Unresolved(where, f"import {a.name}", own_name(a.name)))
                    elif top in LOCAL and (why := r.module(a.name)):
                        out.append(Unresolved(where, f"import {a.name}", why))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top = node.module.split(".")[0]
                what = f"from {node.module} import {', '.join(a.name for a in node.names)}"
                if top in SHIPPED:
                    out.append(Unresolved(where, what, own_name(node.module)))
                elif top in LOCAL:
                    for a in node.names:
                        if a.name != "*" and (why := r.name_in(node.module, a.name)):
                            out.append(Unresolved(where, what, why))
            elif isinstance(node, ast.ImportFrom):  # relative: from its package's folder
                pkg = f.parent
                for _ in range(node.level - 1):
                    pkg = pkg.parent
                base = ".".join(pkg.relative_to(root).parts)
                module = base + (f".{node.module}" if node.module else "")
                for a in node.names:
                    if a.name != "*" and (why := r.name_in(module, a.name)):
                        out.append(Unresolved(where, f"from {'.' * node.level}"
                                              f"{node.module or ''} import {a.name}", why))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if LAZY.fullmatch(node.value):
                    module, attr = node.value.split(":")
                    if why := r.name_in(module, attr):
                        out.append(Unresolved(where, repr(node.value), why))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
                  and (node.func.attr if isinstance(node.func, ast.Attribute)
                       else node.func.id) == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)
                  and node.args[0].value.split(".")[0] in LOCAL
                  and (why := r.module(node.args[0].value))):
                out.append(Unresolved(where, f"import_module({node.args[0].value!r})", why))
    return sorted(out, key=lambda p: (p.where.rsplit(":", 1)[0], int(p.where.rsplit(":", 1)[1])))


def test_every_epochgc_import_resolves_to_a_file_of_the_checkout() -> None:
    problems = check(ROOT)
    assert not problems, "\n".join(map(str, problems))


def test_the_check_sees_each_kind_of_unresolved_import(tmp_path: Path) -> None:
    """The check's boundary: a tree seeded with one of each defect names each, and only
    those (a check that passes everything would pass the real tree too)."""
    root = tmp_path / "checkout"
    (root / "epochgc").mkdir(parents=True)
    (root / "epochgc" / "__init__.py").write_text("")
    (root / "model").mkdir()
    (root / "model" / "__init__.py").write_text("")
    (root / "model" / "keys.py").write_text(
        "from __future__ import annotations\nKEY = 1\n\ndef parse() -> None: ...\n")
    (root / "epochgc" / "model").symlink_to("../model", target_is_directory=True)
    outside = tmp_path / "outside"
    (outside / "impl").mkdir(parents=True)
    (outside / "impl" / "__init__.py").write_text("")
    (root / "epochgc" / "impl").symlink_to(outside / "impl", target_is_directory=True)
    (root / "tests").mkdir()
    (root / "tests" / "use.py").write_text("\n".join([
        "import epochgc.model.keys",  # fine
        "from epochgc.model.keys import KEY, parse",  # fine
        "from epochgc.model import keys",  # fine: a submodule
        "import epochgc.model.nope",  # 4: no such file
        "from epochgc.model.keys import missing",  # 5: no such name
        "import epochgc.impl",  # 6: the link leaves the checkout
        "import model.keys",  # 7: the folder by its own name
        "CMD = 'epochgc.model.keys:gone'",  # 8: a lazy import's attribute
        "import importlib; importlib.import_module('epochgc.model.absent')",  # 9
    ]) + "\n")
    # The seeded tree's own outside/ folder is a stand-in for a place outside the checkout.
    got = [(p.where, p.what) for p in check(root)]
    assert got == [
        ("tests/use.py:4", "import epochgc.model.nope"),
        ("tests/use.py:5", "from epochgc.model.keys import missing"),
        ("tests/use.py:6", "import epochgc.impl"),
        ("tests/use.py:7", "import model.keys"),
        ("tests/use.py:8", "'epochgc.model.keys:gone'"),
        ("tests/use.py:9", "import_module('epochgc.model.absent')"),
    ], got
