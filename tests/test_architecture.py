"""The package's shape: the four stages never import each other (they meet in pipeline/), and litellm
is only ever imported lazily, inside functions (importing it costs seconds and may touch the network)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import harnessevolve

PACKAGE = Path(harnessevolve.__file__).parent
STAGES = ("execute", "evaluate", "optimize", "gate")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """Absolute names of everything imported anywhere in the module (relative imports resolved)."""
    package = module if is_package else module.rpartition(".")[0]
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            prefix = _resolve(node, package)
            out.append(prefix)
            out += [f"{prefix}.{alias.name}" for alias in node.names]
    return out


def stage_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "harnessevolve" and parts[1] in STAGES else None


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def module_level_imports(tree: ast.Module, package: str = "") -> list[str]:
    """Imports executed when the module is imported: not inside a function or class body, nor under
    ``if TYPE_CHECKING:``. ``from a import b`` gives ``a`` and ``a.b``; relative imports are resolved."""
    out: list[str] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                out.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                prefix = _resolve(node, package)
                out.append(prefix)
                out.extend(f"{prefix}.{alias.name}" for alias in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or _is_type_checking(
                node
            ):
                continue
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    for child in getattr(node, field, None) or []:
                        visit([child] if isinstance(child, ast.stmt) else list(getattr(child, "body", [])))

    visit(tree.body)
    return out


def package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("stage", STAGES)
def test_stages_do_not_import_each_other(stage: str) -> None:
    files = sorted((PACKAGE / stage).rglob("*.py"))
    assert files, f"no modules in harnessevolve/{stage}"
    offending = []
    for path in files:
        module = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name in imported_modules(tree, module, path.name == "__init__.py"):
            other = stage_of(name)
            if other is not None and other != stage:
                offending.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert offending == [], "stages meet only in pipeline/:\n" + "\n".join(offending)


# Modules that import litellm at their top on purpose and say so; the package may only import them lazily.
LAZY_ONLY = {"harnessevolve.models._local_handler"}


def import_graph() -> dict[str, list[str]]:
    """Package module -> what importing it imports at once (package modules and parents, and litellm)."""
    modules = {module_name(p): p for p in package_modules()}
    graph: dict[str, list[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for imported in module_level_imports(ast.parse(path.read_text(encoding="utf-8")), package):
            parts = imported.split(".")
            if parts[0] == "litellm":
                edges.add("litellm")
            edges.update(
                ".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules
            )
        graph[name] = sorted(edges - {name})
    return graph


def litellm_path(graph: dict[str, list[str]], start: str) -> list[str] | None:
    """The chain of module-level imports from ``start`` to litellm, if any."""
    stack, seen = [[start]], {start}
    while stack:
        chain = stack.pop()
        for nxt in graph.get(chain[-1], []):
            if nxt == "litellm":
                return chain + [nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append(chain + [nxt])
    return None


def test_no_module_imports_litellm_at_import_time() -> None:
    graph = import_graph()
    assert "harnessevolve.models.call" in graph and "harnessevolve.models.registry" in graph
    offending = []
    for module in sorted(graph):
        if module in LAZY_ONLY:
            continue
        chain = litellm_path(graph, module)
        if chain is not None:
            offending.append(" -> ".join(chain))
    assert offending == [], "import litellm inside the function that needs it:\n" + "\n".join(offending)


def test_lazy_only_modules_are_few_and_still_exist() -> None:
    graph = import_graph()
    assert set(graph) >= LAZY_ONLY, "a LAZY_ONLY module is gone: drop it from the list"
    assert all(litellm_path(graph, m) is not None for m in LAZY_ONLY), "no longer imports litellm at the top"


# --- the checkers themselves must be able to fail ---------------------------------------------------------


def test_import_resolution_finds_relative_and_absolute_stage_imports() -> None:
    source = (
        "from ..evaluate import alignment\n"
        "from . import tools\n"
        "import harnessevolve.gate.quality as q\n"
        "def f():\n    from harnessevolve.optimize.registry import make_proposer\n"
    )
    names = imported_modules(ast.parse(source), "harnessevolve.execute.agent", is_package=False)
    stages = {stage_of(n) for n in names} - {None}
    assert stages == {"evaluate", "execute", "gate", "optimize"}


def test_module_level_import_finder_sees_guarded_imports_but_not_function_bodies() -> None:
    source = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "try:\n    import litellm\nexcept ImportError:\n    import json\n"
        "if True:\n    from litellm.utils import x\n"
        "if TYPE_CHECKING:\n    from litellm import CustomLLM\n"
        "def lazy():\n    import litellm\n"
        "class C:\n    import json\n"
        "from . import sibling\n"
    )
    assert module_level_imports(ast.parse(source), "harnessevolve.models") == [
        "os",
        "typing",
        "typing.TYPE_CHECKING",
        "litellm",
        "json",
        "litellm.utils",
        "litellm.utils.x",
        "harnessevolve.models",
        "harnessevolve.models.sibling",
    ]


def test_litellm_path_follows_module_level_imports() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["litellm"], "d": ["a", "d2"], "d2": []}
    assert litellm_path(graph, "d") == ["d", "a", "b", "c", "litellm"]
    assert litellm_path(graph, "d2") is None


# --- every package's allowed imports -------------------------------------------------------------------

ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "sandbox": {"core"},  # below the stages: where agent-, optimizer- and checker-written code runs
    "runs": {"core", "models", "sandbox"},  # models: spend.json mirrors the meter; sandbox: stale workspaces
    "harness": {"core"},
    "models": {"core"},
    "adapters": {"core", "harness"},
    "evaluate": {"core", "sandbox", "models"},
    "execute": {"core", "sandbox", "harness", "models"},
    "gate": {"core", "harness", "models"},
    "optimize": {"core", "harness", "models"},
    "synth": {"core", "sandbox", "adapters", "execute"},
    "train": {"core", "execute", "harness", "models", "runs"},
    "report": {"core", "gate", "harness", "runs"},  # never pipeline: the run folder is in runs/
    # The three layers the generation loop drives, each below pipeline/ and above the stages: scoring
    # runs and scores harnesses; judging takes a candidate through its gates (and scores to do so);
    # proposing builds the evidence and runs the optimizer agent (it reads scored results).
    "scoring": {"adapters", "core", "evaluate", "execute", "gate", "harness", "models", "runs", "sandbox"},
    "judging": {
        "core", "evaluate", "execute", "gate", "harness", "models", "optimize", "runs", "sandbox", "scoring",
        "synth",
    },
    "proposing": {"core", "execute", "gate", "harness", "models", "optimize", "runs", "sandbox", "scoring"},
    "pipeline": {
        "adapters", "core", "evaluate", "execute", "gate", "harness", "judging", "models", "optimize",
        "proposing", "report", "runs", "sandbox", "scoring", "synth", "train",
    },
    # arms x seeds x benchmarks: runs (pipeline) and scores (scoring) harnesses, cell by cell
    "compare": {
        "adapters", "core", "gate", "harness", "models", "optimize", "pipeline", "runs", "sandbox", "scoring",
    },
    "cli": {
        "adapters", "compare", "core", "evaluate", "execute", "gate", "harness", "judging", "models",
        "optimize", "pipeline", "proposing", "report", "runs", "sandbox", "scoring", "synth", "train",
    },
    "schemas": set(),
}  # fmt: skip
"""Package -> the package's siblings it may import (anywhere in a module, lazily or not)."""


