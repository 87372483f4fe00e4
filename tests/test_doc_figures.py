"""Every measured figure the README and docs quote from a committed result file under
benchmarks/perf/results/ agrees with that file: an explicit table of (page, the sentence as the
page says it with each figure a `{}`, the result file, and for each `{}` the key path in that file
and its format). A figure edited on the page, or a result file re-run, fails here until both agree."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "benchmarks" / "perf" / "results"

FULLTEST = "efficacy-nl2bash-0.5b-fulltest-2026-12-05.json"
ANSWER_CHECK = "efficacy-nl2bash-1.5b-answer-check-2026-12-05.json"
BESTOFK_15 = "efficacy-nl2bash-1.5b-bestofk-2026-12-04.json"
WIDENED_15 = "efficacy-nl2bash-1.5b-2026-12-04.json"
BESTOFK_05 = "efficacy-nl2bash-0.5b-bestofk-2026-12-04.json"
GEPA_05 = "efficacy-nl2bash-0.5b-gepa-2026-12-04.json"
IDLE_05 = "efficacy-nl2bash-0.5b-2026-12-04.json"
LOOP_05 = "efficacy-nl2bash-0.5b-loop.json"
ABLATION = "component_ablation-nl2bash-1.5b.json"

HE = "seeds.*.harnessevolve.gain_pts"
"""The evolve arm's test gain per seed, in points."""

