"""Helpfulness against a local counterfactual (issue 11, cause 5): nearby tasks without the entry
are its baseline, so a hard family's exemplar is not called harmful by easy families' rewards."""

import numpy as np
import pytest

from memcurator import Memory
from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.policy import create_policy
from memcurator.value.helpfulness import MarginalUtility
from memcurator.value.helpfulness_local import LocalBaselineUtility

D = 6
HARD, EASY, OTHER = np.eye(D)[0], np.eye(D)[1], np.eye(D)[2]


def task(h, e, r, ids=()):
    h.observe_query(e)
    out = h.observe(r, [{}] * len(ids))
    h.log_task(r, list(ids))
    return out


def test_without_nearby_tasks_it_is_curators_head():
    loc, glob = LocalBaselineUtility(), MarginalUtility()
    st_l, st_g = {}, {}
    for r in (1.0, 0.0, 1.0):
        for h in (loc, glob):
            h.observe(r, [])
        [st_l] = loc.observe(r, [st_l])
        [st_g] = glob.observe(r, [st_g])
    # no task was ever logged near the entry: the local baseline is the global one
    assert loc.q_local([st_l], OTHER[None, :], ["m"])[0] == pytest.approx(glob.q(st_g))


def test_only_near_tasks_that_did_not_inject_the_entry_count():
    h = LocalBaselineUtility(window=32, beta=1e-9)
    for _ in range(4):
        task(h, EASY, 1.0)  # far from the entry: not its counterfactual
    for _ in range(3):
        task(h, HARD, 0.0)  # near, without the entry
    for _ in range(5):
        task(h, HARD, 1.0, ids=["m"])  # near, with it: not a counterfactual either
    n, r = h.near_counts(np.vstack([HARD, EASY]), ["m", "x"])
    assert n.tolist() == [3.0, 4.0] and r.tolist() == [0.0, 4.0]
    # entry x is near the easy tasks only; m's baseline is the hard tasks without it (reward 0)
    q = h.q_local([{}, {}], np.vstack([HARD, EASY]), ["m", "x"])
    assert q[0] > q[1]


def test_a_hard_familys_exemplar_is_not_negative_against_the_local_baseline():
    h = LocalBaselineUtility(window=64)
    for _ in range(30):
        task(h, EASY, 1.0)
    for _ in range(6):
        task(h, HARD, 0.0)
    st = {}
    for r in (1.0, 0.0, 1.0, 0.0):
        h.observe_query(HARD)
        [st] = h.observe(r, [st])
        h.log_task(r, ["m"])
    assert h.q_many([st])[0] < 0  # CURATOR's global baseline: looks harmful
    assert h.q_local([st], HARD[None, :], ["m"])[0] > 0.2  # it lifts the family from 0


def test_window_keeps_the_newest_and_survives_a_state_round_trip():
    h = LocalBaselineUtility(window=4)
    for i in range(7):
        task(h, HARD if i < 3 else EASY, float(i % 2))
    n, _ = h.near_counts(HARD[None, :], ["m"])
    assert n[0] == 0  # the three HARD tasks left the window of 4
    st = h.state()
    h2 = LocalBaselineUtility(window=4)
    h2.load_state(st)
    E = np.vstack([HARD, EASY, OTHER])
    assert np.array_equal(h.q_local([{}] * 3, E, "abc"), h2.q_local([{}] * 3, E, "abc"))
    small = LocalBaselineUtility(window=2)
    small.load_state(st)  # a smaller window keeps the newest tasks
    assert small.near_counts(EASY[None, :], ["m"])[0][0] == 2


def test_bad_input_is_refused():
    with pytest.raises(InvalidInput, match="window"):
        LocalBaselineUtility(window=0)
    with pytest.raises(InvalidInput, match="tau"):
        LocalBaselineUtility(tau=2.0)
    with pytest.raises(InvalidInput, match="beta"):
        LocalBaselineUtility(beta=float("nan"))
    h = LocalBaselineUtility()
    task(h, HARD, 1.0)
    with pytest.raises(DimensionMismatch):
        h.observe_query(np.ones(D + 1))
    with pytest.raises(DimensionMismatch):
        h.near_counts(np.ones((2, D + 1)), ["a", "b"])
    with pytest.raises(InvalidInput, match="NaN"):
        h.observe_query(np.full(D, np.nan))
    h.log_task(1.0, [])  # no query observed since the last task: nothing is logged
    assert h._count == 1


