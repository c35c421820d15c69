"""TokenWorth as a memory policy (Sec. 4.1, 4.4) and ``curator+worth``, through ``Memory``."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.errors import InvalidInput
from memcurator.policy import create_policy
from memcurator.types import Step, Task, Trajectory


def TokenWorth(**kw):  # noqa: N802 - reads like the method's name
    return create_policy("tokenworth", **kw)


def CuratorWorth(**kw):  # noqa: N802
    return create_policy("curator+worth", **kw)



GOOD = "Task: how many orders are in the orders table\nAction: SELECT COUNT(*) FROM orders;"
# Looks more like the stream's queries than GOOD does, and always fails.
BAD = (
    "Task: how many orders are there in the orders table of the shop\n"
    "Action: SELECT COUNT(order) FROM order;"
)
OTHERS = [
    "Task: list names of employees hired after 2020\n"
    "Action: SELECT name FROM employees WHERE hired > 2020;",
    "Task: delete expired sessions\nAction: DELETE FROM sessions WHERE expires < now();",
    "Task: insert a payment for member 102\nAction: INSERT INTO payments(member_id) VALUES (102);",
]
TOPICS = [
    "count the rows of table orders",
    "list employee names hired after 2020",
    "delete expired sessions from the sessions table",
    "insert a payment for member 102",
    "update the price of product 7 to 9.99",
    "find the oldest customer by birth date",
    "sum the revenue of invoices in March",
    "average salary per department",
    "drop duplicate emails from the users table",
    "rename column addr to address in table shops",
    "top five products by units sold",
    "customers without any order",
]


def solved(i: int, topic: str, reward: float = 1.0) -> tuple[Task, Trajectory]:
    task = Task(f"t{i}", f"{topic} (case {i})", f"fam{i % len(TOPICS)}")
    act = f"SELECT /* {topic} */ {i};"
    return task, Trajectory(task.id, [Step("schema", act)], reward=reward)


def run_stream(mem: Memory, n: int) -> None:
    """Recall, inject one, succeed, record: the benchmark's loop on a synthetic stream."""
    for i in range(n):
        task, traj = solved(i, TOPICS[i % len(TOPICS)])
        hit = mem.recall(task.instruction, k=1)
        mem.record(task, traj, used=hit.ids)


# ------------------------------------------------------------------ admission
def test_admits_while_room_remains_and_stores_insights():
    mem = Memory(policy=TokenWorth(capacity=8))
    run_stream(mem, 5)
    assert len(mem) == 5
    admits = mem.decisions(action="admit")
    assert len(admits) == 5 and all("capacity remains" in d.reason for d in admits)
    assert all(m.kind == "insight" and m.text.startswith("Task: ") for m in mem.entries())
    assert all(m.raw_bytes >= m.bytes for m in mem.entries())


def test_failed_trajectory_writes_nothing_and_is_negative_feedback():
    mem = Memory(policy=TokenWorth())
    gid = mem.write(GOOD).id
    task, traj = solved(0, "how many orders are in the orders table", reward=0.0)
    hit = mem.recall(task.instruction, k=1)
    assert hit.ids == [gid]
    assert mem.record(task, traj, used=hit.ids) is None
    assert len(mem) == 1 and len(mem.decisions(action="admit")) == 1
    assert mem.get(gid).stats["tw_n"] == 1 and mem.get(gid).stats["tw_y"] == -1.0


def test_full_bank_rejects_a_redundant_candidate_with_reason():
    mem = Memory(policy=TokenWorth(capacity=2))
    mem.write(GOOD)
    mem.write(OTHERS[0])
    mem.recall("how many orders are in the orders table", k=1)  # the probe query
    r = mem.write(GOOD.replace("are in", "are kept in"))
    assert not r.admitted and len(mem) == 2
    (rej,) = mem.decisions(action="reject")
    assert "bank full (2/2)" in rej.reason and "novelty" in rej.reason


# ------------------------------------------------------------------ capacity
def test_count_capacity_never_exceeded_and_evictions_logged():
    cap = 4
    mem = Memory(policy=TokenWorth(capacity=cap), max_bytes=100_000)
    for i in range(3 * len(TOPICS)):
        task, traj = solved(i, TOPICS[i % len(TOPICS)])
        hit = mem.recall(task.instruction, k=1)
        res = mem.record(task, traj, used=hit.ids)
        assert len(mem) <= cap and mem.used_bytes <= 100_000
        if res is not None and res.admitted and res.evicted:
            assert len(res.evicted) == 1
    evicts = mem.decisions(action="evict")
    admits = mem.decisions(action="admit")
    assert len(mem) == cap
    assert len(evicts) == len(admits) - cap > 0
    assert all(e.reason and np.isfinite(e.score) for e in evicts)
    full = [d for d in admits if "bank full" in d.reason]
    assert full and all("victim" in d.reason or d.reason.startswith("replace") for d in full)


def test_replacement_evicts_the_nearest_neighbour():
    # Switch the admission gate off so that a non-novel candidate goes to replacement.
    pol = TokenWorth(capacity=2, tau_nov=10.0, delta_write=10.0, delta_rep=-10.0)
    mem = Memory(policy=pol)
    a = mem.write(GOOD).id
    b = mem.write(OTHERS[0]).id
    r = mem.write(GOOD.replace("are in", "are kept in"))
    assert r.admitted and r.evicted == [a]
    assert {m.id for m in mem.entries()} == {b, r.id}
    (adm,) = [d for d in mem.decisions(action="admit") if d.entry_id == r.id]
    assert adm.reason.startswith(f"replace {a}:") and "delta_rep" in adm.reason
    (ev,) = mem.decisions(action="evict")
    assert ev.entry_id == a and f"replaced by its near neighbour {r.id}" in ev.reason


