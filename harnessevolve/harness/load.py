"""Load a harness directory, or list every problem in it (``harnessevolve validate``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from harnessevolve.core.containment import contained, escape_of
from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.errors import HarnessError, HarnessEvolveError, SchemaError
from harnessevolve.core.files import read_yaml
from harnessevolve.core.schema import all_errors, check
from harnessevolve.harness.agent_config import agent_prompt, load_agent
from harnessevolve.harness.model import DEFAULT_MODEL, Harness, LoopSettings, Skill, ToolSpec
from harnessevolve.harness.runtime import load_runtime

IGNORED_PARTS = {".git", ".harnessevolve", "__pycache__"}
HARNESS = "the harness"


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return ": ".join(part for part in (self.file, self.field, self.message) if part)


def _walk(root: Path) -> list[str]:
    """Relative POSIX paths of every file and symlink under ``root`` (links are not followed),
    run state and git excluded."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root, onerror=None, followlinks=False):
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_PARTS)
        rel_base = base.relative_to(root)
        for name in sorted(names) + [d for d in dirs if (base / d).is_symlink()]:
            found.append((rel_base / name).as_posix())
    return sorted(found)


def read_files(root: Path) -> dict[str, str]:
    """Every text file under ``root`` (relative POSIX path -> text), run state and git excluded.

    A symlink that leads outside ``root`` (to a file or a folder) is refused, whatever it names."""
    out: dict[str, str] = {}
    for rel in _walk(root):
        path = contained(root, rel, error=HarnessError, file=rel, field=None, inside=HARNESS)
        if not path.is_file():
            continue  # a symlink to a folder inside the harness, a fifo, a socket
        try:
            out[rel] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise HarnessError(
                "not a UTF-8 text file", file=rel, hint="a harness holds only text files"
            ) from None
        except OSError as exc:
            raise HarnessError(f"cannot read it ({exc.strerror})", file=rel) from None
    return out


def _front_matter(text: str, file: str) -> tuple[Any, str]:
    import yaml

    if not text.startswith("---\n"):
        raise HarnessError(
            "missing front matter (a '---' block with name and description)",
            file=file,
            field="(front matter)",
        )
    head, sep, body = text[4:].partition("\n---")
    if not sep:
        raise HarnessError("front matter is not closed by '---'", file=file, field="(front matter)")
    try:
        return bounded_yaml(head), body.lstrip("-").lstrip("\n")
    except yaml.YAMLError as exc:
        raise HarnessError(
            f"invalid YAML in front matter: {exc}".splitlines()[0], file=file, field="(front matter)"
        ) from None


def _load_skill(path: Path, rel: str) -> Skill:
    meta, body = _front_matter(path.read_text(encoding="utf-8"), rel)
    check(meta, "skill", file=rel, error=HarnessError)
    if meta["name"] != path.parent.name:
        raise HarnessError(
            f"name {meta['name']!r} differs from its folder {path.parent.name!r}", file=rel, field="name"
        )
    return Skill(name=meta["name"], description=meta["description"], body=body)


def _load_tool(root: Path, name: str) -> ToolSpec:
    rel = f"tools/{name}.yaml"
    path = contained(root, rel, error=HarnessError, file="harness.yaml", field="tools", inside=HARNESS)
    if not path.is_file():
        raise HarnessError(
            f"tool {name!r} is listed but {rel} does not exist",
            file="harness.yaml",
            field="tools",
            hint=f"add {rel} or remove {name!r} from tools",
        )
    doc = read_yaml(path, error=HarnessError, name=rel)
    check(doc, "tool", file=rel, error=HarnessError)
    if doc["name"] != name:
        raise HarnessError(f"name {doc['name']!r} differs from the file name", file=rel, field="name")
    missing = [r for r in doc["parameters"].get("required", []) if r not in doc["parameters"]["properties"]]
    if missing:
        raise HarnessError(
            f"required argument {missing[0]!r} is not in properties", file=rel, field="parameters.required"
        )
    _check_parameters_schema(doc["parameters"], rel)
    return ToolSpec(
        name=name,
        description=doc["description"],
        parameters=doc["parameters"],
        builtin=doc.get("builtin"),
        command=doc.get("command"),
    )


def _task_tool_overrides(root: Path, doc: dict[str, Any]) -> tuple[ToolSpec, ...]:
    """The unlisted ``tools/*.yaml`` files with no implementation (no ``builtin``, no ``command``):
    each describes a task's tool of its name (its description and parameters replace the task's;
    ``execute/rollout_tools.py``). Such a file can never be offered on its own, so it needs no entry
    in ``tools``: a proposer adds one by writing the file. Unlisted files with an implementation
    stay unused, as before."""
    listed = set(doc.get("tools", ()))
    found = []
    for path in sorted((root / "tools").glob("*.yaml")) if (root / "tools").is_dir() else ():
        name = path.stem
        if name in listed or escape_of(root, f"tools/{path.name}") is not None or not path.is_file():
            continue
        spec = _load_tool(root, name)
        if spec.builtin is None and spec.command is None:
            found.append(spec)
    return tuple(found)


