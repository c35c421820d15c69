"""Faults a governance layer must survive: bad input, bad numbers, bad ids, other processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from memcurator import BudgetExceeded, Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import DimensionMismatch, EntryNotFound, InvalidInput, MemcuratorError
from memcurator.policy.base import Policy
from memcurator.types import Entry, Trajectory


def small(policy: str = "lru", **kw) -> Memory:
    return Memory(policy=policy, embedder=HashingEmbedder(dim=32), **kw)


def nothing_happened(mem: Memory) -> bool:
    return len(mem) == 0 and mem.decisions() == [] and mem.used_bytes == 0


# --------------------------------------------------------------------------- text
@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n", b"", b"   ", "\u3000"])
def test_empty_or_whitespace_text(text) -> None:
    mem = small()
    with pytest.raises(InvalidInput, match="empty"):
        mem.write(text)
    assert nothing_happened(mem)


def test_text_larger_than_whole_budget() -> None:
    mem = small(max_bytes=1000)
    with pytest.raises(BudgetExceeded, match="can never fit") as ei:
        mem.write("Task: big\nAction: " + "x" * 5000)
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, MemcuratorError)
    assert len(mem) == 0 and mem.used_bytes == 0
    (rej,) = mem.decisions()
    assert rej.action == "reject" and rej.bytes > 1000 and "max_bytes=1000" in rej.reason


def test_text_over_max_text_bytes() -> None:
    mem = small(max_text_bytes=100)
    with pytest.raises(InvalidInput, match="max_text_bytes=100"):
        mem.write("é" * 60)  # 120 UTF-8 bytes
    assert nothing_happened(mem)


@pytest.mark.parametrize("raw", [b"Task: \xff\xfe broken", b"\xc3\x28", b"Action: \xed\xa0\x80"])
def test_invalid_utf8_bytes(raw: bytes) -> None:
    mem = small()
    with pytest.raises(InvalidInput, match="UTF-8"):
        mem.write(raw)
    assert nothing_happened(mem)


@pytest.mark.parametrize("bad", ["Task: lone \ud800 surrogate", 42, None, ["Task: x"]])
def test_invalid_unicode_or_type(bad) -> None:
    mem = small()
    with pytest.raises(InvalidInput):
        mem.write(bad)
    assert nothing_happened(mem)


# --------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("reward", [float("nan"), float("inf"), -float("inf"), -0.01, 1.01])
def test_bad_reward_is_refused_and_nothing_updates(reward: float) -> None:
    mem = small(policy="curator")
    r = mem.write("Task: count rows\nAction: SELECT COUNT(*) FROM t;")
    before = (mem.get(r.id).uses, dict(mem.get(r.id).stats), mem.policy.scorer.helpfulness.state())
    with pytest.raises(InvalidInput, match="reward"):
        mem.feedback([r.id], reward)
    after = (mem.get(r.id).uses, dict(mem.get(r.id).stats), mem.policy.scorer.helpfulness.state())
    assert after == before
    stored = mem.store.get(mem.namespace, r.id)
    assert stored.uses == 0 and stored.stats == before[1]
    with pytest.raises(InvalidInput):
        Trajectory("t", reward=reward)


class NaNPolicy(Policy):
    """Scores one entry NaN everywhere: it must never be ranked in recall, and go last in Keep."""

    name = "nan-stub"

    def _score(self, entries: list[Entry]) -> np.ndarray:
        return np.array(
            [
                np.nan if "poisoned-number" in m.text else 1.0 + 1e-3 * i
                for i, m in enumerate(entries)
            ]
        )

    def rerank(self, candidates, cosine, e_q, step):
        return self._score(candidates)

    def priority(self, entries, E, step):
        return self._score(entries)


def test_nan_scores_are_never_ranked_or_stored() -> None:
    mem = Memory(policy=NaNPolicy(), max_bytes=10**6, embedder=HashingEmbedder(dim=32))
    bad = mem.write("Task: poisoned-number row count\nAction: SELECT 1;")
    good = mem.write("Task: row count of orders\nAction: SELECT COUNT(*) FROM orders;")
    res = mem.recall("poisoned-number row count", k=5)
    assert bad.id not in res.ids and res.ids == [good.id]
    assert np.all(np.isfinite(res.scores))
    # Keep: NaN priority ranks last, so it is the one evicted when the budget binds
    mem.max_bytes = mem.get(good.id).bytes
    g = mem.govern()
    assert g.evicted == [bad.id] and [m.id for m in mem.entries()] == [good.id]
    assert np.isnan(mem.decisions(action="evict")[0].score)  # logged as "no score", not -inf
    # a NaN statistic is refused by the store and never persisted
    e = mem.get(good.id)
    e.stats["q_r"] = float("inf")
    with pytest.raises(InvalidInput):
        mem.store.update(e)
    assert mem.store.get(mem.namespace, good.id).stats == {}


def test_nan_scores_never_logged_as_numbers() -> None:
    mem = Memory(policy=NaNPolicy(), max_bytes=10**6, embedder=HashingEmbedder(dim=32))
    mem.write("Task: poisoned-number\nAction: SELECT 1;")
    mem.write("Task: other\nAction: SELECT 2;")
    mem.max_bytes = 1
    mem.govern()
    c = mem.store._conn
    assert c.execute("SELECT COUNT(*) FROM decisions WHERE score != score").fetchone()[0] == 0
    ev = mem.decisions(action="evict")
    assert len(ev) == 2 and all(np.isnan(d.score) or np.isfinite(d.score) for d in ev)


# --------------------------------------------------------------------------- dimensions
class WrongDimEmbedder:
    name = "liar-8"
    dim = 8

    def __init__(self, out_dim: int = 7, value: float = 0.1):
        self.out_dim = out_dim
        self.value = value

    def embed(self, text: str) -> np.ndarray:
        return np.full(self.out_dim, self.value, dtype=np.float32)


def test_embedder_returning_wrong_dimension() -> None:
    mem = Memory(policy="keep-all", embedder=WrongDimEmbedder(out_dim=7))
    with pytest.raises(DimensionMismatch, match="dim 8"):
        mem.write("Task: x\nAction: SELECT 1;")
    assert nothing_happened(mem)  # the half-done write left no decision and no entry


def test_embedder_returning_nan() -> None:
    mem = Memory(policy="keep-all", embedder=WrongDimEmbedder(out_dim=8, value=float("nan")))
    with pytest.raises(InvalidInput, match="NaN"):
        mem.write("Task: x\nAction: SELECT 1;")
    assert nothing_happened(mem)


def test_query_embedding_of_wrong_dimension_for_curator() -> None:
    mem = Memory(policy="curator", embedder=HashingEmbedder(dim=16))
    mem.write("Task: x\nAction: SELECT 1;")
    with pytest.raises(DimensionMismatch):
        mem.policy.observe_query(np.zeros(17))


# --------------------------------------------------------------------------- ids
def test_unknown_id() -> None:
    mem = small()
    r = mem.write("Task: x\nAction: SELECT 1;")
    for call in (
        lambda: mem.get("nope"),
        lambda: mem.forget("nope"),
        lambda: mem.store.get(mem.namespace, "nope"),
        lambda: mem.store.delete(mem.namespace, "nope"),
    ):
        with pytest.raises(EntryNotFound) as ei:
            call()
        assert isinstance(ei.value, KeyError)
        assert str(ei.value).startswith("no entry 'nope'")
    with pytest.raises(KeyError):
        mem.get("nope")
    assert [d.action for d in mem.decisions()] == ["admit"]  # failed forget logged nothing
    mem.forget(r.id)
    with pytest.raises(EntryNotFound):
        mem.forget(r.id)  # forgetting twice is an error, not a silent no-op
    mem.feedback([r.id], 1.0)  # feedback for an id forgotten since is skipped (documented)
    with pytest.raises(EntryNotFound):  # ... for one never in the namespace, refused
        mem.feedback(["nope", r.id], 1.0)


# --------------------------------------------------------------------------- processes
WRITER = textwrap.dedent(
    """
    import sys
    from memcurator import Memory
    from memcurator.embed import HashingEmbedder
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mem = Memory(path, policy="keep-all", embedder=HashingEmbedder(dim=32))
    print("ready", flush=True)
    i = 0
    while n < 0 or i < n:
        mem.write(f"Task: writer {tag} row {i}\\nAction: SELECT {i} FROM t_{tag};"
                  + " padding" * 50)
        print(f"ok {i}", flush=True)
        i += 1
    mem.close()
    """
)


def _spawn(script: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_two_processes_write_one_store(tmp_path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    db = str(tmp_path / "shared.sqlite")
    Memory(db, policy="keep-all", embedder=HashingEmbedder(dim=32)).close()
    procs = [_spawn(str(script), db, tag, "50") for tag in ("A", "B")]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err.lower() and "Traceback" not in err
        assert out.count("ok ") == 50
    mem = Memory(db, policy="keep-all", embedder=HashingEmbedder(dim=32))
    texts = {m.text.split("\n")[0] for m in mem.entries()}
    assert texts == {f"Task: writer {t} row {i}" for t in "AB" for i in range(50)}
    assert len(mem) == 100 and len(mem.decisions(action="admit")) == 100
    assert mem.store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    mem.close()


def test_process_killed_mid_write(tmp_path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    db = str(tmp_path / "killed.sqlite")
    p = _spawn(str(script), db, "K", "-1")
    acked = -1
    deadline = time.monotonic() + 60
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("ok "):
            acked = int(line.split()[1])
        if acked >= 25 or time.monotonic() > deadline:
            break
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)  # reap it and close its pipes
    assert p.returncode == -signal.SIGKILL
    assert acked >= 25

    c = sqlite3.connect(db)
    assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    c.close()
    mem = Memory(db, policy="keep-all", embedder=HashingEmbedder(dim=32))
    dec = mem.decisions()
    admits = [d.entry_id for d in dec if d.action == "admit"]
    gone = [d.entry_id for d in dec if d.action in ("evict", "forget")]
    resident = {m.id for m in mem.entries()}
    assert len(mem) == len(admits) - len(gone)
    assert set(admits) - set(gone) == resident  # every committed admit is present
    assert len(mem) >= acked + 1  # every acknowledged write survived the kill
    rows = sorted(int(m.text.split()[4]) for m in mem.entries())
    assert rows == list(range(len(rows)))  # no hole: commits are atomic and in order
    mem.write("Task: after the crash\nAction: SELECT 1;")  # and the store is writable
    mem.close()


class TestApiMisuse:
    """Found by a fresh-user pass: each of these raised a raw Python/SQLite error before."""

    def test_store_path_is_a_directory_or_not_sqlite(self, tmp_path):
        from memcurator import Memory
        from memcurator.errors import StoreError

        with pytest.raises(StoreError, match="directory"):
            Memory(tmp_path)
        junk = tmp_path / "notes.txt"
        junk.write_text("not a database, just text\n" * 10)
        with pytest.raises(StoreError, match="not an SQLite database"):
            Memory(junk)
        assert junk.read_text().startswith("not a database")

    def test_foreign_sqlite_database_is_left_alone(self, tmp_path):
        import sqlite3

        from memcurator import Memory
        from memcurator.errors import StoreError

        other = tmp_path / "app.sqlite"
        c = sqlite3.connect(other)
        c.execute("CREATE TABLE users (name TEXT)")
        c.commit()
        c.close()
        with pytest.raises(StoreError, match="not a memcurator store"):
            Memory(other)
        c = sqlite3.connect(other)
        assert c.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), "100", True, 0, -5, 10.5])
    def test_bad_budget(self, bad):
        from memcurator import Memory

        with pytest.raises(InvalidInput, match="max_bytes"):
            Memory(policy="lru", max_bytes=bad)

    def test_bad_feedback_and_write_arguments(self, tmp_path):
        from memcurator import Memory

        m = Memory(tmp_path / "m.sqlite", policy="keep-all")
        eid = m.write("SELECT name FROM users WHERE age > 30;").id
        with pytest.raises(InvalidInput, match="not the string"):
            m.feedback(eid, 1.0)
        with pytest.raises(InvalidInput, match="reward"):
            m.feedback([eid], None)
        with pytest.raises(InvalidInput, match="JSON"):
            m.write("SELECT 2;", meta={"f": object()})
        with pytest.raises(InvalidInput, match="JSON"):
            m.write("SELECT 3;", meta={"f": float("nan")})
        with pytest.raises(InvalidInput, match="step"):
            m.write("SELECT 4;", step=-5)
        assert [e.id for e in m.entries()] == [eid]
        assert m.entries()[0].uses == 0

    def test_closed_memory(self, tmp_path):
        from memcurator import Memory
        from memcurator.errors import StoreError

        m = Memory(tmp_path / "m.sqlite", policy="keep-all")
        m.write("SELECT 1;")
        m.close()
        with pytest.raises(StoreError, match="closed"):
            m.write("SELECT 2;")

    def test_readonly_store_refuses_writes(self, tmp_path):
        from memcurator.errors import StoreError
        from memcurator.store import SQLiteStore

        path = tmp_path / "s.sqlite"
        SQLiteStore(path).create_namespace("a", embedder="h", dim=4)
        ro = SQLiteStore(path, readonly=True)
        assert ro.namespace("a").dim == 4
        with pytest.raises(StoreError, match="read-only"):
            ro.create_namespace("b", embedder="h", dim=4)
        with pytest.raises(StoreError, match="no store"):
            SQLiteStore(tmp_path / "missing.sqlite", readonly=True)
