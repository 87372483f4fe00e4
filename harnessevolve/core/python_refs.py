"""References to Python code in task files: ``"module:Class.method"`` or ``"module:function"``.

Tasks name the Python code of their tools and checks this way. That code is the benchmark's, and
it only ever runs inside the sandbox; here it is located and checked **without importing it**:
the module's file is looked up on the search path (the benchmark's ``python_path`` first, then
this interpreter's ``sys.path``) and its source parsed with ``ast`` to see that the attribute is a
top-level class, function or assignment (and, for ``Class.method``, a method of that class). So a
typo in a task file is a load-time error, and no benchmark code runs in harnessevolve's process.

A module found only as a compiled extension or a namespace package cannot be parsed; its
attributes are then checked inside the sandbox, when the code is first used.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harnessevolve.core.errors import BenchmarkError

_REF = re.compile(
    r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$"
)


@dataclass(frozen=True)
class PythonRef:
    """A parsed reference: ``module``, ``attribute`` and, for ``Class.method``, ``method``."""

    module: str
    attribute: str
    method: str = ""

    @property
    def owner(self) -> str:
        """``module:Class`` for a method (the object its calls share), else the reference itself."""
        return f"{self.module}:{self.attribute}"

    def __str__(self) -> str:
        return self.owner + (f".{self.method}" if self.method else "")


def parse_ref(text: str, *, file: str, field: str) -> PythonRef:
    """``"pkg.mod:Class.method"`` -> ``PythonRef``; anything else is a ``BenchmarkError``."""
    found = _REF.match(text.strip()) if isinstance(text, str) else None
    if not found:
        raise BenchmarkError(
            f"{text!r} is not a Python reference",
            file=file,
            field=field,
            hint="write module:function or module:Class.method (e.g. my_tools:Cart.add_item)",
        )
    return PythonRef(found.group(1), found.group(2), found.group(3) or "")


def parse_attr_ref(text: str, *, file: str | None, field: str, form: str) -> PythonRef:
    """A ``module:attr`` reference that must not name a method; ``form`` says what to write."""
    ref = parse_ref(text, file=file or text, field=field)
    if ref.method:
        raise BenchmarkError(
            f"{text.strip()!r} names a method; it must be {form}",
            file=file,
            field=field,
            hint=f"write {form}",
        )
    return ref


def module_file(module: str, search: tuple[str, ...]) -> Path | None:
    """The ``.py`` file (or package ``__init__.py``) of ``module`` on ``search`` then ``sys.path``;
    a compiled module yields its file too (not parseable); None when nothing is found."""
    parts = module.split(".")
    for root in (*search, *sys.path):
        if not root:
            continue
        base = Path(root).joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        if base.parent.is_dir():
            compiled = sorted(base.parent.glob(f"{parts[-1]}.*.so"))
            if compiled:
                return compiled[0]
    return None


@lru_cache(maxsize=256)
def _top_level(path: Path, mtime: float) -> dict[str, tuple[str, frozenset[str]]]:
    """Top-level names of a source file: name -> (kind, method names for a class)."""
    tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
    names: dict[str, tuple[str, frozenset[str]]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods = frozenset(
                n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            )
            # A class with bases may inherit the method: only its own body can be checked then.
            names[node.name] = ("class" if not node.bases else "subclass", methods)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = ("function", frozenset())
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.ImportFrom | ast.Import):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Name):
                    names[target.id] = ("value", frozenset())
            if isinstance(node, ast.ImportFrom | ast.Import):
                for alias in node.names:
                    names[(alias.asname or alias.name).split(".")[0]] = ("value", frozenset())
    return names


def check_ref(ref: PythonRef, search: tuple[str, ...], *, file: str, field: str) -> Path | None:
    """Raise ``BenchmarkError`` when ``ref``'s module or attribute does not exist (see the module
    docstring for what can be checked); returns the module's file when it was found."""
    where = ", ".join(search) if search else "the benchmark folder"
    path = module_file(ref.module, search)
    if path is None:
        raise BenchmarkError(
            f"Python module {ref.module!r} not found",
            file=file,
            field=field,
            hint=f"put {ref.module.replace('.', '/')}.py in {where} (python_path in benchmark.yaml), "
            "or install the package that provides it",
        )
    if path.suffix != ".py":
        return path
    try:
        names = _top_level(path, path.stat().st_mtime)
    except (SyntaxError, OSError, ValueError) as exc:
        raise BenchmarkError(
            f"cannot read module {ref.module!r} ({path}): {exc}", file=file, field=field
        ) from None
    if ref.attribute not in names:
        raise BenchmarkError(
            f"module {ref.module!r} has no {ref.attribute!r}",
            file=file,
            field=field,
            hint=f"top-level names in {path}: {', '.join(sorted(names)[:12]) or 'none'}",
        )
    kind, methods = names[ref.attribute]
    if ref.method and kind == "class" and ref.method not in methods:
        raise BenchmarkError(
            f"class {ref.attribute!r} of {ref.module!r} has no method {ref.method!r}",
            file=file,
            field=field,
            hint=f"its methods: {', '.join(sorted(m for m in methods if not m.startswith('__'))[:12])}",
        )
    if ref.method and kind == "function":
        raise BenchmarkError(
            f"{ref.attribute!r} of {ref.module!r} is a function, not a class",
            file=file,
            field=field,
            hint=f"write {ref.module}:{ref.attribute}",
        )
    return path
