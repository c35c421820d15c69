"""Issue 9, "the store under real use": one test per case, each kind tried on several inputs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from memcurator import Memory
from memcurator.cli import app
from memcurator.embed import HashingEmbedder
from memcurator.errors import BudgetExceeded, DimensionMismatch, EntryNotFound, InvalidInput
from memcurator.memory import embedder_identity
from memcurator.policy.share import ForgetNotice, SharedEntry
from memcurator.store.reembed import reembed
from memcurator.store.sqlite import SQLiteStore
from memcurator.types import Entry, Step, Task, Trajectory

ORDERS = "Task: count the orders of customer {c}\nAction: SELECT COUNT(*) FROM orders WHERE c={c};"


def _task(i: int) -> tuple[Task, Trajectory]:
    t = Task(f"t{i}", f"count the orders of customer {i}", "orders")
    return t, Trajectory(t.id, [Step("orders(c)", f"SELECT {i};")], reward=1.0, solver="x")


class TableEmbedder:
    """A fake embedder: fixed unit vectors per text (others map to a fixed background)."""

    dim = 4
    name = "table-4"

    def __init__(self, table: dict[str, list[float]]):
        self.table = {
            k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in table.items()
        }

    def embed(self, text: str) -> np.ndarray:
        return self.table.get(text, np.array([0, 0, 0, 1], dtype=np.float32))


# --------------------------------------------------------------------------- 1. coherence
def test_the_step_clock_is_the_namespaces(tmp_path: Path) -> None:
    p = str(tmp_path / "s.sqlite")
    s = SQLiteStore(p)
    a = Memory(store=s, namespace="n", policy="lru")
    for i in range(3):
        a.record(*_task(i))
    assert a.step == 3
    b = Memory(store=s, namespace="n", policy="lru")  # a second handle continues the step
    assert b.step == 3
    b.record(*_task(7))
    assert b.step == 4 and a.step == 4  # and the first sees the second's tick
    a.close()
    assert Memory(p, namespace="n", policy="lru").step == 4  # persisted


def test_budget_and_policy_state_are_the_namespaces(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "s.sqlite")
    a = Memory(store=s, namespace="n", policy="curator", max_bytes=9000)
    b = Memory(store=s, namespace="n", policy="curator", max_bytes=5000)  # explicit change
    len(a)  # any read syncs the handle
    assert a.max_bytes == 5000 == b.max_bytes
    for i in range(8):
        a.write(ORDERS.format(c=i) + f" -- {i * 'x'}")
        assert a.used_bytes <= 5000
    a.recall("count the orders of customer 3")  # folds the query into a's sketch
    a.write("Task: list employees hired after 2020\nAction: SELECT name FROM emp;")
    len(b)  # b syncs: it now holds the namespace's learned state
    assert b.policy.state() == a.policy.state()
    assert np.allclose(b.sketch, a.sketch) and np.any(a.sketch)


# --------------------------------------------------------------------------- 2. budget
@pytest.mark.parametrize("detail", ["x" * 300_000, "é" * 200, "peer-" * 60])
def test_origin_detail_is_capped_with_a_clear_error(detail: str) -> None:
    m = Memory(max_bytes=10_000)
    with pytest.raises(InvalidInput, match="origin_detail"):
        m.write("Task: x\nAction: SELECT 1;", origin_detail=detail)
    assert len(m) == 0 and m.used_bytes == 0


def test_every_stored_field_counts_in_the_bytes() -> None:
    m = Memory(policy="keep-all")
    plain = m.write("Task: count rows\nAction: SELECT 1;").id
    detail = m.write("Task: count cols\nAction: SELECT 2;", origin_detail="d" * 200).id
    meta = m.write("Task: count keys\nAction: SELECT 3;", meta={"note": "n" * 300}).id
    base = m.get(plain).bytes
    assert m.get(detail).bytes == base + 200
    assert m.get(meta).bytes >= base + 300
    assert m.used_bytes == sum(e.bytes for e in m.entries())
    with pytest.raises(InvalidInput, match="meta is"):
        m.write("Task: big meta\nAction: SELECT 4;", meta={"blob": "b" * 70_000})
    with pytest.raises(BudgetExceeded):  # a budget sees the meta bytes
        Memory(vector_dtype="float32", max_bytes=3000).write(
            "Task: y\nAction: SELECT 1;", meta={"n": "n" * 2000}
        )


def test_decision_log_retention_bounds_the_store(tmp_path: Path) -> None:
    p = tmp_path / "s.sqlite"
    m = Memory(str(p), namespace="n", policy="lru", max_bytes=20_000, log_keep=500)
    other = Memory(store=m.store, namespace="other", policy="lru")
    other.write("Task: untouched\nAction: SELECT 0;")
    for i in range(3000):
        m.write(f"Task: count the orders of customer {i}\nAction: SELECT {i};")
    rows = m.store.decision_count("n")
    assert rows <= 500 + 100 + 1  # keep + one batch of slack + the summary
    compact = m.decisions(action="compact")
    assert len(compact) == 1 and "log retention has dropped" in compact[0].reason
    admits = sum(
        int(part.split("=")[1].split()[0])
        for d in compact
        for part in d.reason.split(": ", 1)[1].split(", ")
        if part.startswith("admit=")
    )
    assert admits + len(m.decisions(action="admit")) == 3000
    assert [d.action for d in other.decisions()] == ["admit"]  # no other namespace touched
    c = sqlite3.connect(p)  # outside compaction the log stays append-only
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute("DELETE FROM decisions WHERE namespace='n'")
    c.close()


def test_decision_log_retention_by_age() -> None:
    now = [1000.0]
    s = SQLiteStore(":memory:", clock=lambda: now[0])
    m = Memory(store=s, namespace="n", policy="lru", log_keep=None, log_max_age_s=50.0)
    for i in range(150):
        now[0] += 1.0
        m.write(f"Task: item {i}\nAction: SELECT {i};")
    for _ in range(120):  # the age limit is applied every 100 rows
        now[0] += 1.0
        m.write("Task: item 1\nAction: SELECT 1;")  # a reinforcement: one row each
    oldest = min(d.at for d in m.decisions() if d.action != "compact")
    assert oldest >= now[0] - 50.0 - 100  # nothing much older than the limit and one batch
    assert m.decisions(action="compact")


# --------------------------------------------------------------------------- 3. language
@pytest.mark.parametrize(
    ("fact", "query"),
    [
        ("用户喜欢喝绿茶", "用户喜欢喝什么茶"),
        ("ユーザーは緑茶が好きです", "ユーザーの好きなお茶"),
        ("Пользователь любит зелёный чай", "какой чай любит пользователь"),
        ("사용자는 녹차를 좋아한다", "사용자는 어떤 차를 좋아하나"),
    ],
)
def test_any_language_is_recalled(fact: str, query: str) -> None:
    m = Memory()
    m.write("Task: count orders\nAction: SELECT 1;")
    w = m.write(fact)
    assert m.recall(query).ids == [w.id]


@pytest.mark.parametrize("text", ["👍 !!!", "👍👍", "— … —", "→ ← ↑", "$$$ %%%"])
def test_content_free_text_and_queries_are_refused(text: str) -> None:
    m = Memory(policy="keep-all")
    with pytest.raises(InvalidInput, match="no letter or digit"):
        m.write(text)
    with pytest.raises(InvalidInput, match="no letter or digit"):
        m.recall(text)
    assert len(m) == 0


@pytest.mark.parametrize("bad", [np.zeros(4), np.full(4, np.nan), np.array([1, np.inf, 0, 0])])
def test_zero_or_nan_vectors_are_refused(bad: np.ndarray) -> None:
    class Bad(TableEmbedder):
        def embed(self, text: str) -> np.ndarray:
            return bad.astype(np.float32)

    m = Memory(policy="keep-all", embedder=Bad({}))
    with pytest.raises(InvalidInput, match="zero vector|NaN"):
        m.write("Task: x\nAction: SELECT 1;")
    if not np.all(np.isfinite(bad)):  # a NaN query vector raises instead of returning []
        good = Memory(policy="keep-all", embedder=TableEmbedder({"x": [1, 0, 0, 0]}))
        good.write("x")
        good.embedder = Bad({})
        with pytest.raises(InvalidInput, match="NaN"):
            good.recall("x")


def test_content_free_entries_never_rank_high_and_min_score_can_return_nothing() -> None:
    m = Memory(":memory:", policy="keep-all")
    real = [m.write(ORDERS.format(c=c)).id for c in (1, 2)]
    # an entry stored with a zero vector (an old store, before refusal at write)
    z = Entry("zero", "default", "raw", "👍👍", 10, 10, np.zeros(512, np.float32), "self", "")
    m.store.insert(z)
    hit = m.recall("how do I bake bread", k=3)
    assert "zero" not in hit.ids and set(hit.ids) <= set(real)
    assert m.recall("how do I bake bread", k=3, min_score=0.3).ids == []
    assert m.recall("count the orders of customer 2", k=1, min_score=0.3).ids == [real[1]]
    with pytest.raises(InvalidInput):
        m.recall("x", min_score=float("nan"))


# --------------------------------------------------------------------------- 4. ranking
@pytest.mark.parametrize("policy", ["keep-all", "lru", "curator", "recency"])
def test_newer_version_of_a_request_wins_unless_the_older_is_proven_better(policy: str) -> None:
    m = Memory(policy=policy)
    old = m.write("Task: total sales per region\nAction: SELECT region, SUM(x) FROM sales_v1;").id
    m.record(*_task(90))  # time passes
    new = m.write("Task: total sales per region\nAction: SELECT region, SUM(amount) FROM s2;").id
    assert m.recall("total sales per region", k=2).ids == [new, old]
    for _ in range(3):  # the older keeps working, the newer fails when tried
        m.feedback([old], 1.0)
        m.feedback([new], 0.0)
    assert m.recall("total sales per region", k=2).ids == [old, new]


def test_the_lexical_signal_survives_into_the_final_ranking() -> None:
    # dense prefers "plain"; only "rare" contains the query's rare keyword (BM25's first)
    emb = TableEmbedder(
        {
            "zyxxyqual totals": [1, 0, 0, 0],
            "plain totals report": [0.95, 0.31, 0, 0],
            "rare zyxxyqual totals": [0.85, 0.53, 0, 0],
        }
    )
    m = Memory(policy="keep-all", embedder=emb, same_request=None)
    plain = m.write("plain totals report").id
    rare = m.write("rare zyxxyqual totals").id
    assert m.recall("zyxxyqual totals", k=2).ids == [rare, plain]
    m0 = Memory(policy="keep-all", embedder=emb, same_request=None, lexical_weight=0.0)
    p0, r0 = m0.write("plain totals report").id, m0.write("rare zyxxyqual totals").id
    assert m0.recall("zyxxyqual totals", k=2).ids == [p0, r0]  # cosine alone disagrees


@pytest.mark.parametrize("variant", ["{t}\n", "  {t}", "{T}", "{t_spaced}"])
def test_dedup_ignores_whitespace_and_case(variant: str) -> None:
    t = "Task: count rows of t\nAction: SELECT COUNT(*) FROM t;"
    v = variant.format(t=t, T=t.upper(), t_spaced=t.replace(" ", "   "))
    m = Memory(policy="keep-all")
    a = m.write(t)
    b = m.write(v)
    assert b.id == a.id and "reinforced" in b.reason and len(m) == 1


def test_keep_keeps_the_newer_near_duplicate_unless_the_older_is_proven_better() -> None:
    # the printer entry leaves an excess that one wifi version covers: Keep evicts exactly one
    # entry, and the version rule chooses which (with "p" * 3000 only evicting the printer
    # entry itself brings the bytes under the budget, and then both versions fit)
    m = Memory(policy="curator", vector_dtype="float32", max_bytes=7000)
    old = m.write("Task: the office wifi password\nAction: tulip-42 on floor 3").id
    for _ in range(6):
        m.feedback([old], 1.0)
    new = m.write("Task: the office wifi password\nAction: orchid-77 since May").id
    w = m.write("Task: where the printer is\nAction: room 204 " + "p" * 1500)
    ids = {e.id for e in m.entries()}
    assert new in ids and old not in ids and w.evicted == [old]
    ev = [d for d in m.decisions(action="evict") if d.entry_id == old]
    assert ev and ev[0].reason.startswith("superseded")
    # proven better: the newer was tried and failed, the older kept working
    m2 = Memory(policy="curator", vector_dtype="float32", max_bytes=7000)
    o2 = m2.write("Task: the office wifi password\nAction: tulip-42 on floor 3").id
    n2 = m2.write("Task: the office wifi password\nAction: orchid-77 since May").id
    for _ in range(3):
        m2.feedback([o2], 1.0)
        m2.feedback([n2], 0.0)
    w2 = m2.write("Task: where the printer is\nAction: room 204 " + "p" * 1500)
    assert o2 in {e.id for e in m2.entries()} and w2.evicted == [n2]
    ev2 = [d for d in m2.decisions(action="evict") if d.entry_id == n2]
    assert ev2 and ev2[0].reason.startswith("redundant") and "proven better" in ev2[0].reason


def test_an_old_store_is_detected_and_reembedded(tmp_path: Path) -> None:
    p = tmp_path / "old.sqlite"
    s = SQLiteStore(p)
    s.create_namespace("n", embedder=HashingEmbedder().name, dim=512)  # pre-issue-9 identity
    h = HashingEmbedder()
    for i in range(5):
        text = ORDERS.format(c=i)
        s.insert(Entry(f"e{i}", "n", "raw", text, 2200, 2200, h.embed(text), "self", ""))
    s.close()
    with pytest.raises(DimensionMismatch, match="reembed"):
        Memory(str(p), namespace="n")
    s = SQLiteStore(p)
    r = reembed(s, "n", h.embed, embedder_identity(h), 512, batch=2, max_batches=1)
    assert (r.reembedded, r.finished) == (2, False)  # stopped part-way: still refused
    s.close()
    with pytest.raises(DimensionMismatch, match="reembed"):
        Memory(str(p), namespace="n")
    res = CliRunner().invoke(app, ["reembed", str(p), "--namespace", "n", "--batch", "2"])
    assert res.exit_code == 0, res.output
    m = Memory(str(p), namespace="n")
    assert len(m) == 5  # nothing lost
    assert np.allclose(m.get("e3").embedding, h.embed("count the orders of customer 3"))
    assert m.recall("count the orders of customer 3").ids == ["e3"]
    assert any("re-embedded 5" in d.reason for d in m.decisions(action="update"))


@pytest.mark.parametrize("command", ["entries", "decisions", "export"])
def test_cli_store_commands_require_a_namespace(tmp_path: Path, command: str) -> None:
    p = tmp_path / "s.sqlite"
    Memory(str(p), namespace="a").close()
    res = CliRunner().invoke(app, [command, str(p)])
    assert res.exit_code != 0 and "--namespace" in res.output
    assert CliRunner().invoke(app, [command, str(p), "--namespace", "a"]).exit_code == 0


# --------------------------------------------------------------------------- 6. features
def test_update_is_atomic_and_logged(tmp_path: Path) -> None:
    m = Memory(str(tmp_path / "s.sqlite"), namespace="n", policy="keep-all")
    r = m.write(ORDERS.format(c=1))
    m.feedback([r.id], 1.0)
    u = m.update(r.id, ORDERS.format(c=1).replace("COUNT(*)", "COUNT(id)"))
    got = m.get(r.id)
    assert "COUNT(id)" in got.text and got.successes == 1 and u.admitted
    assert m.decisions(action="update")[-1].entry_id == r.id
    assert m.recall("count the orders of customer 1").ids == [r.id]
    before = m.get(r.id)

    def boom(*a: Any, **k: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    orig = m.store.update
    m.store.update = boom  # type: ignore[method-assign]
    with pytest.raises(sqlite3.OperationalError):
        m.update(r.id, "Task: something else entirely\nAction: SELECT 9;")
    m.store.update = orig  # type: ignore[method-assign]
    assert m.get(r.id).text == before.text  # old version stays, in the handle and the store
    assert m.store.get("n", r.id).text == before.text
    for bad in ("", "👍👍", b"\xff"):
        with pytest.raises(InvalidInput):
            m.update(r.id, bad)
    with pytest.raises(EntryNotFound):
        m.update("nope", "Task: y\nAction: SELECT 1;")
    small = Memory(policy="keep-all", vector_dtype="float32", max_bytes=3000)
    e = small.write("Task: a\nAction: SELECT 1;").id
    with pytest.raises(BudgetExceeded):
        small.update(e, "Task: a\nAction: " + "x" * 2000)
    assert small.get(e).text == "Task: a\nAction: SELECT 1;"
    assert small.decisions(action="reject")[-1].entry_id == e


def test_forget_all_touches_only_its_namespace() -> None:
    s = SQLiteStore(":memory:")
    a = Memory(store=s, namespace="a", policy="keep-all")
    b = Memory(store=s, namespace="b", policy="keep-all")
    for i in range(4):
        a.write(ORDERS.format(c=i))
        b.write(ORDERS.format(c=i))
    freed = a.forget_all().freed
    assert len(a) == 0 and freed > 0 and len(b) == 4
    assert len(a.decisions(action="forget")) == 4 and not b.decisions(action="forget")
    assert a.recall("count the orders of customer 1").ids == []


def test_forget_reaches_copies_shared_to_peers() -> None:
    s = SQLiteStore(":memory:")
    src = Memory(store=s, namespace="src", policy="curator")
    p1 = Memory(store=s, namespace="p1", policy="keep-all")
    p2 = Memory(store=s, namespace="p2", policy="keep-all")
    ids = [src.write(ORDERS.format(c=c)).id for c in (1, 2)]
    sk = src.embedder.embed("count the orders of customer 7")
    for peer, mem in (("p1", p1), ("p2", p2)):
        sent = src.share(sk, 10**6, tau=-1.0, tau_rise=0.0, delta=1.1, peer=peer)
        assert {x.source_id for x in sent} == set(ids)
        mem.receive(sent, "src")
        assert {e.meta["source_id"] for e in mem.entries()} == set(ids)  # source id kept
    # an unrelated copy with the same source id from another peer is not touched
    p1.receive([SharedEntry("Task: other\nAction: SELECT 5;", "insight", 9, 0, 1, 0, ids[0])], "x")
    src.forget(ids[0])
    for peer, mem in (("p1", p1), ("p2", p2)):
        out = src.share(sk, 10**6, tau=-1.0, tau_rise=0.0, delta=1.1, peer=peer)
        assert ForgetNotice(ids[0]) in out
        mem.receive(out, "src")
        left = {(e.meta["received_from"], e.meta["source_id"]) for e in mem.entries()}
        assert ("src", ids[0]) not in left and ("src", ids[1]) in left
    assert ("x", ids[0]) in {(e.meta["received_from"], e.meta["source_id"]) for e in p1.entries()}
    again = src.share(sk, 10**6, tau=-1.0, tau_rise=0.0, delta=1.1, peer="p1")
    assert not any(isinstance(x, ForgetNotice) for x in again)  # sent once
    assert len(src.decisions(action="notice")) == 2


def test_per_user_scope_and_personal_data() -> None:
    m = Memory(policy="curator")
    shared = m.write("Task: office hours\nAction: 9 to 5").id
    alice = m.write("Task: my doctor\nAction: Dr. Lee", user="alice", personal=True).id
    bob = m.write("Task: my doctor\nAction: Dr. Kim", user="bob").id
    assert m.recall("my doctor", k=3, user="alice").ids[0] == alice
    assert bob not in m.recall("my doctor", k=3, user="alice").ids
    assert {alice, bob}.isdisjoint(m.recall("my doctor", k=3).ids)
    assert shared in m.recall("office hours", user="bob").ids
    sent = m.share(m.embedder.embed("my doctor"), 10**6, tau=-1.0, tau_rise=0.0)
    assert alice not in {x.source_id for x in sent} and bob in {x.source_id for x in sent}
    plain = m.write("Task: lunch menu\nAction: soup", meta={"user": "u-17"}).id
    assert m.recall("lunch menu").ids == [plain]  # a caller's own "user" key scopes nothing
    with pytest.raises(InvalidInput, match="personal"):
        m.write("Task: my address\nAction: 1 Main St", personal=True)
