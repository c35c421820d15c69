"""A filtered recall returns the best k entries that pass the filter (issue 20, item 3).

Recall used to cut its candidate pool (12 BM25 + 12 dense, fused) first and filter it after, so
any filter whose passing entries were not among the best 24 overall returned fewer than k of
them, usually none. Every filter is now eligibility before the cut. The tests cover the kind:
``where``, ``user``, both together, ``min_score``, a rank that never returns some entries
(EDM without PEI), content-free entries, a filter passing exactly k, fewer than k, one in 200,
a ``recall_all`` policy, and a memory stored and reopened. Each asserts the exact ids.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memcurator import Memory
from memcurator.errors import InvalidInput
from memcurator.retrieve import BM25Index, dense_topk
from memcurator.retrieve.eligible import top_k_eligible

SALES = "total sales of region {i}"
QUERY = "total sales amount per region"


def hr(e) -> bool:  # type: ignore[no-untyped-def]
    return e.meta.get("f") == "hr"


def sales_memory(n: int, path: str = ":memory:", policy: str = "keep-all") -> Memory:
    mem = Memory(path, policy=policy)
    for i in range(n):
        assert mem.write(SALES.format(i=i), meta={"f": "sales", "i": i}).admitted
    return mem


def test_issue_example_where_one_hr_entry_among_100_sales() -> None:
    mem = sales_memory(100)
    hr_id = mem.write("list staff hired in 2001", meta={"f": "hr"}).id
    r = mem.recall(QUERY, k=5, where=hr)
    assert r.ids == [hr_id]
    assert [e.meta["f"] for e in r.entries] == ["hr"]


def test_issue_example_40_alice_entries_do_not_hide_bobs() -> None:
    mem = Memory(":memory:", policy="keep-all")
    for i in range(40):
        mem.write(SALES.format(i=i), user="alice")
    bob = mem.write("total sales of the north region for bob", user="bob").id
    assert mem.recall(QUERY, k=5, user="bob").ids == [bob]
    # alice still sees hers, and never bob's
    got = mem.recall(QUERY, k=5, user="alice")
    assert len(got.ids) == 5 and bob not in got.ids
    # nobody else sees any of them
    assert mem.recall(QUERY, k=5, user="carol").ids == []
    assert mem.recall(QUERY, k=5).ids == []


def test_where_matching_1_of_200() -> None:
    mem = sales_memory(199)
    ids = [e.id for e in mem.entries()]
    target = ids[137]
    r = mem.recall(QUERY, k=3, where=lambda e: e.meta.get("i") == 137)
    assert r.ids == [target]


def test_where_and_user_together() -> None:
    mem = Memory(":memory:", policy="keep-all")
    for i in range(30):
        mem.write(SALES.format(i=i), meta={"f": "hr"}, user="alice")  # hr, but alice's
        mem.write(SALES.format(i=100 + i), meta={"f": "sales"}, user="bob")  # bob's, not hr
        mem.write(SALES.format(i=200 + i), meta={"f": "sales"})  # shared, not hr
    bob_hr = mem.write("staff of region 7 hired by bob", meta={"f": "hr"}, user="bob").id
    shared_hr = mem.write("staff of region 9", meta={"f": "hr"}).id
    r = mem.recall(QUERY, k=5, where=hr, user="bob")
    assert sorted(r.ids) == sorted([bob_hr, shared_hr])
    assert mem.recall(QUERY, k=5, where=hr, user="carol").ids == [shared_hr]


def test_filter_passing_exactly_k() -> None:
    mem = sales_memory(200)
    ids = [e.id for e in mem.entries()]
    keep = {3, 50, 99, 150, 199}
    r = mem.recall(QUERY, k=5, where=lambda e: e.meta["i"] in keep)
    assert sorted(r.ids) == sorted(ids[i] for i in keep)


def test_fewer_than_k_passing_returns_all_of_them() -> None:
    mem = sales_memory(200)
    ids = [e.id for e in mem.entries()]
    keep = {11, 120, 190}
    r = mem.recall(QUERY, k=5, where=lambda e: e.meta["i"] in keep)
    assert sorted(r.ids) == sorted(ids[i] for i in keep)


def test_best_k_of_many_passing_are_the_best_of_them() -> None:
    # every 10th entry passes; entries differ in how well they match (ties among equals): the
    # k returned are k best passing ones by the scores of an unfiltered recall of everything
    # (their own scores differ: BM25 is normalised by the best score in the filtered pool)
    mem = Memory(":memory:", policy="keep-all")
    for i in range(200):
        words = " ".join(["amount", "per", "region", "total"][: i % 5])
        mem.write(f"sales {words} figure {i}", meta={"i": i})
    full = mem.recall(QUERY, k=200, observe=False)
    ok = [e.meta["i"] % 10 == 3 for e in full.entries]
    best = full.scores[np.array(ok)][:4]
    r = mem.recall(QUERY, k=4, where=lambda e: e.meta["i"] % 10 == 3, observe=False)
    assert all(e.meta["i"] % 10 == 3 for e in r.entries) and len(r.ids) == 4
    unfiltered = dict(zip(full.ids, full.scores, strict=True))
    np.testing.assert_allclose(sorted((unfiltered[i] for i in r.ids), reverse=True), best)
    assert best[0] > full.scores[np.array(ok)][-1]  # the passing ones do differ


def test_a_filter_passing_everything_changes_nothing() -> None:
    mem = sales_memory(120)
    mem.write("list staff hired in 2001", meta={"f": "hr"})
    for k in (1, 5, 30):
        a = mem.recall(QUERY, k=k, observe=False)
        b = mem.recall(QUERY, k=k, where=lambda e: True, observe=False)
        assert a.ids == b.ids
        np.testing.assert_array_equal(a.scores, b.scores)


def test_min_score_keeps_the_eligible_pool_whole() -> None:
    mem = sales_memory(100)
    hr_id = mem.write("list staff hired in 2001", meta={"f": "hr"}).id
    # a threshold every entry passes changes nothing about a filtered recall
    assert mem.recall(QUERY, k=5, where=hr, min_score=-1.0).ids == [hr_id]
    # one no entry passes returns nothing
    assert mem.recall(QUERY, k=5, where=hr, min_score=0.999).ids == []


def test_policy_with_recall_all() -> None:
    mem = sales_memory(60, policy="full-oracle")
    assert mem.policy.recall_all
    hr_id = mem.write("list staff hired in 2001", meta={"f": "hr"}).id
    bob = mem.write("total sales of the north region for bob", user="bob").id
    assert mem.recall(QUERY, k=5, where=hr).ids == [hr_id]
    got = mem.recall(QUERY, k=61, user="bob")
    assert bob in got.ids and len(got.ids) == 61
    assert bob not in mem.recall(QUERY, k=61, user="alice").ids


def test_stored_then_reopened(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    mem = Memory(path, policy="keep-all")
    for i in range(100):
        mem.write(SALES.format(i=i), meta={"f": "sales"}, user="alice")
    hr_id = mem.write("list staff hired in 2001", meta={"f": "hr"}).id
    bob = mem.write("total sales of the north region for bob", user="bob").id
    mem.close()
    with Memory(path, policy="keep-all") as again:
        assert again.recall(QUERY, k=5, where=hr).ids == [hr_id]
        assert sorted(again.recall(QUERY, k=5, user="bob").ids) == sorted([hr_id, bob])
        assert again.recall(QUERY, k=5, user="bob", where=hr).ids == [hr_id]
        alice = again.recall(QUERY, k=101, user="alice")
        assert len(alice.ids) == 101 and bob not in alice.ids


def test_a_rank_that_never_returns_some_entries_does_not_let_them_fill_the_pool() -> None:
    # EDM scores an entry without PEI -inf whatever the query: 60 close matches without PEI
    # used to fill the pool and hide the one certified entry
    mem = Memory(":memory:", policy="edm/no-gate")
    q = "total sales amount per region for the west coast"
    for i in range(60):
        mem.write(f"{q} {i}")
    good = mem.write(f"{q} in euros", meta={"pei": 1.0}).id
    assert mem.recall(q, k=1).ids == [good]


def test_content_free_entries_never_fill_the_pool() -> None:
    # zero embeddings are not eligible; 20 of them (cosine 0) used to fill the dense leg ahead
    # of entries the query is slightly opposed to (cosine < 0), and BM25 proposes nothing
    mem = sales_memory(30)
    q = "delete old rows"
    ids = [e.id for e in mem.entries()]
    cos = mem.matrix @ mem.embedder.embed(q)
    assert (cos[20:] < 0).sum() >= 5
    for e in mem._ctx.res.entries[:20]:  # as a content-free entry would be stored
        e.embedding = np.zeros(mem.embedder.dim, dtype=np.float32)
    mem._ctx.res.changed()
    got = mem.recall(q, k=5).ids
    assert len(got) == 5 and set(got) <= set(ids[20:])
    # the five best of them (some have equal cosines, so compare cosines, not ids)
    np.testing.assert_array_equal(
        sorted(cos[ids.index(i)] for i in got), sorted(np.sort(cos[20:])[::-1][:5])
    )


def test_where_is_called_only_until_enough_pass() -> None:
    mem = sales_memory(200)
    calls = []

    def everything(e) -> bool:  # type: ignore[no-untyped-def]
        calls.append(e.id)
        return True

    mem.recall(QUERY, k=2, where=everything)
    assert len(set(calls)) <= 2 * mem._ctx.candidates  # each leg stops at its pool size


@pytest.mark.parametrize("k", [1, 3, 7, 40])
def test_top_k_eligible_without_a_filter_is_the_unfiltered_selection(k: int) -> None:
    rng = np.random.default_rng(k)
    M = rng.normal(size=(60, 8)).astype(np.float32)
    M[10:30] = M[10]  # many ties
    q = rng.normal(size=8).astype(np.float32)
    want, _ = dense_topk(M, q, k)
    got, _ = top_k_eligible(M @ q, k, test=lambda i: True)
    assert got.tolist() == want.tolist()
    idx = BM25Index()
    idx.fit([f"total sales of region {i % 7}" for i in range(60)])
    want, _ = idx.search("sales region 3", k)
    sc = idx.scores("sales region 3")
    assert sc is not None
    got, _ = top_k_eligible(np.asarray(sc, np.float64), k, test=lambda i: True, positive=True)
    assert got.tolist() == want.tolist()


def test_top_k_eligible_mask_and_test() -> None:
    s = np.array([1.0, 2.0, 2.5, 3.0, 0.5, 2.2])
    rows, sc = top_k_eligible(s, 3, mask=np.array([True, True, False, True, True, True]))
    assert rows.tolist() == [3, 5, 1] and sc.tolist() == [3.0, 2.2, 2.0]
    seen: list[int] = []
    rows, _ = top_k_eligible(s, 1, test=lambda i: seen.append(i) or i == 4)
    assert rows.tolist() == [4] and seen[:2] == [3, 2] and seen.count(3) == 1


def test_top_k_eligible_positive_and_fewer_than_k() -> None:
    s = np.array([0.0, 3.0, 2.0, 1.0])
    assert top_k_eligible(s, 4, positive=True)[0].tolist() == [1, 2, 3]
    assert top_k_eligible(s, 4, test=lambda i: i % 2 == 1)[0].tolist() == [1, 3]
    assert top_k_eligible(s, 4, mask=np.zeros(4, bool))[0].tolist() == []


# ------------------------------------------------------- read-time curators' raw trajectories
RAW = (
    "Task: Record that member 7 paid 12 dollars.\n"
    "Observation: Table payments(member_id INT, amount INT)\n"
    "Action: INSERT INTO payments (member_id, amount) VALUES (7, 12);\n"
    "Outcome: success"
)
TASK = "Record that member 205 paid 90 dollars."


def _insights(n: int) -> list[str]:
    # notes without a Task: line that share the task's words: BM25 ranks them first
    return [f"Record that member {i} paid dollars: note {i} on payments" for i in range(n)]


@pytest.mark.parametrize("curator", ["jitmem", "mempilot"])
@pytest.mark.parametrize("with_bank", [True, False])
def test_curators_retrieve_raw_trajectories_among_many_other_entries(
    curator: str, with_bank: bool
) -> None:
    from memcurator.curate.base import CurateContext
    from memcurator.curate.jitmem import JitMemCurator
    from memcurator.curate.mempilot import MemPilotOrchestrator

    mem = Memory(":memory:", policy="keep-all")
    for t in _insights(40):
        mem.write(t)
    raw_id = mem.write(RAW, kind="raw").id
    ctx = CurateContext(
        TASK,
        lambda q, k, where=None: mem.recall(q, k=k, where=where, observe=False).entries,
        bank=mem.entries if with_bank else None,
    )
    if curator == "jitmem":
        got = JitMemCurator(k=3).retrieve(ctx, TASK, 3)
    else:
        got = MemPilotOrchestrator()._raw(ctx, TASK, 3)
    assert [m.id for m in got] == [raw_id]


def test_40_entries_on_probation_do_not_hide_the_one_injectable() -> None:
    """Trust probation is one more eligibility filter of the same kind: 40 outside entries on
    probation (curator's gate) rank above the one own entry, and must not push it out."""
    mem = Memory(":memory:", policy="curator")
    for i in range(40):
        w = mem.write(SALES.format(i=i), origin="external")
        assert w.admitted and "_probation" in mem.get(w.id).trust
    own = mem.write("staff hired in 2001 for each region").id
    r = mem.recall(QUERY, k=5)
    assert r.ids == [own]
    # corroborating one by a verified success makes it injectable, at its own rank
    victim = mem.entries()[0]
    assert "_probation" in victim.trust and victim.id != own
    mem.feedback([victim.id], 1.0, verified=True)
    assert set(mem.recall(QUERY, k=5).ids) == {own, victim.id}


def test_meta_filter_in_memory_is_eligibility_before_the_cut() -> None:
    """``meta={...}`` (what in-database recall pushes into SQL) gives in memory what the
    equivalent ``where`` gives; a key must be present, and ``where`` still applies on top."""
    mem = sales_memory(100)
    hr_id = mem.write("list staff hired in 2001", meta={"f": "hr"}).id
    assert mem.recall(QUERY, k=5, meta={"f": "hr"}).ids == [hr_id]
    assert mem.recall(QUERY, k=5, meta={"f": "sales", "i": 42}).ids == [
        mem.recall(QUERY, k=1, where=lambda e: e.meta.get("i") == 42).ids[0]
    ]
    assert mem.recall(QUERY, k=5, meta={"g": None}).ids == []  # absent key: no match
    assert mem.recall(QUERY, k=5, meta={"f": "sales"}, where=lambda e: e.meta["i"] < 2).ids
    assert (
        len(mem.recall(QUERY, k=5, meta={"f": "sales"}, where=lambda e: e.meta["i"] < 2).ids) == 2
    )
    with pytest.raises(InvalidInput, match="meta"):
        mem.recall(QUERY, meta={"f": {"nested": 1}})
