"""Copying namespaces between backends (``memcurator copy``, memcurator.store.transfer) and the
``memcurator migrate`` command: SQLite -> PostgreSQL -> SQLite gives back the same entries
(ids, counts, vectors exactly, metadata), decision log and policy state."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memcurator import Memory
from memcurator.cli import app
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.store import open_store
from memcurator.store.transfer import copy_store

EMB = HashingEmbedder(dim=64)


def _fill(path: str) -> None:
    a = Memory(path, namespace="a", policy="lru", max_bytes=3_000, embedder=EMB, seed=3)
    for i in range(12):
        a.write(f"Task: orders of customer {i}\nAction: SELECT {i};", meta={"i": i, "u": "é"})
    r = a.recall("orders of customer 11", k=2)
    a.feedback(r, 1.0)
    a.forget(a.entries()[0].id)
    a.close()
    b = Memory(path, namespace="b", policy="curator", embedder=EMB, vector_dtype="float16")
    b.write("Task: list staff hired in 2001\nAction: SELECT name FROM staff;")
    b.close()


def _snapshot(path: str) -> dict[str, object]:
    s = open_store(path)
    out: dict[str, object] = {}
    for ns in s.namespaces():
        info = s.namespace(ns)
        out[ns] = (
            (info.embedder, info.dim, info.max_bytes, info.vector_dtype),
            [
                (e.id, e.kind, e.text, e.bytes, e.raw_bytes, e.embedding.tobytes(), e.origin)
                + (e.origin_detail, e.reinforcement, e.uses, e.successes, e.failures)
                + (e.created_step, e.last_used_step, e.meta, e.stats)
                for e in s.entries(ns)
            ],
            [
                (d.step, d.action, d.entry_id, None if math.isnan(d.score) else d.score)
                + (d.reason, d.policy, d.bytes, d.at)
                for d in s.decisions(ns)
            ],
            s.load_state(ns),
        )
    s.close()
    return out


def test_sqlite_to_postgres_to_sqlite_is_exact(tmp_path: Path, pg_url: str) -> None:
    src = str(tmp_path / "src.sqlite")
    _fill(src)
    runner = CliRunner()
    r = runner.invoke(app, ["copy", src, pg_url])
    assert r.exit_code == 0, r.output
    back = str(tmp_path / "back.sqlite")
    r = runner.invoke(app, ["copy", pg_url, back, "--via", str(tmp_path / "dump.jsonl")])
    assert r.exit_code == 0, r.output
    want = _snapshot(src)
    assert _snapshot(pg_url) == want
    assert _snapshot(back) == want
    assert (tmp_path / "dump.jsonl").read_text().startswith('{"type": "memcurator-store"')
    # the copy is a working memory: it recalls and keeps its budget on the new backend
    m = Memory(pg_url, namespace="a", policy="lru", embedder=EMB)
    assert (
        m.recall("orders of customer 11", k=1)
        .entries[0]
        .text.startswith("Task: orders of customer 11")
    )
    vec = open_store(back).entries("b")[0].embedding
    assert vec.dtype == np.float32 and np.array_equal(vec, vec.astype(np.float16))


def test_copy_refuses_a_namespace_that_exists(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")
    _fill(src)
    copy_store(open_store(src), open_store(dst))
    before = _snapshot(dst)
    with pytest.raises(InvalidInput, match="already exists"):
        copy_store(open_store(src), open_store(dst), ["a"])
    assert _snapshot(dst) == before
    r = CliRunner().invoke(app, ["copy", src, dst])
    assert r.exit_code != 0 and "already exists" in r.output


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migrate_is_idempotent(backend: str, store_target: Callable[[str], str]) -> None:
    target = store_target(backend)
    runner = CliRunner()
    first = runner.invoke(app, ["migrate", target])
    assert first.exit_code == 0 and "schema version 0 ->" in first.output, first.output
    again = runner.invoke(app, ["migrate", target])
    assert again.exit_code == 0 and "up to date" in again.output
    assert open_store(target).namespaces() == []
