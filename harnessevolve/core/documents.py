"""Bounded YAML and JSON reading: every document harnessevolve reads goes through here.

A document is refused, with an error naming its file (and line, where there is one), before
anything is built from it when it

- is larger than ``max_bytes`` (``MAX_YAML_BYTES``, ``MAX_JSON_BYTES`` by default; the file is
  read only that far);
- nests deeper than ``MAX_DEPTH`` (counted while the YAML node graph is composed; JSON's own
  nesting is bounded by the interpreter's recursion limit, also an error here);
- (YAML) expands through its aliases to more than ``MAX_ALIAS_NODES`` nodes beyond the ones it
  writes out: the composed node graph is measured first (each shared node once, memoised), so a
  1 KB "billion laughs" is an error in milliseconds instead of a hang, and an alias that refers to
  its own anchor (a cycle) is refused;
- (YAML) has a duplicate key in one mapping: an error naming both lines (the last value would
  otherwise win silently);
- holds a number too long to convert (Python's int digit limit).

Merge keys (``<<: *base``) keep working: a merged key that the mapping then sets again is an
override, not a duplicate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from harnessevolve.core.errors import HarnessEvolveError, SchemaError
from harnessevolve.core.reading import read_text

MAX_YAML_BYTES = 16 * 2**20
"""Largest YAML file read (harness files, tools, tasks, gates, benchmark.yaml, configs)."""
MAX_JSON_BYTES = 512 * 2**20
"""Largest JSON file read (a trajectory of a long rollout can be 100 MB)."""
MAX_DEPTH = 200
"""Deepest nesting of a YAML document (mappings and lists inside each other)."""
MAX_ALIAS_NODES = 100_000
"""How many nodes aliases may add beyond the document's own (``*name`` repeats ``&name``'s subtree)."""
_MERGE_TAG = "tag:yaml.org,2002:merge"
BOUND_HINT = "no valid file of this kind needs that; write the document out plainly"


class DocumentRefused(yaml.YAMLError):  # type: ignore[misc]  # (yaml has no stubs here)
    """A YAML document past a bound (module docstring): a ``yaml.YAMLError``, so callers that
    catch those for a syntax error refuse it the same way."""

    def __init__(self, message: str, line: int | None = None, hint: str = BOUND_HINT) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.hint = hint


class BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]  # (yaml has no stubs here)
    """SafeLoader that counts nesting while composing and refuses duplicate keys."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise DocumentRefused(f"refused: nested deeper than {MAX_DEPTH} levels", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key, line = self.construct_object(key_node), key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # unhashable: the constructor refuses it with its own error
                continue
            if first is not None:
                raise DocumentRefused(
                    f"duplicate key {key!r} at lines {first} and {line} (the second would silently win)",
                    line,
                    hint="keep one of the two",
                )
            seen[key] = line
        return node


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: Any) -> tuple[int, int]:
    """(nodes written, nodes after alias expansion) of a composed YAML node graph: each distinct
    node is visited once (sizes memoised), so this is linear in the document, whatever it expands
    to. ``DocumentRefused`` for an alias inside its own anchor (a cycle)."""
    size: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            continue
        if key in size:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                raise DocumentRefused(
                    "refused: an alias refers to its own anchor (a cycle)", child.start_mark.line + 1
                )
            if id(child) not in size:
                stack.append((child, False))
    return len(size), size[id(root)]


def bounded_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, bounded (module docstring): whatever ``text`` holds, the result is
    a document or a ``yaml.YAMLError`` (``DocumentRefused`` for a bound), in time linear in it."""
    try:
        return _parse(text)
    except RecursionError:
        raise DocumentRefused("refused: nested too deeply to read") from None
    except ValueError as exc:  # a number past Python's int digit limit, say
        raise DocumentRefused(f"a value cannot be read: {exc}", hint="fix that value") from None


def _parse(text: str) -> Any:
    if len(text) > MAX_YAML_BYTES:
        raise DocumentRefused(f"refused: larger than {MAX_YAML_BYTES // 2**20} MiB")
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        written, expanded = expanded_size(node)
        if expanded - written > MAX_ALIAS_NODES:
            raise DocumentRefused(
                f"refused: its aliases expand it to {expanded:,} nodes from {written:,} "
                f"(at most {MAX_ALIAS_NODES:,} more are allowed)"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml_text(
    text: str, *, file: str, error: type[HarnessEvolveError] = SchemaError, field: str | None = None
) -> Any:
    """Parse YAML ``text`` read from ``file`` (named in any error), bounded as the module says."""
    try:
        return bounded_yaml(text)
    except DocumentRefused as exc:
        where = f"line {exc.line}" if exc.line is not None else field
        raise error(exc.message, file=file, field=where, hint=exc.hint) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else field
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(
            f"invalid YAML: {problem}", file=file, field=where, hint="fix the YAML syntax at that line"
        ) from None


def load_json_text(
    text: str | bytes,
    *,
    file: str,
    error: type[HarnessEvolveError] = SchemaError,
    max_bytes: int = MAX_JSON_BYTES,
    field: str | None = None,
) -> Any:
    """Parse JSON ``text`` read from ``file`` (named in any error): bounded in size; nesting past
    the recursion limit and numbers past the int digit limit are errors, never a crash."""
    if len(text) > max_bytes:
        raise error(f"refused: larger than {max_bytes // 2**20} MiB", file=file, field=field)
    try:
        return json.loads(text)
    except RecursionError:
        raise error(
            "nested too deeply to read (JSON nesting beyond Python's recursion limit)",
            file=file,
            field=field,
            hint="no valid file of this kind nests that deep; is it the right file?",
        ) from None
    except json.JSONDecodeError as exc:
        raise error(
            f"invalid JSON: {exc.msg}",
            file=file,
            field=field or f"line {exc.lineno}",
            hint="the file is not JSON; was it truncated?",
        ) from None
    except ValueError as exc:  # a number past the int digit limit; bytes that are not UTF-8
        raise error(f"invalid JSON: {exc}", file=file, field=field, hint="fix that value") from None


def read_bounded(
    path: Path, limit: int, *, error: type[HarnessEvolveError] = SchemaError, name: str | None = None
) -> str:
    """At most ``limit`` bytes of ``path`` as UTF-8 text; a longer file is refused unread."""
    return read_text(path, error=error, name=name, max_bytes=limit)


def read_yaml_file(
    path: Path, *, error: type[HarnessEvolveError] = SchemaError, name: str | None = None
) -> Any:
    """A YAML file, bounded (module docstring); errors name it (as ``name``, default the path)."""
    text = read_bounded(Path(path), MAX_YAML_BYTES, error=error, name=name)
    return load_yaml_text(text, file=name or str(path), error=error)


def read_json_file(
    path: Path,
    *,
    error: type[HarnessEvolveError] = SchemaError,
    name: str | None = None,
    max_bytes: int = MAX_JSON_BYTES,
) -> Any:
    """A JSON file, bounded (module docstring); errors name it (as ``name``, default the path)."""
    text = read_bounded(Path(path), max_bytes, error=error, name=name)
    return load_json_text(text, file=name or str(path), error=error, max_bytes=max_bytes)
