"""Edit operations as data (``schemas/edits.schema.json``), applied all-or-nothing in memory.

``apply_edits(files, edits, editable)`` turns a list of operations into whole-file contents
(``path -> new text``, ``None`` deletes), which is what a :class:`Candidate` carries and the pipeline
writes. Every operation is checked against the schema, may only touch paths matching ``editable``
(``harness.yaml`` and ``tools/*.yaml`` included: ``set_loop`` and ``edit_tool`` need them to be), and
the edited harness must still validate. The first problem raises :class:`EditError` with the index
of the offending edit; nothing is applied then (``files`` is never modified).
"""

from __future__ import annotations

import difflib
import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.errors import EditError
from harnessevolve.core.schema import all_errors as schema_errors
from harnessevolve.core.schema import json_path, load_schema
from harnessevolve.harness.editable import may_edit, may_edit_section

EDITS_VERSION = 1
EDIT_OPS = (
    "replace_text", "insert_text", "delete_text", "add_skill", "update_skill", "remove_skill",
    "edit_tool", "set_loop", "set_recovery", "patch_hook", "write_hook", "patch_file",
)  # fmt: skip
HARNESS_FILE = "harness.yaml"
EITHER_OR = {
    "insert_text": "give exactly one of anchor or position",
    "update_skill": "give description and/or body",
    "edit_tool": "give description and/or parameters",
}