def _stream(mem, n=40):
    rng = np.random.default_rng(1)
    for t in range(n):
        fam = t % 3
        q = f"Delete the rows of family {fam} where the amount exceeds {rng.integers(1, 99)}"
        hit = mem.recall(q, k=1)
        mem.feedback(hit, float(fam != 0 or bool(hit.ids)))
        mem.write(f"Task: {q}\nAction: DELETE FROM f{fam} WHERE amount > {t};", origin="self",
                  kind="raw", meta={"family": fam})  # fmt: skip


def test_preset_runs_through_memory_and_a_reopened_store_scores_alike(tmp_path):
    path = tmp_path / "m.db"
    mem = Memory(path, policy=create_policy("curator/local-baseline"), max_bytes=12_000, seed=0)
    _stream(mem)
    head = mem.policy._estimators["rho"].scorer.helpfulness
    assert isinstance(head, LocalBaselineUtility) and head._count == 40
    ents = mem.entries()
    before = mem.policy.terms(ents, mem.matrix).q
    mem.close()
    again = Memory(path, policy=create_policy("curator/local-baseline"), max_bytes=12_000)
    after = again.policy.terms(again.entries(), again.matrix).q
    assert np.array_equal(before, after)
    again.close()


def test_a_task_recalled_before_another_handles_commit_still_joins_the_window(tmp_path):
    """The pending query is this handle's, not the namespace's: reloading the shared state after
    a foreign commit (between recall and feedback) must not drop the task from the window."""
    path = tmp_path / "m.db"
    a = Memory(path, policy=create_policy("curator/local-baseline"), max_bytes=50_000, seed=0)
    b = Memory(path, policy=create_policy("curator/local-baseline"), max_bytes=50_000, seed=1)
    a.write("Task: Delete the rows of family 1 where the amount exceeds 5\n"
            "Action: DELETE FROM f1 WHERE amount > 5;", origin="self", kind="raw")  # fmt: skip
    hit = a.recall("Delete the rows of family 1 where the amount exceeds 7", k=1)
    b.write("Task: Insert a row into family 2\nAction: INSERT INTO f2 VALUES (1);",
            origin="self", kind="raw")  # fmt: skip
    a.feedback(hit, 1.0)
    head = a.policy.estimator("rho").scorer.helpfulness
    assert head._count == 1
    assert head.state()["window"]["ids"] == [list(hit.ids)]
    a.close()
    b.close()


def test_log_task_refuses_a_reward_that_would_poison_the_window():
    h = LocalBaselineUtility()
    for bad in (float("nan"), float("inf"), 1.5, -0.1):
        h.observe_query(HARD)
        with pytest.raises(InvalidInput, match="reward"):
            h.log_task(bad, [])
    assert h._count == 0
    task(h, HARD, 1.0)
    assert np.all(np.isfinite(h.q_local([{}], HARD[None, :], ["m"])))


def test_recall_ranks_by_the_same_local_q_that_keep_scores():
    """cosine+q reads q(m) from the head: with a local baseline it must be the local q (the one
    Keep and share use), not the global one the head also computes."""
    mem = Memory(":memory:", policy=create_policy("curator/local-baseline"), max_bytes=12_000,
                 seed=0)  # fmt: skip
    _stream(mem, 60)
    ents = mem.entries()
    q = mem.policy.terms(ents, mem.matrix).q
    beta = mem.policy._rank.beta_q
    rk = mem.policy.rerank(ents, np.zeros(len(ents)), np.zeros(mem.embedder.dim), mem.step)
    assert np.allclose(np.asarray(rk.scores) / beta, q, atol=1e-9)
    head = mem.policy.estimator("rho").scorer.helpfulness
    assert not np.allclose(head.q_many([m.stats for m in ents]), q)  # the two differ here
    mem.close()
