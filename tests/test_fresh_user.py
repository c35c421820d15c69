"""Inputs a fresh-user pass on a clean clone found accepted silently or reported badly.

Each test covers the kind, not only the reported value: every numeric or boolean component and
estimator parameter, any non-string metadata key, any non-numeric reward, a conversion to any
larger precision, and any handle (new or already open) meeting an unfinished conversion.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memcurator import Memory, create_policy
from memcurator.cli import app
from memcurator.embed import HashingEmbedder
from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.memory import embedder_identity
from memcurator.policy import policy_from_file
from memcurator.store.reembed import reembed
from memcurator.store.sqlite import SQLiteStore

T = "Task: count orders of customer {i} in zone z{i}\nAction: SELECT COUNT(*) FROM o WHERE c = {i};"


@pytest.mark.parametrize(
    ("preset", "override"),
    [
        ("curator", {"theta": "abc"}),  # admit component, float
        ("curator", {"theta": None}),  # None where the parameter does not allow it
        ("curator", {"redundancy_delta": "x"}),  # wrapped keep component, float | None
        ("curator", {"redundancy_delta": 2.0}),  # out of a cosine's range
        ("curator", {"lam": "x"}),  # estimator parameter
        ("curator", {"distill": "yes"}),  # boolean parameter
        ("tokenworth", {"k_max": 1.5}),  # integer parameter
        ("curator", {"beta_q": "0.5"}),  # rank component
    ],
)
def test_wrong_kind_of_parameter_is_refused_when_the_policy_is_built(
    preset: str, override: dict[str, object]
) -> None:
    with pytest.raises(InvalidInput, match=str(next(iter(override)))):
        create_policy(preset, **override)


def test_right_kind_of_parameter_still_builds() -> None:
    assert create_policy("curator", redundancy_delta=None).redundancy_delta is None
    create_policy("curator", theta=-1, lam=0, distill=False)
    create_policy("tokenworth", k_max=3)


def test_policy_file_parameters_are_checked_too(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text('[mine]\nbase = "curator"\nadmit = { name = "trust-gate", theta = "high" }\n')
    with pytest.raises(InvalidInput, match="theta"):
        policy_from_file(str(f))


@pytest.mark.parametrize("meta", [{1: 2}, {("a", "b"): 1}, {"ok": 1, 2: "x"}])
def test_metadata_keys_must_be_strings(meta: dict[object, object]) -> None:
    m = Memory()
    with pytest.raises(InvalidInput, match="meta keys must be strings"):
        m.write("Task: meta key\nAction: SELECT 1;", meta=meta)  # type: ignore[arg-type]
    assert len(m) == 0


@pytest.mark.parametrize("reward", ["1", "0.5", b"1", None, [1.0]])
def test_non_numeric_reward_is_refused(reward: object) -> None:
    m = Memory()
    w = m.write(T.format(i=1))
    with pytest.raises(InvalidInput, match="reward"):
        m.feedback([w.id], reward)  # type: ignore[arg-type]
    assert m.entries()[0].uses == 0


def test_boolean_reward_counts_as_one_or_zero() -> None:
    m = Memory(policy="keep-all", max_bytes=None)
    w = m.write(T.format(i=1))
    m.feedback([w.id], True)
    m.feedback([w.id], False)
    e = m.entries()[0]
    assert (e.successes, e.failures) == (1, 1)


@pytest.mark.parametrize(
    ("start", "to"), [("int8", "float32"), ("int8", "float16"), ("float16", "float32")]
)
def test_conversion_to_a_larger_precision_reports_the_overflow(
    tmp_path: Path, start: str, to: str
) -> None:
    p = tmp_path / "s.sqlite"
    m = Memory(p, namespace="n", policy="lru", max_bytes=30_000, vector_dtype=start)
    for i in range(40):
        m.write(T.format(i=i))
    assert m.used_bytes <= 30_000
    m.close()
    r = CliRunner().invoke(
        app, ["reembed", str(p), "--namespace", "n", "--vector-dtype", to], terminal_width=200
    )
    assert r.exit_code == 0, r.output
    assert "warning" in r.output and "budget" in r.output and "evict" in r.output
    s = SQLiteStore(p)
    assert s.used_bytes("n") > 30_000
    s.close()
    # the next handle restores the budget, and every eviction is in the log
    m2 = Memory(p, namespace="n", policy="lru")
    assert m2.used_bytes <= 30_000
    n_ev = len(m2.decisions(action="evict"))
    assert n_ev > 0 and len(m2) + n_ev >= 40


def test_within_budget_conversion_reports_no_overflow(tmp_path: Path) -> None:
    p = tmp_path / "s.sqlite"
    m = Memory(p, namespace="n", policy="keep-all", max_bytes=None, vector_dtype="float32")
    for i in range(5):
        m.write(T.format(i=i))
    m.close()
    emb = HashingEmbedder()
    s = SQLiteStore(p)
    r = reembed(s, "n", emb.embed, embedder_identity(emb), emb.dim, vector_dtype="int8")
    assert r.finished and r.over_budget == 0


@pytest.mark.parametrize("target", ["int8", "float32"])
def test_handles_refuse_to_work_during_an_unfinished_conversion(
    tmp_path: Path, target: str
) -> None:
    p = tmp_path / "s.sqlite"
    a = Memory(p, namespace="n", policy="keep-all", max_bytes=None, vector_dtype="float16")
    ids = [a.write(T.format(i=i)).id for i in range(20)]
    emb = HashingEmbedder()
    s = SQLiteStore(p)
    r = reembed(
        s,
        "n",
        emb.embed,
        embedder_identity(emb),
        emb.dim,
        batch=5,
        max_batches=1,
        vector_dtype=target,
    )
    assert not r.finished
    with pytest.raises(DimensionMismatch, match="run it again"):  # a new handle: told to finish
        Memory(p, namespace="n", policy="keep-all")
    for act in (
        lambda: a.update(ids[1], "Task: count orders in zone q\nAction: SELECT 1;"),
        lambda: a.write("Task: written during the conversion\nAction: SELECT 2;"),
        lambda: a.recall("zone z3", k=1),
        lambda: a.feedback([ids[2]], 1.0),
    ):
        with pytest.raises(DimensionMismatch, match="reembed"):  # an open one: refuses all
            act()
    assert reembed(s, "n", emb.embed, embedder_identity(emb), emb.dim).finished
    c = sqlite3.connect(p)
    rows = c.execute("SELECT vec_dtype, COUNT(*) FROM entries GROUP BY 1").fetchall()
    c.close()
    assert rows == [(target, 20)]
    b = Memory(p, namespace="n", policy="keep-all")
    assert b.vector_dtype == target and len(b) == 20
    assert b.recall("zone z3", k=1).entries[0].text.startswith("Task: count orders of customer 3")


@pytest.mark.parametrize(
    "stats",
    [{"q_adv": "high"}, {"q_adv": float("nan")}, {"q_adv": True}, {1: 0.5}, [("q_adv", 0.5)]],
)
def test_write_refuses_stats_that_are_not_finite_numbers(stats):
    m = Memory()
    with pytest.raises(InvalidInput, match="stats"):
        m.write("Task: count t\nAction: SELECT COUNT(*) FROM t;", stats=stats)
    assert m.entries() == []


def test_write_takes_numpy_stats_as_floats():
    m = Memory()
    w = m.write("Task: count t\nAction: SELECT COUNT(*) FROM t;", stats={"q_adv": np.float32(0.25)})
    (e,) = m.entries()
    assert e.id == w.id and e.stats == {"q_adv": 0.25} and type(e.stats["q_adv"]) is float


def test_feedback_counts_a_repeated_id_once():
    m = Memory()
    w = m.write("Task: count t\nAction: SELECT COUNT(*) FROM t;")
    m.feedback([w.id, w.id], 1.0)
    (e,) = m.entries()
    assert e.uses == 1 and e.successes == 1


@pytest.mark.parametrize("change", ["write", "forget", "feedback"])
def test_a_where_callback_cannot_change_the_memory_it_filters(change):
    m = Memory()
    ids = [
        m.write(f"Task: count rows of t{i}\nAction: SELECT COUNT(*) FROM t{i};").id
        for i in range(5)
    ]

    def where(e):
        if change == "write":
            m.write("Task: sneak\nAction: SELECT 2;")
        elif change == "forget":
            m.forget(ids[0])
        else:
            m.feedback([ids[1]], 1.0)
        return True

    with pytest.raises(InvalidInput, match="where"):
        m.recall("count rows of t3", k=2, where=where)
    assert sorted(e.id for e in m.entries()) == sorted(ids)  # nothing changed
    assert all(e.uses == 0 for e in m.entries())
    # the memory is usable afterwards, and a read-only callback still works
    assert m.recall("count rows of t3", k=1, where=lambda e: m.used_bytes > 0).ids
    m.write("Task: after\nAction: SELECT 3;")