def _validator(ref: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = load_schema("edits")
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": ref} if ref else schema)


def schema_problem(document: Any, ref: str = "") -> str | None:
    """The first (deepest) violation of the edits schema, as ``path: message``; None when valid.
    ``ref`` checks against a part of it (``#/$defs/edit``)."""
    from jsonschema.exceptions import best_match

    found = best_match(_validator(ref).iter_errors(document))
    if found is None:
        return None
    return f"{json_path(list(found.absolute_path))}: {found.message}"


def check_edit(edit: Any, index: int) -> None:
    """Raise ``EditError`` when ``edit`` is not a well-formed operation."""
    problem = schema_problem(edit, "#/$defs/edit")
    if problem is not None:
        op = edit.get("op") if isinstance(edit, dict) else None
        if op in EITHER_OR and ("not valid under any of" in problem or "valid under each of" in problem):
            problem = EITHER_OR[op]
        raise EditError(f"{op or 'edit'}: {problem.removeprefix('(top level): ')}", index=index)


def split_front_matter(text: str) -> tuple[dict[str, Any], str] | None:
    """(front matter, body) of a SKILL.md; None when it has no well-formed front matter."""
    import yaml

    if not text.startswith("---\n"):
        return None
    head, sep, body = text[4:].partition("\n---")
    if not sep:
        return None
    try:
        meta = bounded_yaml(head)
    except yaml.YAMLError:
        return None
    return (meta, body.lstrip("-").lstrip("\n")) if isinstance(meta, dict) else None


def render_skill(name: str, description: str, body: str) -> str:
    import yaml

    head = yaml.safe_dump(
        {"name": name, "description": description}, sort_keys=False, allow_unicode=True, width=1000
    )
    return f"---\n{head}---\n\n{body.strip()}\n"


def skill_path(name: str) -> str:
    return f"skills/{name}/SKILL.md"


class _Tree:
    """The files being edited: a copy of the originals, the editable patterns, who touched what."""

    def __init__(self, files: Mapping[str, str], editable: Sequence[str]) -> None:
        self.files: dict[str, str | None] = dict(files)
        self.editable = tuple(editable)
        self.index = 0
        self.touched_by: dict[str, int] = {}

    def fail(self, reason: str, path: str | None = None) -> EditError:
        return EditError(reason, index=self.index, file=path)

    def check_path(self, path: str) -> str:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or path != pure.as_posix() or path.startswith("./"):
            raise self.fail(f"path {path!r} must be relative, normalized and inside the harness", path)
        if not may_edit(path, self.editable):
            allowed = ", ".join(self.editable) or "nothing"
            raise self.fail(f"{path} is not editable (harness.yaml editable: {allowed})", path)
        return path

    def check_section(self, path: str, section: str) -> None:
        """Raise unless ``section`` of the YAML file ``path`` is editable (``PATH#SECTION``, or a glob
        of the whole file)."""
        if not may_edit_section(path, section, self.editable):
            allowed = ", ".join(self.editable) or "nothing"
            reason = f"{path} is not editable, nor its {section} section (harness.yaml editable: {allowed})"
            raise self.fail(reason, path)

    def write_section(self, path: str, section: str, text: str) -> None:
        """``write`` for a YAML file of which only ``section`` changed."""
        self.check_section(path, section)
        self.files[path] = text
        self.touched_by[path] = self.index

    def read(self, path: str) -> str:
        self.check_path(path)
        text = self.files.get(path)
        if text is None:
            raise self.fail(f"{path} does not exist", path)
        return text

    def write(self, path: str, text: str | None) -> None:
        self.check_path(path)
        self.files[path] = text
        self.touched_by[path] = self.index

    def find(self, path: str, text: str, old: str, count: int | None) -> None:
        """Check that ``old`` occurs exactly ``count`` (default 1) times in ``text``."""
        found, wanted = text.count(old), count or 1
        if found == wanted:
            return
        if found == 0:
            first = old.strip().splitlines()[0] if old.strip() else old
            close = difflib.get_close_matches(first, text.splitlines(), n=1, cutoff=0.6)
            nearest = f"; the closest line is {close[0]!r}" if close else ""
            raise self.fail(f"text not found in {path}: {old[:80]!r}{nearest}", path)
        raise self.fail(
            f"text occurs {found} times in {path}, expected {wanted}: {old[:80]!r} "
            "(quote more surrounding text, or give count)",
            path,
        )


def _replace_text(tree: _Tree, edit: dict[str, Any]) -> None:
    path, old, new = edit["path"], edit["old"], edit.get("new", "")
    text = tree.read(path)
    if old == new:
        raise tree.fail("old and new are the same text; the edit changes nothing", path)
    tree.find(path, text, old, edit.get("count"))
    tree.write(path, text.replace(old, new))


def _insert_text(tree: _Tree, edit: dict[str, Any]) -> None:
    path, insert = edit["path"], edit["text"]
    text = tree.read(path)
    if edit.get("position") == "start":
        tree.write(path, insert + text)
    elif edit.get("position") == "end":
        joint = "" if not text or text.endswith("\n") else "\n"
        tree.write(path, text + joint + insert)
    else:
        anchor = edit["anchor"]
        tree.find(path, text, anchor, None)
        at = text.index(anchor) + (len(anchor) if edit.get("where", "after") == "after" else 0)
        tree.write(path, text[:at] + insert + text[at:])


def _skill_parts(tree: _Tree, name: str) -> tuple[str, dict[str, Any], str]:
    path = skill_path(name)
    parsed = split_front_matter(tree.read(path))
    if parsed is None:
        raise tree.fail(f"{path} has no well-formed front matter", path)
    return path, parsed[0], parsed[1]


def _one_line(tree: _Tree, description: str) -> str:
    if "\n" in description.strip():
        raise tree.fail("a skill description is one line")
    return description.strip()


def _add_skill(tree: _Tree, edit: dict[str, Any]) -> None:
    path = tree.check_path(skill_path(edit["name"]))
    if any(p.startswith(f"skills/{edit['name']}/") and t is not None for p, t in tree.files.items()):
        raise tree.fail(f"skill {edit['name']!r} already exists (use update_skill)", path)
    tree.write(path, render_skill(edit["name"], _one_line(tree, edit["description"]), edit["body"]))


def _update_skill(tree: _Tree, edit: dict[str, Any]) -> None:
    path, meta, body = _skill_parts(tree, edit["name"])
    description = _one_line(tree, edit.get("description") or str(meta.get("description", "")))
    new = render_skill(edit["name"], description, edit.get("body") or body)
    if new == tree.files[path]:
        raise tree.fail(f"the edit leaves {path} unchanged", path)
    tree.write(path, new)


def _remove_skill(tree: _Tree, edit: dict[str, Any]) -> None:
    prefix = f"skills/{edit['name']}/"
    paths = sorted(p for p, t in tree.files.items() if p.startswith(prefix) and t is not None)
    if not paths:
        raise tree.fail(f"there is no skill named {edit['name']!r}", skill_path(edit["name"]))
    for path in paths:
        tree.write(path, None)


def _yaml_document(tree: _Tree, path: str, section: str | None = None) -> dict[str, Any]:
    """``path`` parsed; with ``section``, readable when only that section of it is editable."""
    import yaml

    if section is None:
        text = tree.read(path)
    else:
        tree.check_section(path, section)
        found = tree.files.get(path)
        if found is None:
            raise tree.fail(f"{path} does not exist", path)
        text = found
    try:
        doc = bounded_yaml(text)
    except yaml.YAMLError as exc:
        raise tree.fail(f"{path} is not valid YAML: {str(exc).splitlines()[0]}", path) from None
    if not isinstance(doc, dict):
        raise tree.fail(f"{path} is not a YAML mapping", path)
    return doc


def _edit_tool(tree: _Tree, edit: dict[str, Any]) -> None:
    import yaml

    path = f"tools/{edit['name']}.yaml"
    if tree.files.get(path) is None:
        raise tree.fail(f"there is no tool {edit['name']!r} ({path})", path)
    tree.check_path(path)
    doc = _yaml_document(tree, path)
    for key in ("description", "parameters"):
        if key in edit:
            doc[key] = edit[key]
    problems = schema_errors(doc, "tool")
    if problems:
        raise tree.fail(f"the edited tool is invalid: {problems[0][0]}: {problems[0][1]}", path)
    params = doc["parameters"]
    missing = [r for r in params.get("required", []) if r not in params["properties"]]
    if missing:
        raise tree.fail(f"required argument {missing[0]!r} is not in parameters.properties", path)
    original = tree.files[path] or ""
    comments = "".join(line for line in original.splitlines(keepends=True) if line.startswith("#"))
    dumped = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    if dumped == original or bounded_yaml(original) == doc:
        raise tree.fail(f"the edit leaves {path} unchanged", path)
    tree.write(path, comments + dumped)


LOOP_LINE = re.compile(r"^loop:\s*(#.*)?$")


def _set_loop_in_text(text: str, setting: str, value: Any) -> str:
    """Set ``loop.<setting>`` by editing the YAML text, so comments and layout survive."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if LOOP_LINE.match(line.rstrip("\n"))), None)
    rendered = json.dumps(value, ensure_ascii=False)
    if start is None:
        return text + ("" if text.endswith("\n") else "\n") + f"loop:\n  {setting}: {rendered}\n"
    end, indent, last_key = start + 1, "  ", start
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
        key = re.match(r"^(\s+)([A-Za-z_]\w*):", lines[end])
        if key:
            indent, last_key = key.group(1), end
            if key.group(2) == setting:
                comment = re.search(r"\s+#.*$", lines[end].rstrip("\n"))
                tail = comment.group(0) if comment else ""
                lines[end] = f"{indent}{setting}: {rendered}{tail}\n"
                return "".join(lines)
        end += 1
    lines.insert(last_key + 1, f"{indent}{setting}: {rendered}\n")
    return "".join(lines)


def _set_loop(tree: _Tree, edit: dict[str, Any]) -> None:
    import yaml

    setting, value = edit["setting"], edit["value"]
    doc = _yaml_document(tree, HARNESS_FILE, "loop")
    found = doc.get("loop")
    loop: dict[str, Any] = found if isinstance(found, dict) else {}
    if setting in loop and loop[setting] == value and type(loop[setting]) is type(value):
        raise tree.fail(f"loop.{setting} is already {value!r}")
    wanted = {**doc, "loop": {**loop, setting: value}}
    problems = sorted(schema_errors(wanted, "harness"), key=lambda p: not p[0].startswith("loop"))
    if problems:
        raise tree.fail(f"harness.yaml would be invalid: {problems[0][0]}: {problems[0][1]}", HARNESS_FILE)
    new = _set_loop_in_text(tree.files[HARNESS_FILE] or "", setting, value)
    try:
        faithful = bounded_yaml(new) == wanted
    except yaml.YAMLError:
        faithful = False
    if not faithful:  # unusual layout (flow style, anchors): rewrite the document, comments are lost
        new = yaml.safe_dump(wanted, sort_keys=False, allow_unicode=True, width=100)
    tree.write_section(HARNESS_FILE, "loop", new)


def _set_recovery(tree: _Tree, edit: dict[str, Any]) -> None:
    """Replace ``recovery.rules`` in harness.yaml (checked against the harness schema); a harness
    without a ``recovery`` section gets one (which turns recovery on)."""
    import yaml

    doc = _yaml_document(tree, HARNESS_FILE, "recovery")
    found = doc.get("recovery")
    section: dict[str, Any] = found if isinstance(found, dict) else {}
    if section.get("rules") == edit["rules"]:
        raise tree.fail("recovery.rules already are these rules")
    wanted = {**doc, "recovery": {**section, "rules": edit["rules"]}}
    problems = sorted(schema_errors(wanted, "harness"), key=lambda p: not p[0].startswith("recovery"))
    if problems:
        raise tree.fail(f"harness.yaml would be invalid: {problems[0][0]}: {problems[0][1]}", HARNESS_FILE)
    text = tree.files[HARNESS_FILE] or ""
    if "recovery" not in doc:  # appended: the rest of the file, comments included, stays as it is
        block = yaml.safe_dump(
            {"recovery": wanted["recovery"]}, sort_keys=False, allow_unicode=True, width=100
        )
        new = text + ("" if text.endswith("\n") else "\n") + block
    else:
        new = yaml.safe_dump(wanted, sort_keys=False, allow_unicode=True, width=100)
    tree.write_section(HARNESS_FILE, "recovery", new)


def _compiled(tree: _Tree, path: str, code: str) -> str:
    try:
        compile(code, path, "exec")
    except SyntaxError as exc:
        raise tree.fail(f"{path} would not compile: {exc.msg} (line {exc.lineno})", path) from None
    return code


def _patch_hook(tree: _Tree, edit: dict[str, Any]) -> None:
    path, old, new = edit["path"], edit["old"], edit["new"]
    text = tree.read(path)
    tree.find(path, text, old, None)
    tree.write(path, _compiled(tree, path, text.replace(old, new)))


def _patch_file(tree: _Tree, edit: dict[str, Any]) -> None:
    """A unified diff on one editable file (agent code, a hook, a tool, a prompt), located by
    content (``unified_diff``); Python must still compile. The file headers, if any, must name it."""
    from harnessevolve.optimize.unified_diff import DiffError, apply_diff, parse_diff

    path = tree.check_path(edit["path"])
    try:
        diff = parse_diff(edit["diff"])
        named = {p for p in (diff.old_path, diff.new_path) if p and p != "/dev/null"}
        if named - {path}:
            raise DiffError(f"the diff's file header names {sorted(named - {path})[0]}, not {path}")
        new = apply_diff(tree.files.get(path), diff)
    except DiffError as exc:
        raise tree.fail(f"the patch does not apply to {path}: {exc}", path) from None
    if new == tree.files.get(path):
        raise tree.fail(f"the patch leaves {path} unchanged", path)
    tree.write(path, _compiled(tree, path, new) if new is not None and path.endswith(".py") else new)


def _write_hook(tree: _Tree, edit: dict[str, Any]) -> None:
    path = tree.check_path(edit["path"])
    if tree.files.get(path) == edit["code"]:
        raise tree.fail(f"the edit leaves {path} unchanged", path)
    tree.write(path, _compiled(tree, path, edit["code"]))


APPLY = {
    "replace_text": _replace_text,
    "insert_text": _insert_text,
    "delete_text": lambda tree, edit: _replace_text(tree, {**edit, "new": ""}),
    "add_skill": _add_skill,
    "update_skill": _update_skill,
    "remove_skill": _remove_skill,
    "edit_tool": _edit_tool,
    "set_loop": _set_loop,
    "set_recovery": _set_recovery,
    "patch_hook": _patch_hook,
    "write_hook": _write_hook,
    "patch_file": _patch_file,
}


def harness_problems(files: Mapping[str, str | None]) -> list[Any]:
    """``validate_harness`` of these files, written to a temporary directory."""
    from harnessevolve.harness.load import validate_harness

    with tempfile.TemporaryDirectory(prefix="harnessevolve-edit-") as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            if text is not None:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text, encoding="utf-8")
        problems = validate_harness(root)
        # Problems with the whole directory name the temporary copy: name the harness instead.
        return [replace(p, file="(harness)") if p.file.startswith(tmp) else p for p in problems]


def write_changes(root: Path, changes: Mapping[str, str | None]) -> None:
    """Write whole-file ``changes`` (None: delete) into the harness folder ``root``.

    Every path is checked first, symlinks resolved: one that would land outside ``root`` (a
    symlinked folder or file on the way out) raises ``EditError`` and nothing is written."""
    from harnessevolve.core.containment import escape_of
    from harnessevolve.core.files import atomic_write_text

    for rel in changes:
        problem = escape_of(root, rel, inside="the harness")
        if problem is not None:
            raise EditError(f"{rel} {problem}; the edit is not applied", file=rel)
    for rel, text in changes.items():
        path = Path(root) / rel
        if text is None:
            path.unlink(missing_ok=True)
        else:
            atomic_write_text(path, text)


def apply_edits(
    files: Mapping[str, str], edits: Sequence[Mapping[str, Any]], editable: Sequence[str]
) -> dict[str, str | None]:
    """The whole-file changes that ``edits`` make to ``files`` (path -> new text, None: deleted).

    All or nothing: a malformed or inapplicable edit, a path outside ``editable``, an edit list that
    changes nothing or a result that no longer validates (a problem the original did not have)
    raises ``EditError`` naming the edit's index and the reason; ``files`` is never modified.
    """
    if not edits:
        raise EditError("the edit list is empty")
    tree = _Tree(files, editable)
    for index, edit in enumerate(edits):
        tree.index = index
        check_edit(edit, index)
        APPLY[edit["op"]](tree, dict(edit))
    changes = {p: t for p, t in tree.files.items() if t != files.get(p)}
    if not changes:
        raise EditError("the edits change nothing")
    after = harness_problems(tree.files)
    if after:
        known = {str(p) for p in harness_problems(files)}
        new = [p for p in after if str(p) not in known]
        if new:
            culprit = tree.touched_by.get(new[0].file)
            raise EditError(
                f"the edited harness does not validate: {new[0]}",
                index=culprit if culprit is not None else len(edits) - 1,
                file=new[0].file,
            )
    return changes
