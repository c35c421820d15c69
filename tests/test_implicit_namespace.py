"""Leaving out ``namespace=`` must not silently share one memory between callers (issue 31,
item 5). The kind: implicit shared state a caller did not ask for. The library warns
(:class:`SharedNamespaceWarning`) when a handle opened without a namespace finds the implicit
``"default"`` namespace in use; an explicit namespace (``"default"`` included) never warns."""

from __future__ import annotations

import gc
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from memcurator import Memory
from memcurator.errors import SharedNamespaceWarning
from memcurator.store import open_store

TEXT = "Task: count rows of t\nAction: SELECT COUNT(*) FROM t;"


def _quiet(**kw: object) -> Memory:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedNamespaceWarning)
        return Memory(**kw)  # type: ignore[arg-type]


def test_two_handles_of_one_file_without_namespace_warn(tmp_path: Path) -> None:
    db = str(tmp_path / "a.sqlite")
    first = _quiet(path=db)  # a new file, nobody else: silent
    with pytest.warns(SharedNamespaceWarning, match="1 other open handle"):
        second = Memory(db)
    first.write(TEXT)
    assert len(second) == 1  # what the warning says: they share
    first.close()
    second.close()


def test_reopening_a_file_whose_default_holds_entries_warns(tmp_path: Path) -> None:
    db = str(tmp_path / "b.sqlite")
    m = _quiet(path=db)
    m.write(TEXT)
    m.close()
    del m
    gc.collect()
    with pytest.warns(SharedNamespaceWarning, match="1 entries already in it"):
        Memory(db).close()


def test_another_process_wrote_the_default_namespace(tmp_path: Path) -> None:
    db = str(tmp_path / "c.sqlite")
    code = (
        "import warnings; from memcurator import Memory\n"
        f"m = Memory({db!r}); m.write({TEXT!r}); m.close()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.warns(SharedNamespaceWarning):
        Memory(db).close()


@pytest.mark.parametrize("ns", ["default", "agent-1"])
def test_an_explicit_namespace_never_warns(tmp_path: Path, ns: str) -> None:
    db = str(tmp_path / "d.sqlite")
    a = _quiet(path=db, namespace=ns)
    a.write(TEXT)
    b = _quiet(path=db, namespace=ns)
    assert len(b) == 1
    a.close()
    b.close()


def test_separate_namespaces_stay_apart_and_quiet(tmp_path: Path) -> None:
    db = str(tmp_path / "e.sqlite")
    a = _quiet(path=db, namespace="agent-1")
    b = _quiet(path=db, namespace="agent-2")
    a.write(TEXT)
    assert len(b) == 0
    a.close()
    b.close()


def test_private_in_memory_stores_are_not_shared() -> None:
    a = _quiet()
    a.write(TEXT)
    b = _quiet()
    assert len(b) == 0


def test_one_store_object_shared_by_two_implicit_memories_warns(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "f.sqlite"))
    first = _quiet(store=store)
    with pytest.warns(SharedNamespaceWarning):
        second = Memory(store=store)
    first.write(TEXT)
    assert len(second) == 1


def test_the_readme_quickstart_is_quiet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # run twice: the second run finds the first one's entries
        mem = _quiet(path="agent.sqlite", namespace="agent-1", policy="curator", max_bytes=200_000)
        mem.write(TEXT)
        mem.close()