def _check_parameters_schema(parameters: dict[str, Any], rel: str) -> None:
    """A tool's ``parameters`` must itself be a valid JSON Schema (the model is shown it)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError as InvalidSchema

    try:
        Draft202012Validator.check_schema(parameters)
    except InvalidSchema as exc:
        where = ".".join(str(p) for p in exc.absolute_path)
        raise HarnessError(
            f"not a valid JSON Schema: {exc.message}",
            file=rel,
            field=f"parameters.{where}" if where else "parameters",
            hint="parameters is a JSON Schema object (type, properties, required)",
        ) from None


def _text_file(root: Path, rel: str, field: str) -> str:
    path = contained(root, rel, error=HarnessError, file="harness.yaml", field=field, inside=HARNESS)
    if not path.is_file():
        raise HarnessError(
            f"{rel} does not exist",
            file="harness.yaml",
            field=field,
            hint=f"create {rel} or point {field} at an existing file",
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise HarnessError(
            "not a UTF-8 text file", file=rel, hint="a harness holds only text files"
        ) from None


def load_harness(root: Path) -> Harness:
    """Load and check a harness; the first problem raises ``HarnessError`` naming file and field."""
    root = Path(root)
    if not root.exists():
        raise HarnessError(
            "no such folder", file=str(root), hint="create a harness with `harnessevolve init DIR`"
        )
    if not (root / "harness.yaml").is_file():
        raise HarnessError(
            "not a harness directory (no harness.yaml)",
            file=str(root),
            hint="create one with `harnessevolve init DIR`",
        )
    doc = read_yaml(root / "harness.yaml", error=HarnessError, name="harness.yaml")
    check(doc, "harness", file="harness.yaml", error=HarnessError)
    files = read_files(root)
    agent = load_agent(root, doc, files)
    prompt_file = doc.get("system_prompt")
    system_prompt = (
        _text_file(root, prompt_file, "system_prompt") if prompt_file else agent_prompt(agent, files)
    )
    examples = _text_file(root, doc["examples"], "examples") if doc.get("examples") else ""
    tools = tuple(_load_tool(root, name) for name in doc.get("tools", ())) + _task_tool_overrides(root, doc)
    if agent.kind == "builtin" and not any(t.builtin == "submit" for t in tools):
        raise HarnessError(
            "no tool implements builtin 'submit', so the agent can never finish",
            file="harness.yaml",
            field="tools",
            hint="add submit to tools",
        )
    skills = tuple(
        _load_skill(p, p.relative_to(root).as_posix())
        for p in sorted(root.glob("skills/*/SKILL.md"))
        if escape_of(root, p.relative_to(root).as_posix()) is None  # read_files refused the others
    )
    for rel, text in files.items():
        if rel.startswith("hooks/") and rel.endswith(".py"):
            try:
                compile(text, rel, "exec")
            except SyntaxError as exc:
                raise HarnessError(
                    f"Python syntax error: {exc.msg}", file=rel, field=f"line {exc.lineno}"
                ) from None
    known = {f.name for f in fields(LoopSettings)}
    loop = LoopSettings(**{k: v for k, v in doc.get("loop", {}).items() if k in known})
    for setting in ("answer_from", "answer_check"):
        source = getattr(loop, setting).partition(".")[0]
        if source and agent.kind == "builtin" and source not in {t.name for t in tools}:
            raise HarnessError(
                f"names tool {source!r}, which is not one of this harness's tools",
                file="harness.yaml",
                field=f"loop.{setting}",
                hint=f"use TOOL.ARGUMENT with one of: {', '.join(t.name for t in tools)}",
            )
    return Harness(
        root=root,
        name=doc["name"],
        model=doc.get("model", DEFAULT_MODEL),
        system_prompt=system_prompt,
        examples=examples,
        tools=tools,
        skills=skills,
        loop=loop,
        editable=tuple(doc.get("editable", [])),
        files=files,
        description=doc.get("description", ""),
        agent=agent,
        runtime=load_runtime(doc, files),
    )


def validate_harness(root: Path) -> list[Problem]:
    """Every problem found: all schema violations of harness.yaml, then whatever stops loading."""
    root = Path(root)
    problems: list[Problem] = []
    if (root / "harness.yaml").is_file():
        try:
            doc = read_yaml(root / "harness.yaml", error=HarnessError, name="harness.yaml")
            problems += [
                Problem("harness.yaml", p, m, SchemaError.default_hint) for p, m in all_errors(doc, "harness")
            ]
        except HarnessEvolveError as exc:
            problems.append(Problem(exc.file or "harness.yaml", exc.field or "", exc.message, exc.hint))
    if not problems:
        try:
            load_harness(root)
        except HarnessEvolveError as exc:
            problems.append(Problem(exc.file or str(root), exc.field or "", exc.message, exc.hint))
    return problems