def test_lower_capacity_on_reopen_is_restored(tmp_path):
    path = str(tmp_path / "m.db")
    mem = Memory(path, policy=TokenWorth(capacity=6))
    run_stream(mem, 6)
    mem.close()
    mem = Memory(path, policy=TokenWorth(capacity=3))
    assert len(mem) == 6  # nothing happens before the next governance pass
    mem.govern()
    assert len(mem) == 3
    assert all("over capacity 3" in d.reason for d in mem.decisions(action="evict"))


# ------------------------------------------------------------------ feedback
def test_only_the_injected_entry_learns():
    pol = TokenWorth()
    mem = Memory(policy=pol)
    ids = [mem.write(t).id for t in [GOOD, *OTHERS]]
    hit = mem.recall("how many orders are in the orders table", k=3)
    assert hit.ids == [ids[0]]  # K_max = 1
    mem.feedback(hit, 1.0)
    assert pol.learner.n_seen == 1
    assert mem.get(ids[0]).stats == {"tw_n": 1.0, "tw_y": 1.0}
    assert all("tw_n" not in mem.get(i).stats for i in ids[1:])
    mem.feedback([], 0.0)  # nothing injected: nothing to learn
    assert pol.learner.n_seen == 1


@pytest.mark.parametrize("make", [TokenWorth, CuratorWorth], ids=["tokenworth", "curator+worth"])
def test_learns_to_prefer_the_helpful_memory(make):
    pol = make()
    mem = Memory(policy=pol)
    good = mem.write(GOOD).id
    bad = mem.write(BAD).id
    for t in OTHERS:
        mem.write(t)

    def ask(i):
        return mem.recall(f"how many orders are there in the orders table of the shop #{i}", k=1)

    assert ask(-1).ids == [bad]  # the look-alike wins before any feedback
    for i in range(100):
        hit = ask(i)
        mem.feedback(hit, 1.0 if hit.ids == [good] else 0.0)
    assert pol.learner.n_seen == 100 and pol.learner.n_krr_fits >= 1
    assert ask(100).ids == [good]
    assert mem.get(good).stats["tw_y"] > 0
    if make is CuratorWorth:  # curator's feedback quarantine (issue 10) evicts the look-alike
        evicted = {d.entry_id: d.reason for d in mem.decisions(action="evict")}
        assert "feedback quarantine" in evicted[bad]
    else:
        assert mem.get(bad).stats["tw_y"] < 0


# ------------------------------------------------------------------ presets, params, determinism
@pytest.mark.parametrize(
    ("name", "residual", "agop"),
    [
        ("tokenworth", True, True),
        ("tokenworth/base-only", False, True),
        ("tokenworth/no-agop", True, False),
    ],
)
def test_presets_build(name, residual, agop):
    pol = create_policy(name)
    est = pol.estimator("worth")
    assert pol.components()["rank"] == "learned-worth" and (est.residual, est.agop) == (
        residual,
        agop,
    )
    mem = Memory(policy=name)
    assert mem.policy.name == name and mem.policy.learner.residual is residual
    run_stream(mem, 3)
    assert len(mem) == 3


def test_clone_keeps_params_not_state():
    pol = TokenWorth(capacity=7, k_max=None, residual=False, learner_params={"base_every": 10})
    mem = Memory(policy=pol)
    run_stream(mem, 4)
    c = pol.clone()
    assert c.get_params() == pol.get_params()
    w = c.estimator("worth")
    assert w.learner_params == {"base_every": 10} and not hasattr(w, "learner")  # no state
    cw = CuratorWorth(lam=0.5, **{"worth.kappa": 0.05})
    assert cw.clone().get_params() == cw.get_params()
    assert cw.spec["estimators"]["worth"]["kappa"] == 0.05 and "beta_q" not in cw.spec["rank"]


def test_bad_params_raise():
    with pytest.raises(InvalidInput):
        TokenWorth(capacity=0)
    with pytest.raises(InvalidInput):
        TokenWorth(learner_params={"residual": False})
    with pytest.raises(InvalidInput):
        TokenWorth(learner_params={"no_such_param": 1})
    with pytest.raises(InvalidInput):
        TokenWorth(tau_nov=float("nan"))


def test_same_seed_same_resident_set():
    def run(seed):
        mem = Memory(policy=TokenWorth(capacity=5), seed=seed)
        run_stream(mem, 30)
        return [m.id for m in mem.entries()], [d.action for d in mem.decisions()]

    assert run(3) == run(3)


def test_state_persists_across_reopen(tmp_path):
    path = str(tmp_path / "m.db")
    mem = Memory(path, policy=TokenWorth(capacity=5))
    run_stream(mem, 12)
    probe = "count the rows of table orders (case 99)"
    before = mem.recall(probe, k=1, observe=False)
    n_seen = mem.policy.learner.n_seen
    mem.close()
    mem = Memory(path, policy=TokenWorth(capacity=5))
    assert mem.policy.learner.n_seen == n_seen > 0
    after = mem.recall(probe, k=1, observe=False)
    assert after.ids == before.ids and np.allclose(after.scores, before.scores)


def test_curator_worth_uses_learned_worth_as_q():
    pol = CuratorWorth()
    mem = Memory(policy=pol, max_bytes=3000)
    run_stream(mem, 30)
    assert mem.used_bytes <= 3000
    ents = mem.entries()
    t = pol.terms(ents, mem.matrix)
    we = pol.estimator("worth")
    w = np.clip(we.probe_worth(ents, mem.matrix, we.step).mean(axis=1), -1, 1)
    assert np.allclose(t.q, w) and np.all(np.abs(t.q) <= 1)
