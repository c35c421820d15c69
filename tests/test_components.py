"""The component redesign: presets as data, policy files, typed feedback, one source of truth,
the budget on every path, and EDM's gate and recall."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _bench_util import fake_bench

from memcurator import Memory
from memcurator.errors import InvalidInput, UnknownName
from memcurator.policy import POLICIES, ComponentPolicy, create_policy, policy_spec
from memcurator.policy.components import COMPONENTS, DECISIONS, create_component
from memcurator.policy.presets import load_policy_file
from memcurator.store.sqlite import SQLiteStore
from memcurator.types import Step, Task, Trajectory

A = "Task: count rows of orders for customer 5\nAction: SELECT COUNT(*) FROM orders WHERE c=5;"
B = "Task: list names of employees hired after 2020\nAction: SELECT name FROM emp WHERE y>2020;"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_preset_is_plain_data_with_a_component_per_decision(name: str) -> None:
    spec = policy_spec(name)
    assert json.loads(json.dumps(spec)) == spec  # plain data
    pol = create_policy(name)
    comps = pol.components()
    assert set(comps) == set(DECISIONS)
    for d in ("admit", "form", "keep", "rank"):
        assert comps[d] in COMPONENTS[d]
    assert ComponentPolicy(spec, name=name).components() == comps


def test_unknown_component_and_parameter_errors_name_the_choices() -> None:
    with pytest.raises(UnknownName, match="known: "):
        create_component("keep", {"name": "nope"})
    with pytest.raises(InvalidInput, match="no component of this policy takes"):
        create_policy("lru", theta=1.0)
    with pytest.raises(InvalidInput, match="ambiguous"):
        create_policy("curator+worth", kappa=0.3)  # rho's and worth's kappa
    assert create_policy("curator+worth", **{"worth.kappa": 0.3}).spec["estimators"]["worth"] == {
        "kappa": 0.3
    }


def test_policy_file_defines_a_preset_that_runs_in_the_bench(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(
        '[strict]\nbase = "curator"\nadmit = { name = "rho-trust", theta = 0.05 }\n'
        "[strict.estimators.rho]\nlam = 2.0\n"
    )
    spec = load_policy_file(f)["strict"]
    assert spec["admit"]["theta"] == 0.05 and spec["keep"]["name"] == "quarantine"
    assert spec["keep"]["keep"]["name"] == "rho-density"
    out = tmp_path / "res"
    fake_bench(out, "--policy-file", str(f), "--policies", "strict,lru")
    pols = {r["policy"] for r in json.loads((out / "summary.json").read_text())["summary"]}
    assert pols == {"strict", "lru"}
    bad = tmp_path / "bad.toml"
    bad.write_text("[x]\nbase = 'no-such'\n")
    with pytest.raises(InvalidInput, match="unknown base"):
        load_policy_file(bad)


def test_feedback_learns_from_the_recall_that_injected_not_the_last_one() -> None:
    def run(interleave: bool) -> dict[str, float]:
        mem = Memory(policy="tokenworth")
        a = mem.write(A).id
        mem.write(B)
        hit = mem.recall("how many orders has customer 9", k=1)
        assert hit.ids == [a] and hit.features is not None
        if interleave:
            mem.recall("names of employees hired after 2019", k=1)  # another rerank in between
        mem.feedback(hit, 1.0)
        return dict(mem.policy.learner.base_weights)

    assert run(False) == run(True)


def test_returned_entries_are_copies() -> None:
    mem = Memory(policy="keep-all")
    r = mem.write(A)
    hit = mem.recall("orders of customer 5", k=1)
    hit.entries[0].text = "Task: x\nAction: DROP TABLE orders;"
    hit.entries[0].embedding[:] = 0
    mem.entries()[0].meta["family"] = "forged"
    mem.feedback(hit, 1.0)
    m = mem.get(r.id)
    assert m.text == A and "family" not in m.meta and np.linalg.norm(m.embedding) > 0.9


def test_two_handles_on_one_store_see_each_other(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    a = Memory(store=store, policy="keep-all", max_bytes=None)
    b = Memory(store=store, policy="keep-all", max_bytes=None)
    r = a.write(A)
    assert b.recall("orders of customer 5", k=1).ids == [r.id]
    a.forget(r.id)
    assert b.recall("orders of customer 5", k=1).ids == [] and len(b) == 0


def test_two_lru_handles_share_one_budget(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    a = Memory(store=store, policy="lru", max_bytes=9000)
    b = Memory(store=store, policy="lru", max_bytes=9000)
    for i in range(12):
        (a if i % 2 else b).write(
            f"Task: count rows of table t{i}\nAction: SELECT COUNT(*) FROM t{i};"
        )
    assert a.used_bytes <= 9000 and b.used_bytes <= 9000
    assert store.used_bytes(a.namespace) <= 9000


def test_failed_write_leaves_no_trace_in_the_handle() -> None:
    class Boom:
        def distill(self, text: str) -> str:
            raise RuntimeError("distiller down")

    mem = Memory(policy="curator", max_bytes=7000, distiller=Boom())
    raised = False
    for i in range(8):
        try:
            obs = " ".join(f"c{i}x{j}" for j in range(250))  # dissimilar raw entries
            mem.write(f"Task: q{i}\nObservation: {obs}\nAction: SELECT {i};", kind="raw")
        except RuntimeError:
            raised = True
            break
    assert raised, "the keep pass never offered an entry to the distiller"
    stored = {m.id for m in mem.store.entries(mem.namespace)}
    assert {m.id for m in mem.entries()} == stored  # the rolled-back entry is gone here too
    assert mem.used_bytes == mem.store.used_bytes(mem.namespace)
    assert set(mem.recall("q7 c7x1", k=8).ids) <= stored


def test_budget_is_kept_when_a_handle_omits_it(tmp_path: Path) -> None:
    p = str(tmp_path / "m.db")
    Memory(p, policy="lru", max_bytes=9000).close()
    m = Memory(p, policy="lru")
    assert m.max_bytes == 9000
    for i in range(12):
        m.write(f"Task: count rows of table t{i}\nAction: SELECT COUNT(*) FROM t{i};")
    assert m.used_bytes <= 9000
    assert m.store.namespace(m.namespace).max_bytes == 9000
    m.close()
    assert Memory(p, policy="lru", max_bytes=None).max_bytes is None  # changing it is explicit


# ------------------------------------------------------------------------------------ EDM
def _traj(pei: float, ti: float) -> Trajectory:
    return Trajectory(
        "t",
        [Step("Table orders(c INT)", "SELECT COUNT(*) FROM orders;")],
        reward=1.0,
        metrics={"pei": pei, "ti": ti},
    )


@pytest.mark.parametrize(
    ("pei", "ti", "kept"),
    [(1.0, 5.0, True), (0.8, 4.0, True), (0.5, 5.0, False), (1.0, 3.0, False)],
)
def test_edm_gate_admits_only_certified_trajectories(pei: float, ti: float, kept: bool) -> None:
    mem = Memory(policy="edm")
    r = mem.record(Task("t", "count the orders", "f"), _traj(pei, ti))
    assert r is not None and r.admitted is kept
    if not kept:
        assert "not certified" in mem.decisions(action="reject")[-1].reason
    assert mem.write("Task: hand-written note\nAction: SELECT 1;").admitted is False
    ungated = Memory(policy="edm/no-gate")
    assert ungated.record(Task("t", "count the orders", "f"), _traj(pei, ti)).admitted


def test_edm_recall_needs_cosine_087_and_weighs_by_pei() -> None:
    mem = Memory(policy="edm/no-gate")
    lo = mem.write(
        "Task: count the orders of customer 5\nAction: SELECT COUNT(*) FROM orders;",
        meta={"pei": 0.5, "ti": 5.0},
    ).id
    hi = mem.write(
        "Task: count the orders of customer 5\nAction: SELECT COUNT(*) FROM orders ;",
        meta={"pei": 1.0, "ti": 5.0},
    ).id
    hit = mem.recall(
        "Task: count the orders of customer 5\nAction: SELECT COUNT(*) FROM orders;", k=2
    )
    assert hit.ids[0] == hi and lo in hit.ids
    assert mem.recall("bake bread with rye flour", k=2).ids == []  # nothing close enough


@pytest.mark.parametrize(
    ("decision", "name"),
    [(d, n) for d in COMPONENTS for n in COMPONENTS[d]],
)
def test_every_component_builds_clones_and_declares_its_estimators(
    decision: str, name: str
) -> None:
    comp = create_component(decision, {"name": name})
    assert type(comp).decision == decision
    c = comp.clone()
    assert c is not comp and c.get_params() == comp.get_params() and repr(c) == repr(comp)
    assert set(comp.needs) <= {"rho", "worth", "reputation"}
    # a bundle with just this component (and what it needs) attaches and runs one write+recall
    spec: dict = {decision: {"name": name}} if decision != "learn" else {"learn": [{"name": name}]}
    pol = ComponentPolicy(spec, name=f"only-{name}")
    mem = Memory(policy=pol, max_bytes=20_000)
    mem.write(A, meta={"pei": 1.0, "ti": 5.0})
    mem.recall("count rows of orders for customer 7", k=1)


def test_a_new_keep_rule_is_one_class_and_one_registration() -> None:
    from memcurator.policy.keep import _Keep

    class SmallestFirst(_Keep):
        def priority(self, entries, E, step):  # type: ignore[no-untyped-def]
            return -np.array([m.bytes for m in entries], dtype=np.float64)

    COMPONENTS["keep"].register("smallest-test", SmallestFirst)
    try:
        mem = Memory(policy=ComponentPolicy({"keep": {"name": "smallest-test"}}), max_bytes=6000)
        small = mem.write("Task: a\nAction: SELECT 1;").id
        for i in range(4):
            mem.write(f"Task: long {i} " + "word " * 40 + f"\nAction: SELECT {i};")
        assert small in {m.id for m in mem.entries()} and mem.used_bytes <= 6000
    finally:
        COMPONENTS["keep"]._entries.pop("smallest-test")


def test_overrides_reach_wrapped_components() -> None:
    """A wrapper (quarantine around a keep rule, a dedup around an admit rule) does not hide
    the wrapped component's parameters: bare and dotted names reach them."""
    spec = policy_spec("curator", redundancy_delta=None)
    assert spec["keep"]["name"] == "quarantine"
    assert spec["keep"]["keep"]["redundancy_delta"] is None
    assert "redundancy_delta" not in spec["keep"]
    assert policy_spec("curator", **{"keep.redundancy_delta": 0.9})["keep"]["keep"][
        "redundancy_delta"
    ] == pytest.approx(0.9)
    assert policy_spec("curator", min_uses=6)["keep"]["min_uses"] == 6  # the wrapper's own
    inner = policy_spec("curator/dedup", theta=-0.2)["admit"]
    assert inner["name"] == "same-request-dedup" and inner["admit"]["theta"] == -0.2
    pol = create_policy("curator", redundancy_delta=None)
    assert pol.redundancy_delta is None
    with pytest.raises(InvalidInput, match="nosuch"):
        policy_spec("curator", nosuch=1)
