"""Harder variants of native task documents, for environment evolution (``run --evolve-environments``).

A variant is a new task document (``task.schema.json``) made from a parent task's document, one
difficulty level up; it is always a ``train`` task, so validation and test never change. Makers:

- ``chain`` (any single-turn task with its own tools off): the parent and ``level`` partner train
  tasks of other families become one task with several steps, in order: instructions numbered,
  set-up files merged (partners whose files collide are skipped), checks concatenated, gold calls
  concatenated before one ``submit``. At most one of the chained tasks may check the answer.
- ``more-mutations`` (tasks made by ``tasks synthesize``): one more AST mutation, in another
  function, on top of the parent's bug; the instruction lists the tests the combined bugs break
  (run in the sandbox) and the gold is the inverse patch of both.

Variants are deterministic for (parent, partners, seed); whether one is kept (its gold passes its
checker; the current harness fails it) is decided by the pipeline, which runs things.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import io
import random
import re
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnessevolve.sandbox.base import Sandbox
from harnessevolve.synth.mutate import Mutation, find_mutations
from harnessevolve.synth.task_writer import KeptMutant, call_depth, gold_hunks, task_document
from harnessevolve.synth.testrun import RUNNER_NAME, run_suite

Doc = dict[str, Any]
GENERATED_TAG = "generated"
_LEVEL = re.compile(r"^difficulty-(\d+)$")
_SUFFIX = re.compile(r"(\.(chain|more)-[0-9a-f]{6})+$")


@dataclass(frozen=True)
class Variant:
    doc: Doc
    parent: str
    maker: str
    difficulty: dict[str, int]

    @property
    def task_id(self) -> str:
        return str(self.doc["id"])


def level_of(doc: Doc) -> int:
    """The ``difficulty-N`` tag's N (1 when the task has none)."""
    for tag in doc.get("tags", []):
        found = _LEVEL.match(str(tag))
        if found:
            return int(found.group(1))
    return 1


def family_of(doc: Doc) -> str:
    tags = doc.get("tags") or []
    return str(tags[0]) if tags else "untagged"


def _variant_id(parent: str, maker: str, parts: Sequence[str]) -> str:
    digest = hashlib.sha256("|".join([parent, maker, *parts]).encode()).hexdigest()[:6]
    base = _SUFFIX.sub("", parent)
    return f"{base}.{maker}-{digest}"


def _gold(doc: Doc) -> list[dict[str, Any]]:
    if "gold_script" in doc:
        lines = [ln.strip() for ln in str(doc["gold_script"]).splitlines()]
        return [
            {"tool": "bash", "arguments": {"command": ln}} for ln in lines if ln and not ln.startswith("#")
        ]
    return [dict(g) for g in doc.get("gold", []) if g.get("tool") != "submit"]


def chainable(doc: Doc) -> bool:
    """Single-turn, no task tools, a gold solution, no Python checks: steps that can be run in order."""
    plain = not any(doc.get(k) for k in ("turns", "user", "tools", "mcp_servers", "tool_setup"))
    has_gold = bool(doc.get("gold") or doc.get("gold_script"))
    return plain and has_gold and all(c.get("type") in ("file", "command", "answer") for c in doc["checker"])


def chain(parent: Doc, pool: Sequence[Doc], *, seed: int) -> Variant | None:
    """``parent`` then partner tasks from ``pool`` (other families, no colliding files): one more
    partner per difficulty level. None when no such partners exist."""
    level = level_of(parent)
    rng = random.Random(f"chain:{seed}:{parent['id']}")
    files = dict(parent.get("setup", {}).get("files", {}))
    answers = sum(1 for c in parent["checker"] if c["type"] == "answer")
    family = family_of(parent)
    partners: list[Doc] = []
    for other in rng.sample(list(pool), len(pool)):
        if len(partners) == level:
            break
        if other["id"] == parent["id"] or family_of(other) == family or not chainable(other):
            continue
        theirs = other.get("setup", {}).get("files", {})
        their_answers = sum(1 for c in other["checker"] if c["type"] == "answer")
        if set(theirs) & set(files) or answers + their_answers > 1 or GENERATED_TAG in other.get("tags", []):
            continue
        partners.append(other)
        files.update(theirs)
        answers += their_answers
    if len(partners) < level or not chainable(parent):
        return None
    steps = [parent, *partners]
    answer_doc = next((d for d in steps if any(c["type"] == "answer" for c in d["checker"])), None)
    answer = str(answer_doc.get("answer", "done")) if answer_doc else "done"
    instruction = "Do these tasks, in this order:\n" + "\n".join(
        f"{i}. {str(d['instruction']).strip()}" for i, d in enumerate(steps, 1)
    )
    if answer_doc is not None:
        instruction += f"\nSubmit the answer that task {steps.index(answer_doc) + 1} asks for."
    new_level = level + 1
    doc: Doc = {
        "version": 1,
        "id": _variant_id(str(parent["id"]), "chain", [str(d["id"]) for d in partners]),
        "instruction": instruction,
        "split": "train",
        "tags": [
            family,
            GENERATED_TAG,
            f"difficulty-{new_level}",
            *[f"chained-{family_of(d)}" for d in partners],
        ],
        "setup": {
            "files": dict(sorted(files.items())),
            "commands": [c for d in steps for c in d.get("setup", {}).get("commands", [])],
        },
        "checker": [copy.deepcopy(c) for d in steps for c in d["checker"]],
        "gold": [g for d in steps for g in _gold(d)] + [{"tool": "submit", "arguments": {"answer": answer}}],
    }
    if answer_doc is not None and "answer" in answer_doc:
        doc["answer"] = answer
    if not doc["setup"]["commands"]:
        del doc["setup"]["commands"]
    return Variant(doc, str(parent["id"]), "chain", {"steps": len(steps), "level": new_level})