# (page, text with a `{}` per figure, result file, [(key path, format), ...]). A key path is
# dot-separated; `*` maps over a list; a last `|mean`, `|sd` (sample) or `|*N` (times N) reduces.
FIGURES: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    # docs/compare.md, "Earlier measurements with efficacy.py": the rows README quoted before its
    # efficacy figures came from compare (moved there verbatim), and README's ablation row
    (
        "docs/compare.md",
        "one-sitting run of the same configuration in the archive below ({} ± {}: {}, {}, {})",
        FULLTEST,
        [(HE + "|mean", "+.1f"), (HE + "|sd", ".1f")]
        + [(f"seeds.{i}.harnessevolve.gain_pts", ".1f") for i in range(3)],
    ),
    (
        "docs/compare.md",
        "8 validation tasks; {}; machine running nothing else, load 0.0-0.1 before the launch, "
        "{} at the script's start, "
        "about 2 with its two one-thread jobs, {} at the end; 2026-12-05)",
        FULLTEST,
        [("wall_min", ".1f min"), ("load_average.start.0", ".1f"), ("load_average.end.0", ".1f")],
    ),
    (
        "docs/compare.md",
        "default arm **{} ± {} points** ({}, {}, {}: 0 -> 9, 10, 9 of 53 on test; {} rollouts each)",
        FULLTEST,
        [
            (HE + "|mean", "+.1f"),
            (HE + "|sd", ".1f"),
            ("seeds.0.harnessevolve.gain_pts", "+.1f"),
            ("seeds.1.harnessevolve.gain_pts", "+.1f"),
            ("seeds.2.harnessevolve.gain_pts", "+.1f"),
            ("seeds.0.harnessevolve.rollouts", "d"),
        ],
    ),
    (
        "docs/compare.md",
        "seeds 0-1 {} min, seed 2 with best-of-k beside it {} min; "
        "load {} and {} at the starts, {} and {} at the ends,",
        ANSWER_CHECK,
        [
            ("merged_from.0.wall_min", ".1f"),
            ("merged_from.1.wall_min", ".1f"),
            ("merged_from.0.load_average.start.0", ".1f"),
            ("merged_from.1.load_average.start.0", ".1f"),
            ("merged_from.0.load_average.end.0", ".1f"),
            ("merged_from.1.load_average.end.0", ".1f"),
        ],
    ),
    (
        "docs/compare.md",
        "default arm **{}, {}, {} points** (0 -> 2 of 12 on test each seed, {} rollouts)",
        ANSWER_CHECK,
        [(f"seeds.{i}.harnessevolve.gain_pts", "+.1f") for i in range(3)]
        + [("seeds.0.harnessevolve.rollouts", "d")],
    ),
    (
        "docs/compare.md",
        "Best-of-5 (sc) at {} rollouts on seed 2: {} (pass@5 oracle {})",
        ANSWER_CHECK,
        [
            ("seeds.2.best-of-k (sc).rollouts", "d"),
            ("seeds.2.best-of-k (sc).gain_pts", "+.1f"),
            ("seeds.2.best-of-k (pass@k oracle).gain_pts", "+.1f"),
        ],
    ),
    (
        "docs/compare.md",
        "(2 generations, batch 8, 8 validation / 12 test tasks; "
        "load {}–{}, tests beside it part of the time; 2026-12-04)",
        BESTOFK_15,
        [("load_average.start.0", ".2f"), ("load_average.end.0", ".1f")],
    ),
    (
        "docs/compare.md",
        "default arm **{} ± {} points** (0 of 12 on test, every seed; 56–64 rollouts); "
        "best-of-5 ({} rollouts) sc **{} ± {}**, pass@k oracle {} ± {}.",
        BESTOFK_15,
        [
            (HE + "|mean", "+.1f"),
            (HE + "|sd", ".1f"),
            ("seeds.0.best-of-k (sc).rollouts", "d"),
            ("seeds.*.best-of-k (sc).gain_pts|mean", "+.1f"),
            ("seeds.*.best-of-k (sc).gain_pts|sd", ".1f"),
            ("seeds.*.best-of-k (pass@k oracle).gain_pts|mean", "+.1f"),
            ("seeds.*.best-of-k (pass@k oracle).gain_pts|sd", ".1f"),
        ],
    ),
    (
        "docs/compare.md",
        "(default arm only, load {}–{}): **{} ± {}** ({}, {}, {})",
        WIDENED_15,
        [
            ("load_average.end.0", ".1f"),
            ("load_average.start.0", ".1f"),
            (HE + "|mean", "+.1f"),
            (HE + "|sd", ".1f"),
        ]
        + [(f"seeds.{i}.harnessevolve.gain_pts", "+.1f") for i in range(3)],
    ),
    (
        "docs/compare.md",
        "(2 generations, batch 8, 8 validation / 12 test tasks; load {}–{}; 2026-12-04) | "
        "`efficacy.py --arms bestofk` | default arm **{} ± {} points** (2 of 12 on test in every seed, "
        "{} rollouts); best-of-5 of the seed harness ({} rollouts) **{}**",
        BESTOFK_05,
        [
            ("load_average.start.0", ".2f"),
            ("load_average.end.0", ".1f"),
            (HE + "|mean", "+.1f"),
            (HE + "|sd", ".1f"),
            ("seeds.0.harnessevolve.rollouts", "d"),
            ("seeds.0.best-of-k (sc).rollouts", "d"),
            ("seeds.*.best-of-k (sc).gain_pts|mean", "+.1f"),
        ],
    ),
    (
        "docs/compare.md",
        "GEPA at {} rollouts (1.5B reflector) **{}** (`--arms gepa --budget 112`",
        GEPA_05,
        [("summary.gepa_rollouts", ".0f"), ("summary.gepa_gain", "+.1f")],
    ),
    (
        "docs/compare.md",
        "(2 generations, batch 8, 8 validation / 12 test tasks; load {}–{}; 2026-12-04) | "
        "`efficacy.py --arms ''` | default arm **{} ± {} points**",
        IDLE_05,
        [
            ("load_average.start.0", ".1f"),
            ("load_average.end.0", ".1f"),
            (HE + "|mean", "+.1f"),
            (HE + "|sd", ".1f"),
        ],
    ),
    (
        "docs/compare.md",
        "default arm **{} ± {} points** ({}, {}, {}: 0, 2, 2 of 12 on test)",
        LOOP_05,
        [(HE + "|mean", "+.1f"), (HE + "|sd", ".1f")]
        + [(f"seeds.{i}.harnessevolve.gain_pts", "+.1f") for i in range(3)],
    ),
    (
        "README.md",
        "base {}/18, memory {}/18, recovery {}/18, progress {}/18, world model {}/18",
        ABLATION,
        [
            (f"arms.{arm}.pass_rate_mean|*18", ".0f")
            for arm in ("base", "memory", "recovery", "progress", "world_model")
        ],
    ),
    # docs/compare.md, the same runs' loads and times
    (
        "docs/compare.md",
        "Seeds 0-1: {} minutes, load average {} at the start, 1-2.4 while it ran and {} at the end",
        ANSWER_CHECK,
        [
            ("merged_from.0.wall_min", ".1f"),
            ("merged_from.0.load_average.start.0", ".1f"),
            ("merged_from.0.load_average.end.0", ".1f"),
        ],
    ),
    (
        "docs/compare.md",
        "Seed 2: {} minutes, load {} at the start, 1.3-{} later",
        ANSWER_CHECK,
        [
            ("merged_from.1.wall_min", ".1f"),
            ("merged_from.1.load_average.start.0", ".1f"),
            ("merged_from.1.load_average.end.0", ".1f"),
        ],
    ),
    (
        "docs/compare.md",
        "load average 0.0-0.1 before the launch, {} recorded by the script once it had started, "
        "about 2 while its two one-thread jobs ran, {} at the end",
        FULLTEST,
        [("load_average.start.0", ".1f"), ("load_average.end.0", ".1f")],
    ),
]


