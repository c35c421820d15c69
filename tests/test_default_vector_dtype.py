"""The vector precision a namespace gets when the caller does not choose one (issue 35).

A budgeted namespace stores compact vectors by default (binary with the deterministic hashing
embedder, int8 with any other), an unbounded one float32; an explicit ``vector_dtype`` and an
existing namespace's precision always win. Binary keeps no exact vector but derives it from the
text on load, so recall and Keep see the same cosines as at float32: the same writes give the
same recall order, and the budget holds several times the entries.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.store import open_store


class _Learned:
    """A non-deterministic embedder stand-in (like a neural one): it may not derive vectors."""

    name = "learned-16"
    dim = 16
    deterministic = False

    def embed(self, text: str) -> np.ndarray:
        v = HashingEmbedder(dim=16).embed(text)
        return np.asarray(v, dtype=np.float32)

    def embed_batch(self, texts):  # pragma: no cover - same as embed, row by row
        return np.stack([self.embed(t) for t in texts])


@pytest.mark.parametrize(
    "kw,expect",
    [
        ({"max_bytes": 20_000}, "binary"),
        ({"max_bytes": 10**9}, "binary"),
        ({}, "float32"),
        ({"max_bytes": None}, "float32"),
        ({"max_bytes": 20_000, "vector_dtype": "float32"}, "float32"),
        ({"max_bytes": 20_000, "vector_dtype": "int8"}, "int8"),
        ({"vector_dtype": "binary"}, "binary"),
        ({"max_bytes": 20_000, "embedder": _Learned()}, "int8"),
        ({"embedder": _Learned()}, "float32"),
    ],
)
def test_a_new_namespace_gets_the_default_for_its_budget(kw, expect) -> None:
    mem = Memory(policy="curator", namespace="n", **kw)
    assert mem.vector_dtype == expect
    assert mem.store.namespace("n").vector_dtype == expect


def test_a_derived_precision_is_still_refused_for_a_learned_embedder() -> None:
    with pytest.raises(InvalidInput, match="deterministic"):
        Memory(policy="curator", max_bytes=20_000, embedder=_Learned(), vector_dtype="binary")


@pytest.mark.parametrize("first,then", [({}, {"max_bytes": 20_000}), ({"max_bytes": 20_000}, {})])
def test_an_existing_namespace_keeps_its_precision(tmp_path, first, then) -> None:
    path = str(tmp_path / "m.db")
    a = Memory(path, policy="curator", namespace="n", **first)
    a.write("Task: count rows in t\nAction: SELECT COUNT(*) FROM t;")
    before = a.vector_dtype
    a.close()
    b = Memory(path, policy="curator", namespace="n", **then)
    assert b.vector_dtype == before and len(b) == 1
    b.close()


def test_binary_by_default_recalls_what_float32_recalls_and_holds_more() -> None:
    texts = [
        f"Task: total of column c{i} in table t{i % 7}\nAction: SELECT SUM(c{i}) FROM t{i % 7};"
        for i in range(60)
    ]
    budget = 12_000
    dflt = Memory(policy="lru", max_bytes=budget, namespace="d")
    f32 = Memory(policy="lru", max_bytes=budget, namespace="f", vector_dtype="float32")
    for t in texts:
        dflt.write(t)
        f32.write(t)
    assert dflt.vector_dtype == "binary"
    # the same bytes hold several times the entries (64 B a vector instead of 2,048)
    assert len(dflt) >= 3 * len(f32), (len(dflt), len(f32))
    assert dflt.used_bytes <= budget and f32.used_bytes <= budget
    # over the entries both hold, recall ranks them alike: the exact vectors are derived
    both = {m.text for m in f32.entries()}
    ref = Memory(policy="keep-all", namespace="r", vector_dtype="float32")
    bin_ = Memory(policy="keep-all", namespace="b", vector_dtype="binary")
    for t in both:
        ref.write(t)
        bin_.write(t)
    for q in ("sum of c3 in t3", "total of column c50", "SELECT SUM in table t2"):
        got = [m.text for m in bin_.recall(q, k=5).entries]
        want = [m.text for m in ref.recall(q, k=5).entries]
        assert got == want, q


def test_the_default_survives_a_reopen_of_the_store(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    mem = Memory(path, policy="curator", namespace="n", max_bytes=20_000)
    ids = [
        mem.write(t).id
        for t in (
            "Task: list users\nAction: SELECT * FROM users;",
            "Task: count orders\nAction: SELECT COUNT(*) FROM orders;",
        )
    ]
    mem.close()
    store = open_store(path)
    assert store.namespace("n").vector_dtype == "binary"
    store.close()
    again = Memory(path, policy="curator", namespace="n")
    assert again.vector_dtype == "binary"
    hit = again.recall("how many orders are there", k=1)
    assert hit.ids == [ids[1]]
    again.close()