def _unpack(blob: str) -> dict[str, str]:
    with gzip.GzipFile(fileobj=io.BytesIO(base64.b64decode(blob))) as raw, tarfile.open(fileobj=raw) as tar:
        out = {}
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            if handle is not None:
                out[member.name] = handle.read().decode("utf-8")
        return out


_BLOB = re.compile(r"printf %s '([A-Za-z0-9+/=]+)'")


def synthesized_parts(doc: Doc) -> tuple[dict[str, str], dict[str, str], list[str]] | None:
    """(original files, pristine test files, stable test ids) of a ``tasks synthesize`` task, read
    back from its gold splice and its regression check; None for any other task."""
    if "swe-synth" not in doc.get("tags", []) or len(doc.get("checker", [])) != 2:
        return None
    gold = next((g for g in doc.get("gold", []) if g.get("tool") == "bash"), None)
    found = _BLOB.search(str(doc["checker"][1].get("run", "")))
    if gold is None or found is None:
        return None
    files = dict(doc.get("setup", {}).get("files", {}))
    for name, bad, good in gold_hunks(str(gold["arguments"].get("command", ""))):
        if name not in files or files[name].count(bad) != 1:
            return None
        files[name] = files[name].replace(bad, good, 1)
    packed = _unpack(found.group(1))
    stable = [ln for ln in packed.pop(".he_ids.txt", "").splitlines() if ln]
    packed.pop(RUNNER_NAME, None)
    return files, packed, stable


def _combine(
    original: dict[str, str], mutant: dict[str, str], hunks: list[tuple[str, str, str]], mutation: Mutation
) -> dict[str, str] | None:
    """The parent's mutant with ``mutation`` (a site of the original) added; None when it overlaps
    the parent's change or the splice would not be unique."""
    text = original[mutation.file]
    mine = [(f, bad, good) for f, bad, good in hunks if f == mutation.file]
    for _, _, good in mine:
        start = text.find(good)
        if start < 0 or (start < mutation.end and mutation.start < start + len(good)):
            return None
    mutated = text[: mutation.start] + mutation.replacement + text[mutation.end :]
    for _, bad, good in mine:
        if mutated.count(good) != 1:
            return None
        mutated = mutated.replace(good, bad, 1)
    return {**mutant, mutation.file: mutated}


async def more_mutations(
    parent: Doc, *, seed: int, timeout_s: float = 60.0, sandbox: Sandbox | None = None, tries: int = 8
) -> Variant | None:
    """The parent's bug plus one more elsewhere in the source (not overlapping the parent's change)
    that breaks more tests (checked by running the suite in the sandbox). None when no such
    mutation is found in ``tries`` suite runs."""
    parts = synthesized_parts(parent)
    if parts is None:
        return None
    original, test_files, stable = parts
    target = _BLOB.search(str(parent["checker"][0].get("run", "")))
    parent_failing = set(_unpack(target.group(1)).get(".he_ids.txt", "").split()) if target else set()
    repo_name = str(parent["tags"][2]) if len(parent.get("tags", [])) > 2 else "repo"
    hunks = gold_hunks(str(next(g for g in parent["gold"] if g["tool"] == "bash")["arguments"]["command"]))
    mutant_now = dict(parent["setup"]["files"])
    rng = random.Random(f"more:{seed}:{parent['id']}")
    sources = sorted(n for n in original if n.endswith(".py") and n not in test_files and n != "setup.py")
    pool = [m for n in sources for m in find_mutations(n, original[n])]
    rng.shuffle(pool)
    tried = 0
    for mutation in pool:
        if tried >= tries:
            break
        combined = _combine(original, mutant_now, hunks, mutation)
        if combined is None:
            continue
        tried += 1
        run = await run_suite(combined, timeout_s=timeout_s, sandbox=sandbox)
        if run.error:
            continue
        failing = tuple(sorted(t for t in stable if t not in run.passing()))
        if not failing or set(failing) <= parent_failing or len(failing) > 0.5 * len(stable):
            continue
        details = {t: run.outcomes[t].detail for t in failing if t in run.outcomes}
        level = level_of(parent) + 1
        kept = KeptMutant(
            task_id=_variant_id(str(parent["id"]), "more", [mutation.describe()]),
            mutations=(mutation,),
            failing=failing,
            details=details,
            call_depth=call_depth(details.get(failing[0], ""), sources),
        )
        doc = task_document(
            kept,
            files=original,
            test_files=test_files,
            stable_passing=stable,
            split="train",
            repo_name=repo_name,
            mutant=combined,
            touched={f for f, _, _ in hunks} | {mutation.file},
        )
        doc["tags"] = [family_of(parent), "swe-synth", repo_name, GENERATED_TAG, f"difficulty-{level}"]
        return Variant(
            doc, str(parent["id"]), "more-mutations", {"mutations": level, "failing_tests": len(failing)}
        )
    return None