def value_at(data: object, path: str) -> float:
    """The number at a key path (see FIGURES)."""
    keys, _, reduce = path.partition("|")
    values = [data]
    for key in keys.split("."):
        if key == "*":
            values = [item for value in values for item in value]  # type: ignore[union-attr]
        else:
            values = [value[int(key)] if isinstance(value, list) else value[key] for value in values]  # type: ignore[index]
    numbers = [float(v) for v in values]  # type: ignore[arg-type]
    if reduce == "mean":
        return statistics.mean(numbers)
    if reduce == "sd":
        return statistics.stdev(numbers)
    (number,) = numbers
    return number * float(reduce[1:]) if reduce.startswith("*") else number


def rendered(template: str, data: object, figures: list[tuple[str, str]]) -> str:
    texts = []
    for path, spec in figures:
        number = value_at(data, path) + 0.0  # no -0.0
        fmt, _, unit = spec.partition(" ")
        text = format(int(round(number)) if fmt == "d" else number, fmt)
        texts.append(f"{text} {unit}".rstrip() if unit else text)
    return template.format(*texts)


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize(
    ("page", "template", "result", "figures"), FIGURES, ids=[f"{p}:{r}" for p, _, r, _ in FIGURES]
)
def test_a_quoted_figure_agrees_with_its_result_file(page: str, template: str, result: str, figures) -> None:
    data = json.loads((RESULTS / result).read_text(encoding="utf-8"))
    expected = rendered(template, data, figures)
    said = flat((ROOT / page).read_text(encoding="utf-8"))
    assert flat(expected) in said, f"{page} should say, from {result}:\n{expected}"


def test_every_result_file_named_in_the_readme_is_checked() -> None:
    named = set(re.findall(r"benchmarks/perf/results/([\w.-]+\.json)", (ROOT / "README.md").read_text()))
    named |= set(
        re.findall(r"`((?:efficacy|component_ablation)[\w.-]+\.json)`", (ROOT / "README.md").read_text())
    )
    checked = {result for _, _, result, _ in FIGURES}
    assert named - checked == set(), named - checked


def test_readme_quotes_no_efficacy_py_figure() -> None:
    """README's efficacy figures come from compare cells (its compare-table blocks); the one-process
    efficacy.py's rows and result files are named only in docs/compare.md's archive."""
    readme = (ROOT / "README.md").read_text()
    assert not re.search(r"efficacy-[\w.-]+\.json", readme)
    assert "`efficacy.py --" not in readme
    archive = (ROOT / "docs" / "compare.md").read_text()
    heading = "## Earlier measurements with efficacy.py, before compare; not reproducible by compare"
    assert heading in archive
    after = archive[archive.index(heading) :]
    for _page, template, _result, _figures in FIGURES:
        if _page == "docs/compare.md" and "`efficacy.py" in template:
            assert flat(template.split("{}")[0]) in flat(after)


def test_the_check_fails_on_a_figure_that_disagrees() -> None:
    data = {"seeds": [{"harnessevolve": {"gain_pts": g}} for g in (16.98, 18.87, 16.98)], "load": [0.83]}
    assert rendered(
        "**{} ± {}** at load {}", data, [(HE + "|mean", "+.1f"), (HE + "|sd", ".1f"), ("load.0", ".1f")]
    ) == ("**+17.6 ± 1.1** at load 0.8")
    assert value_at({"a": [{"p": 0.5}]}, "a.0.p|*18") == 9.0
    with pytest.raises(KeyError):
        value_at(data, "seeds.0.harnessevolve.tokens")