def package_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "harnessevolve" else None


def forbidden_imports(path: Path) -> list[str]:
    """``path imports name`` for each import of a sibling package its package may not import."""
    module = module_name(path)
    own = package_of(module) or ""
    allowed = ALLOWED.get(own, set())
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for name in imported_modules(tree, module, path.name == "__init__.py"):
        other = package_of(name)
        if other and other != own and other in ALLOWED and other not in allowed:
            out.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    return out


def test_every_package_imports_only_what_it_may() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages <= set(ALLOWED), f"a new package needs its line in ALLOWED: {packages - set(ALLOWED)}"
    offending = [
        line for path in package_modules() if path.parent != PACKAGE for line in forbidden_imports(path)
    ]
    assert offending == [], "imports across packages outside ALLOWED:\n" + "\n".join(sorted(set(offending)))


def test_the_package_rule_catches_report_importing_the_orchestrator(tmp_path: Path, monkeypatch) -> None:
    fake = PACKAGE / "report" / "_architecture_probe.py"
    assert not fake.exists()
    monkeypatch.setattr(
        Path, "read_text", lambda self, **_: "from harnessevolve.pipeline.run import start_run\n"
    )
    assert forbidden_imports(fake) == [
        "harnessevolve/report/_architecture_probe.py imports harnessevolve.pipeline.run",
        "harnessevolve/report/_architecture_probe.py imports harnessevolve.pipeline.run.start_run",
    ]


