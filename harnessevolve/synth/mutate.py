"""AST-level mutation sites in Python source, applied as text splices.

A ``Mutation`` replaces one span of one file (``start``/``end`` are character offsets into the
file's text) with new text; everything outside the span keeps its bytes, so a mutant differs from
the original by exactly the lines the span covers. ``find_mutations`` lists every site in a file in
source order (deterministic); ``apply`` splices one or several non-overlapping mutations.

Operators (``Mutation.operator``; the first word is its family):

- ``compare-flip``: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``is`` <-> ``is not``,
  ``in`` <-> ``not in``;
- ``arith-swap``: ``+`` <-> ``-``, ``*`` -> ``//``, ``//`` -> ``*``, ``%`` -> ``//``;
- ``bool-swap``: ``and`` <-> ``or``;
- ``off-by-one``: an integer constant in a comparison, a subscript or a ``range()`` call, +1 or -1;
- ``drop-statement``: an expression, assignment or ``raise`` statement becomes ``pass``;
- ``drop-branch``: an ``if`` condition becomes ``False`` (its body never runs);
- ``negate-condition``: an ``if``/``while`` condition ``c`` becomes ``not (c)``;
- ``swap-args``: the first two positional arguments of a call trade places.

Only single-line expressions are rewritten (a statement drop may span lines), and docstrings,
``__all__`` and imports are never touched.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

_COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_ARITH = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_BOOL = {ast.And: ast.Or, ast.Or: ast.And}


@dataclass(frozen=True)
class Mutation:
    file: str
    """Path of the file, relative to the repository root (POSIX)."""
    line: int
    """1-based first line of the span."""
    start: int
    end: int
    original: str
    replacement: str
    operator: str
    function: str
    """The enclosing function (``Class.method``), or ``<module>``."""

    def describe(self) -> str:
        change = f"{self.original.strip()!r} -> {self.replacement.strip()!r}"
        return f"{self.file}:{self.line} {self.operator}: {change}"


class _Offsets:
    """Line/column (UTF-8 bytes, as ``ast`` gives them) -> character offset into the text."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def at(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _single_line(node: ast.AST) -> bool:
    return getattr(node, "lineno", 0) == getattr(node, "end_lineno", -1)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


