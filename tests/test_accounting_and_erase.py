"""Defects of one kind each (issue: every stored byte counts; state survives re-embedding; an
erase that cannot complete is reported)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from memcurator import BudgetExceeded, Memory
from memcurator.embed import HashingEmbedder
from memcurator.memory import embedder_identity
from memcurator.store.reembed import reembed
from memcurator.store.sizing import default_sizeof, stats_bytes
from memcurator.store.sqlite import SQLiteStore

T = "Task: count rows in t{i}\nAction: SELECT COUNT(*) FROM t{i};"


# ---------------------------------------------------------------- every stored byte counts
@pytest.mark.parametrize("n_keys", [20_000, 2_000])
def test_stats_larger_than_the_budget_are_refused_not_stored(n_keys):
    mem = Memory(policy="lru", max_bytes=10_000)
    with pytest.raises(BudgetExceeded):
        mem.write(T.format(i=1), stats={f"k{i}": 0.0 for i in range(n_keys)})
    assert mem.entries() == [] and mem.used_bytes == 0


@pytest.mark.parametrize("policy", ["lru", "curator", "keep-all"])
def test_written_stats_and_detail_count_in_the_entry_bytes(policy):
    mem = Memory(policy=policy, max_bytes=None)
    stats = {f"s{i}": float(i) for i in range(30)}
    text = T.format(i=2)
    r = mem.write(text, stats=stats, origin_detail="tool:sql")
    m = mem.get(r.id)
    expect = default_sizeof(text, m.meta, m.embedding) + len(b"tool:sql") + stats_bytes(stats)
    assert m.bytes == expect and mem.used_bytes == expect
    # the same text without the statistics is smaller by exactly their JSON
    other = Memory(policy=policy, max_bytes=None)
    r2 = other.write(text, origin_detail="tool:sql")
    assert m.bytes - other.get(r2.id).bytes == len(json.dumps(stats, sort_keys=True))


def test_update_keeps_counting_the_stats_and_detail():
    mem = Memory(policy="lru", max_bytes=None)
    stats = {f"s{i}": 1.0 for i in range(40)}
    r = mem.write(T.format(i=3), stats=stats, origin_detail="peer-7")
    mem.update(r.id, T.format(i=33))
    m = mem.get(r.id)
    extra = len(b"peer-7") + stats_bytes(stats)
    assert m.bytes == default_sizeof(m.text, m.meta, m.embedding) + extra == mem.used_bytes


def test_distillation_keeps_counting_the_detail():
    raw = (
        "Task: list the names of staff hired in 2001\n"
        + "Thought: the staff table has a hire year column, filter it. " * 8
        + "\nAction: SELECT name FROM staff WHERE hire_year = 2001;"
    )
    mem = Memory(policy="curator", max_bytes=None)
    r = mem.write(raw, kind="raw", origin_detail="solver:local-model")
    m = mem.get(r.id)
    assert m.kind == "raw"
    mem.max_bytes = m.bytes - 50  # the raw entry no longer fits: Keep distills it
    g = mem.govern()
    assert g.distilled == [r.id]
    d = mem.get(r.id)
    assert d.kind == "insight"
    assert d.bytes == default_sizeof(d.text, d.meta, d.embedding) + len(b"solver:local-model")
    assert mem.used_bytes == d.bytes


# ---------------------------------------------------------------- re-embedding keeps a usable state
@pytest.mark.parametrize(
    "policy", ["curator", "curator/local-baseline", "tokenworth", "curator+worth", "lru"]
)
def test_a_reembedded_namespace_opens_with_its_policy_and_goes_on(tmp_path, policy):
    path = str(tmp_path / "m.sqlite")
    m = Memory(path, namespace="a", policy=policy, max_bytes=50_000)
    for i in range(6):
        h = m.recall(f"count rows in t{i}", k=1)
        m.write(T.format(i=i))
        if h.ids:
            m.feedback(h, 1.0)
    step = m.step
    m.close()
    emb = HashingEmbedder(dim=256)
    s = SQLiteStore(path)
    reembed(s, "a", emb.embed, embedder_identity(emb), 256)
    s.close()
    m2 = Memory(path, namespace="a", policy=policy, embedder=HashingEmbedder(dim=256))
    assert m2.step == step  # the clock stays
    h = m2.recall("count rows in t3", k=1)
    assert h.ids
    m2.feedback(h, 1.0)
    assert m2.write(T.format(i=9)).admitted
    why = [d.reason for d in m2.decisions() if d.action == "update"]
    if policy != "lru" or any("learned state" in w for w in why):
        assert any("learned state" in w and "restarts" in w for w in why)


def test_a_precision_change_keeps_the_learned_state(tmp_path):
    path = str(tmp_path / "m.sqlite")
    m = Memory(path, namespace="a", policy="curator", max_bytes=50_000)
    for i in range(4):
        m.recall(f"count rows in t{i}", k=1)
        m.write(T.format(i=i))
    m.close()
    s = SQLiteStore(path)
    before = s.load_state("a")
    emb = HashingEmbedder()
    reembed(s, "a", emb.embed, embedder_identity(emb), emb.dim, vector_dtype="float16")
    after = s.load_state("a")
    s.close()
    assert before is not None and after is not None and after[0] == "curator"
    assert after[2] == before[2]


# ---------------------------------------------------------------- an erase is never silent
def test_forget_reports_an_erase_another_reader_blocked_and_the_next_one_completes(tmp_path):
    path = str(tmp_path / "m.sqlite")
    mem = Memory(path, namespace="a", policy="lru", max_bytes=None)
    ids = [mem.write(T.format(i=i)).id for i in range(3)]
    reader = sqlite3.connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM entries").fetchone()  # holds a read snapshot
    try:
        r = mem.forget(ids[0])
        assert r.ids == [ids[0]] and r.erased is False  # said, not swallowed
        r_all = mem.forget_all()
        assert sorted(r_all.ids) == sorted(ids[1:]) and r_all.erased is False
        assert r_all.freed > 0
    finally:
        reader.rollback()
        reader.close()
    assert mem.store.secure_erase() is True
    raw = open(path, "rb").read()
    assert b"count rows in t0" not in raw and b"count rows in t2" not in raw
