"""Load a harness directory, or list every problem in it (``harnessevolve validate``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from typing import Any

from harnessevolve.core.errors import HarnessError, HarnessEvolveError
from harnessevolve.core.files import read_yaml
from harnessevolve.core.schema import all_errors, check
from harnessevolve.harness.model import DEFAULT_MODEL, Harness, LoopSettings, Skill, ToolSpec

IGNORED_PARTS = {".git", ".harnessevolve", "__pycache__"}


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


def read_files(root: Path) -> dict[str, str]:
    """Every text file under ``root`` (relative POSIX path -> text), run state and git excluded."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or IGNORED_PARTS.intersection(rel.parts):
            continue
        try:
            out[rel.as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise HarnessError(
                "not a UTF-8 text file", file=str(path), hint="a harness holds only text files"
            ) from None
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
        return yaml.safe_load(head), body.lstrip("-").lstrip("\n")
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
    path = root / rel
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
    return ToolSpec(
        name=name,
        description=doc["description"],
        parameters=doc["parameters"],
        builtin=doc.get("builtin"),
        command=doc.get("command"),
    )


def _text_file(root: Path, rel: str, field: str) -> str:
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts:
        raise HarnessError(f"path {rel!r} must stay inside the harness", file="harness.yaml", field=field)
    path = root / rel
    if not path.is_file():
        raise HarnessError(
            f"{rel} does not exist",
            file="harness.yaml",
            field=field,
            hint=f"create {rel} or point {field} at an existing file",
        )
    return path.read_text(encoding="utf-8")


def load_harness(root: Path) -> Harness:
    """Load and check a harness; the first problem raises ``HarnessError`` naming file and field."""
    root = Path(root)
    if not (root / "harness.yaml").is_file():
        raise HarnessError(
            "not a harness directory (no harness.yaml)",
            file=str(root),
            hint="create one with `harnessevolve init DIR`",
        )
    doc = read_yaml(root / "harness.yaml", error=HarnessError, name="harness.yaml")
    check(doc, "harness", file="harness.yaml", error=HarnessError)
    files = read_files(root)
    system_prompt = _text_file(root, doc["system_prompt"], "system_prompt")
    examples = _text_file(root, doc["examples"], "examples") if doc.get("examples") else ""
    tools = tuple(_load_tool(root, name) for name in doc["tools"])
    if not any(t.builtin == "submit" for t in tools):
        raise HarnessError(
            "no tool implements builtin 'submit', so the agent can never finish",
            file="harness.yaml",
            field="tools",
            hint="add submit to tools",
        )
    skills = tuple(
        _load_skill(p, p.relative_to(root).as_posix()) for p in sorted(root.glob("skills/*/SKILL.md"))
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
    )


def validate_harness(root: Path) -> list[Problem]:
    """Every problem found: all schema violations of harness.yaml, then whatever stops loading."""
    root = Path(root)
    problems: list[Problem] = []
    if (root / "harness.yaml").is_file():
        try:
            doc = read_yaml(root / "harness.yaml", error=HarnessError, name="harness.yaml")
            problems += [Problem("harness.yaml", p, m) for p, m in all_errors(doc, "harness")]
        except HarnessEvolveError as exc:
            problems.append(Problem(exc.file or "harness.yaml", exc.field or "", exc.message))
    if not problems:
        try:
            load_harness(root)
        except HarnessEvolveError as exc:
            problems.append(Problem(exc.file or str(root), exc.field or "", exc.message))
    return problems
