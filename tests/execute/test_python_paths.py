"""The folders a sandboxed Python process is shown (sandbox/python_paths.py): the environment, and
site folders outside it (a user site, a venv extended by a .pth file); never the current directory
or other path entries."""

from __future__ import annotations

import sys

from harnessevolve.sandbox import python_paths


def test_site_folders_outside_the_environment_are_shown_and_nothing_else(tmp_path, monkeypatch):
    site = tmp_path / "other-venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    inside = tmp_path / "env" / "lib" / "site-packages"
    inside.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "env"))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    entries = ["", str(checkout), str(inside), str(site), "/usr/lib/python3/dist-packages"]
    monkeypatch.setattr(sys, "path", entries)
    assert python_paths.environment_roots() == [str(tmp_path / "env")]
    assert python_paths.python_roots() == [str(tmp_path / "env"), str(site)]
    assert str(checkout) not in python_paths.python_roots()


def test_a_missing_site_folder_is_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path / "gone" / "site-packages")])
    assert python_paths.extra_site_dirs() == []
