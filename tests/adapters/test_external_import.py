"""Adapters named by reference: two benchmark folders that each hold a ``loader.py`` get their own."""

from __future__ import annotations

import sys

from harnessevolve.adapters.external import import_adapter

ADAPTER = """
class {cls}:
    name = "{name}"

    def detect(self, spec):
        return False

    def load(self, spec):
        return []
"""


def test_two_folders_with_a_module_of_one_name_each_get_their_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "loader", raising=False)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "loader.py").write_text(ADAPTER.format(cls="First", name="first"))
    (second / "loader.py").write_text(ADAPTER.format(cls="Second", name="second"))
    assert import_adapter("loader:First", search=(str(first),)).name == "first"
    assert import_adapter("loader:Second", search=(str(second),)).name == "second"
    # the same folder again reuses what is already imported
    assert import_adapter("loader:Second", search=(str(second),)).name == "second"
    monkeypatch.delitem(sys.modules, "loader", raising=False)
