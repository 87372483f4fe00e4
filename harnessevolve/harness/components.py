"""Where a harness keeps what the offline proposers edit: its system prompt, its demonstrations and
its step limit, whichever agent runs it.

A *location* is a harness file (``prompts/system.md``) or a key of a YAML file of the harness
(``mini.yaml#agent.system_template``: the ``system_template`` of its ``agent`` mapping). The builtin
loop and ``command`` agents keep prompt and demonstrations in the files harness.yaml names
(``system_prompt``, ``examples``) and the step limit in ``harness.yaml#loop.max_steps``; a
``mini-swe-agent`` harness keeps all three in mini-swe-agent's own config (``agent.config``): its
system template (rules), its instance template (demonstrations) and ``agent.step_limit``. So the
same proposers (``rules``, ``demo``, ``ablate``, ``loop``) edit either kind of harness. A location
may change when its whole file is editable (``mini.yaml``) or its top-level section is
(``harness.yaml#loop``).

Writing a key keeps the rest of its file as written (comments, layout, block scalars): the key's
own lines are replaced; only a layout that cannot be edited in place faithfully (flow style,
anchors) is rewritten as a whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessevolve.harness.editable import SECTION_MARK, may_edit, may_edit_section

HARNESS_FILE = "harness.yaml"
BUILTIN_STEP_LIMIT = "harness.yaml#loop.max_steps"
JINJA_MARKS = ("{{", "{%", "{#")


@dataclass(frozen=True)
class Components:
    """The locations of a harness's editable components ('' / None: it has none)."""

    system_prompt: str = ""
    """Where rules go: the system prompt file, or a template key of an agent's own config."""
    examples: str | None = None
    """Where demonstrations (``## Example`` sections) go."""
    step_limit: str = BUILTIN_STEP_LIMIT
    """The integer that bounds the agent's turns."""
    templates: bool = False
    """The texts are Jinja templates (mini-swe-agent's): text put into them must stay literal."""

    @property
    def builtin_loop(self) -> bool:
        """The step limit is harness.yaml's ``loop.max_steps`` (so the other loop settings apply too)."""
        return self.step_limit == BUILTIN_STEP_LIMIT


def harness_components(doc: Mapping[str, Any], files: Mapping[str, str]) -> Components:
    """The components of the harness whose parsed harness.yaml is ``doc`` (``files``: its files)."""
    found = doc.get("agent")
    agent: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    if agent.get("kind") == "mini-swe-agent" and agent.get("config"):
        config = str(agent["config"])
        return Components(
            system_prompt=f"{config}#agent.system_template",
            examples=f"{config}#agent.instance_template",
            step_limit=f"{config}#agent.step_limit",
            templates=True,
        )
    examples = doc.get("examples") or ("prompts/examples.md" if "prompts/examples.md" in files else None)
    return Components(system_prompt=str(doc.get("system_prompt") or ""), examples=examples)


def split_location(location: str) -> tuple[str, tuple[str, ...]]:
    """(the file, the keys inside it; none for a whole file)."""
    path, _, keys = location.partition(SECTION_MARK)
    return path, tuple(k for k in keys.split(".") if k)


def may_edit_location(location: str, editable: Sequence[str]) -> bool:
    """The whole file may change, or (a key of it) its top-level section may."""
    path, keys = split_location(location)
    if not path:
        return False
    return may_edit_section(path, keys[0], editable) if keys else may_edit(path, editable)


def read_location(files: Mapping[str, str | None], location: str) -> Any:
    """The file's text, or the value at the key (None when absent or the file does not parse)."""
    import yaml

    from harnessevolve.core.documents import bounded_yaml

    path, keys = split_location(location)
    text = files.get(path)
    if not keys or text is None:
        return text
    try:
        value: Any = bounded_yaml(text)
    except (yaml.YAMLError, ValueError):
        return None
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def literal(text: str, templates: bool) -> str:
    """``text`` as it must be written into a Jinja template to render as itself: each line holding a
    Jinja mark is wrapped in ``{% raw %}`` (the others stay as they are, headings included)."""
    if not templates or not any(mark in text for mark in JINJA_MARKS):
        return text
    end = "{% endraw %}"
    lines = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        if any(mark in body for mark in JINJA_MARKS):
            body = "{% raw %}" + body.replace(end, end + "{{ '" + end + "' }}{% raw %}") + end
        lines.append(body + line[len(line.rstrip("\n")) :])
    return "".join(lines)


def write_location(files: Mapping[str, str | None], location: str, value: Any) -> str:
    """The new text of the location's file with ``value`` at the location; ``ValueError`` when the
    file is missing or is not a YAML mapping down to the key's parent (or ``value`` is not text for a
    whole file)."""
    import yaml

    from harnessevolve.core.documents import bounded_yaml

    path, keys = split_location(location)
    text = files.get(path)
    if not keys:
        if not isinstance(value, str):
            raise ValueError(f"{path} is a text file")
        return value
    if text is None:
        raise ValueError(f"{path} does not exist")
    try:
        doc = bounded_yaml(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    wanted = _with_value(doc, keys, value)
    new = _set_in_text(text, keys, value)
    try:
        faithful = new is not None and bounded_yaml(new) == wanted
    except yaml.YAMLError:
        faithful = False
    return new if faithful and new is not None else _dump(wanted)


def _with_value(doc: Any, keys: tuple[str, ...], value: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ValueError("not a YAML mapping")
    if len(keys) == 1:
        return {**doc, keys[0]: value}
    inner = doc.get(keys[0])
    return {**doc, keys[0]: _with_value(inner if inner is not None else {}, keys[1:], value)}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    return bool(line.strip()) and not line.lstrip().startswith("#")


def _set_in_text(text: str, keys: tuple[str, ...], value: Any) -> str | None:
    """``text`` with the block of the last key replaced by ``value``; None when a key's line is not
    found in block layout (the caller then rewrites the document)."""
    lines = text.splitlines(keepends=True)
    start, end, parent = 0, len(lines), -1
    found = -1
    for key in keys:
        children = [i for i in range(start, end) if _content(lines[i]) and _indent(lines[i]) > parent]
        if not children:
            return None
        level = _indent(lines[children[0]])
        pattern = re.compile(rf"^ {{{level}}}{re.escape(key)}:(\s|$)")
        found = next((i for i in children if _indent(lines[i]) == level and pattern.match(lines[i])), -1)
        if found < 0:
            return None
        block_end = next(
            (i for i in range(found + 1, end) if _content(lines[i]) and _indent(lines[i]) <= level), end
        )
        start, end, parent = found + 1, block_end, level
    last = end
    while last > found + 1 and not lines[last - 1].strip():
        last -= 1  # the blank lines after the block stay where they are
    return "".join([*lines[:found], _render(" " * parent, keys[-1], value), *lines[last:]])


def _render(indent: str, key: str, value: Any) -> str:
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        body = value.rstrip("\n")
        trailing = len(value) - len(body)
        chomp = "-" if trailing == 0 else "" if trailing == 1 else "+"
        inner = indent + "  "
        rows = [f"{inner}{row}\n" if row.strip() else "\n" for row in body.split("\n")]
        tail = "\n" * max(trailing - 1, 0)
        return f"{indent}{key}: |{chomp}\n" + "".join(rows) + tail
    return f"{indent}{key}: {json.dumps(value, ensure_ascii=False)}\n"


def _dump(doc: dict[str, Any]) -> str:
    """The whole document, multi-line strings as literal blocks (comments are lost)."""
    import yaml

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]  # yaml has no types here
        pass

    def text(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=1000)