class _Finder(ast.NodeVisitor):
    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.offsets = _Offsets(text)
        self.scope: list[str] = []
        self.found: list[Mutation] = []

    # -- helpers -------------------------------------------------------------------------------
    def _span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offsets.at(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offsets.at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def _add(self, node: ast.AST, replacement: str, operator: str) -> None:
        start, end = self._span(node)
        original = self.text[start:end]
        if original == replacement:
            return
        self.found.append(
            Mutation(
                file=self.file,
                line=node.lineno,  # type: ignore[attr-defined]
                start=start,
                end=end,
                original=original,
                replacement=replacement,
                operator=operator,
                function=".".join(self.scope) or "<module>",
            )
        )

    def _rewrite(self, node: ast.expr, change: type, operator: str) -> None:
        if not _single_line(node):
            return
        copy = ast.parse(ast.unparse(node), mode="eval").body
        change_node(copy, change)
        self._add(node, ast.unparse(copy), operator)

    # -- scopes --------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self._statements(node.body)
        for child in node.body:
            self.visit(child)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        for child in node.body:
            self.visit(child)
        self.scope.pop()

    def visit_Import(self, node: ast.AST) -> None:
        return

    visit_ImportFrom = visit_Import

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return
        self.generic_visit(node)

    # -- statements ----------------------------------------------------------------------------
    def _statements(self, body: Sequence[ast.stmt]) -> None:
        """``drop-statement`` sites in a function body of two statements or more."""
        if len(body) < 2:
            return
        for stmt in body:
            if _is_docstring(stmt) or not isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.Raise)):
                continue
            indent = self.offsets.lines[stmt.lineno - 1][: stmt.col_offset]
            if indent.strip():  # several statements on one line (``a; b``): leave them
                continue
            self._add(stmt, "pass", "drop-statement")

    def visit_If(self, node: ast.If) -> None:
        if _single_line(node.test):
            self._add(node.test, "False", "drop-branch")
            self._add(node.test, f"not ({ast.get_source_segment(self.text, node.test)})", "negate-condition")
        self._statements(node.body)
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        if _single_line(node.test):
            self._add(node.test, f"not ({ast.get_source_segment(self.text, node.test)})", "negate-condition")
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._statements(node.body)
        self.generic_visit(node)

    # -- expressions ---------------------------------------------------------------------------
    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            self._rewrite(node, _COMPARE[type(node.ops[0])], "compare-flip")
        for value in node.comparators:
            self._off_by_one(value)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if type(node.op) in _ARITH and not _is_string_format(node):
            self._rewrite(node, _ARITH[type(node.op)], "arith-swap")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self._rewrite(node, _BOOL[type(node.op)], "bool-swap")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        parts = [index.lower, index.upper] if isinstance(index, ast.Slice) else [index]
        for part in parts:
            if part is not None:
                self._off_by_one(part)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "range":
            for arg in node.args:
                self._off_by_one(arg)
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        if len(positional) == len(node.args) >= 2 and _single_line(node):
            first, second = node.args[0], node.args[1]
            a, b = ast.get_source_segment(self.text, first), ast.get_source_segment(self.text, second)
            if a is not None and b is not None and a != b:
                start, _ = self._span(first)
                _, end = self._span(second)
                between = self.text[self._span(first)[1] : self._span(second)[0]]
                self.found.append(
                    Mutation(
                        file=self.file,
                        line=node.lineno,
                        start=start,
                        end=end,
                        original=self.text[start:end],
                        replacement=b + between + a,
                        operator="swap-args",
                        function=".".join(self.scope) or "<module>",
                    )
                )
        self.generic_visit(node)

    def _off_by_one(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and type(node.value) is int and _single_line(node):
            for delta in (1, -1):
                if node.value + delta >= 0:
                    self._add(node, str(node.value + delta), "off-by-one")


def _is_string_format(node: ast.BinOp) -> bool:
    """``"..." % x`` and ``"a" + "b"``: string operations, whose mutants only break messages."""
    return any(
        isinstance(side, ast.Constant) and isinstance(side.value, str) for side in (node.left, node.right)
    )


def change_node(node: ast.expr, change: type) -> None:
    """Replace the top operator of ``node`` (a Compare, BinOp or BoolOp) with ``change``."""
    if isinstance(node, ast.Compare):
        node.ops = [change()]
    elif isinstance(node, (ast.BinOp, ast.BoolOp)):
        node.op = change()


def find_mutations(file: str, text: str) -> list[Mutation]:
    """Every mutation site in ``text`` (the content of ``file``), in source order.

    A file that does not parse has none. Mutants that would not parse are left out.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    finder = _Finder(file, text)
    for stmt in tree.body:
        if not _is_docstring(stmt):
            finder.visit(stmt)
    seen: set[tuple[int, int, str]] = set()
    out = []
    for m in sorted(finder.found, key=lambda m: (m.start, m.end, m.operator, m.replacement)):
        key = (m.start, m.end, m.replacement)
        if key in seen:
            continue
        seen.add(key)
        try:
            ast.parse(apply(text, [m]))
        except SyntaxError:
            continue
        out.append(m)
    return out


def overlaps(a: Mutation, b: Mutation) -> bool:
    return a.file == b.file and a.start < b.end and b.start < a.end


def apply(text: str, mutations: Sequence[Mutation]) -> str:
    """``text`` with every mutation spliced in (they must not overlap; order does not matter)."""
    for m in sorted(mutations, key=lambda m: m.start, reverse=True):
        text = text[: m.start] + m.replacement + text[m.end :]
    return text


def changed_span(a: Sequence[str], b: Sequence[str]) -> tuple[int, int]:
    """(common leading lines, common trailing lines) of two line lists: what lies between differs."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def changed_lines(original: str, mutant: str) -> tuple[str, str]:
    """The smallest run of whole lines that differs: (original lines, mutant lines), each ending
    in a newline when the file's did."""
    a, b = original.splitlines(keepends=True), mutant.splitlines(keepends=True)
    head, tail = changed_span(a, b)
    return "".join(a[head : len(a) - tail]), "".join(b[head : len(b) - tail])