def test_sandbox_sits_below_the_stages() -> None:
    """sandbox/ imports only core; every stage that runs untrusted code may import it."""
    assert ALLOWED["sandbox"] == {"core"}
    assert all("sandbox" in ALLOWED[p] for p in ("execute", "pipeline", "cli", "synth", "scoring", "judging"))
    assert not any(stage in ALLOWED["sandbox"] for stage in STAGES)


# --- no circles: between packages, and between the modules of one package ---------------------------


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (node -> successors) as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_allowed_package_map_has_no_circle() -> None:
    """Each package sits above the ones it may import: the map (and so the code within it) is acyclic."""
    assert cycle_in({k: set(v) for k, v in ALLOWED.items()}) is None


def module_graph() -> dict[str, set[str]]:
    """Module -> the package's own modules it imports anywhere (lazily too), parents excluded."""
    modules = {module_name(p): p for p in package_modules()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets: set[str] = set()
        for imported in imported_modules(tree, name, path.name == "__init__.py"):
            parts = imported.split(".")
            for i in range(len(parts), 0, -1):  # the longest prefix that is a module, not a package
                prefix = ".".join(parts[:i])
                if prefix in modules and modules[prefix].name != "__init__.py":
                    targets.add(prefix)
                    break
        graph[name] = targets - {name}
    return graph


KNOWN_CIRCLES = {
    "models": "local <-> _local_handler <-> torch_backend: litellm's handler is registered lazily",
}
"""Packages with a circle of lazy or type-only imports left, and why; every other package must have
none. The list may only shrink: a package that lost its circle must leave it."""


def package_circle(graph: dict[str, set[str]], package: str) -> list[str] | None:
    prefix = f"harnessevolve.{package}."
    inside = {m: {t for t in ts if t.startswith(prefix)} for m, ts in graph.items() if m.startswith(prefix)}
    return cycle_in(inside)


def test_no_circle_of_imports_between_the_modules_of_one_package() -> None:
    graph = module_graph()
    circles = [
        " -> ".join(found)
        for package in sorted(ALLOWED)
        if package not in KNOWN_CIRCLES and (found := package_circle(graph, package)) is not None
    ]
    assert circles == [], "modules that import each other (directly or round a loop):\n" + "\n".join(circles)
    gone = [p for p in KNOWN_CIRCLES if package_circle(graph, p) is None]
    assert gone == [], f"no circle left in {gone}: take them out of KNOWN_CIRCLES"


def test_cycle_finder_finds_a_loop_and_passes_a_tree() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


# --- the measurement scripts use the package's public API ---------------------------------------------

PERF = PACKAGE.parent / "benchmarks" / "perf"


def private_uses(source: str) -> list[str]:
    """Private names of harnessevolve a script reaches: an underscored module or imported name, or an
    underscored attribute of something it imported from the package."""
    tree = ast.parse(source)
    out: list[str] = []
    ours: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harnessevolve"):
            module = node.module or ""
            out += [f"module {module}" for part in module.split(".") if part.startswith("_")]
            for alias in node.names:
                if alias.name.startswith("_"):
                    out.append(f"{module}.{alias.name}")
                ours.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("harnessevolve"):
                    out += [f"module {alias.name}" for part in alias.name.split(".") if part.startswith("_")]
                    ours.add((alias.asname or alias.name).split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in ours
        ):
            out.append(f"{node.value.id}.{node.attr}")
    return out


def test_perf_scripts_reach_no_private_name_of_the_package() -> None:
    found = {
        str(p.relative_to(PERF)): uses
        for p in sorted(PERF.glob("*.py"))
        if (uses := private_uses(p.read_text(encoding="utf-8")))
    }
    assert found == {}, f"give the package a public function for these instead: {found}"


def test_private_use_finder_sees_modules_names_and_attributes() -> None:
    source = (
        "from harnessevolve.models._local_handler import x\n"
        "from harnessevolve.scoring.scorer import _save, Scorer\n"
        "from harnessevolve.execute import process_executor\n"
        "process_executor._workers\n"
        "other._private\n"
    )
    assert private_uses(source) == [
        "module harnessevolve.models._local_handler",
        "harnessevolve.scoring.scorer._save",
        "process_executor._workers",
    ]
