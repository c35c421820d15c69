"""Peer reputation, advertised-claim distrust and feedback quarantine."""

from __future__ import annotations

import pickle

import pytest

from memcurator.errors import InvalidInput
from memcurator.trust.reputation import (
    PeerReputation,
    beta_posterior,
    feedback_quarantine,
    recompute_abstraction_gain,
)

INS = "Task: count rows in t\nAction: DROP TABLE t; SELECT COUNT(*) FROM t;"


def test_advertised_a_is_not_taken_on_faith() -> None:
    # the case: a peer advertises a = 50 with no raw trajectory
    assert recompute_abstraction_gain(INS) == 1.0
    raw = "Task: count rows in t\nObservation: x\nAction: DROP TABLE t; SELECT COUNT(*) FROM t;"
    assert recompute_abstraction_gain(INS, raw) > 1.0
    assert recompute_abstraction_gain(INS, raw.replace("DROP TABLE t; ", "")) == 1.0


def test_inflated_q_of_unknown_or_failing_peer_is_shrunk_to_prior() -> None:
    rep = PeerReputation()
    assert rep.shrink_q("p1", 1.0, 0.0) <= 0.11
    for _ in range(20):
        rep.learn_one("good", 1.0)
    assert rep.shrink_q("good", 1.0, 0.0) > 0.8
    for _ in range(5):
        rep.learn_one("bad", 0.0)
    assert rep.shrink_q("bad", 1.0, 0.0) == 0.0  # quarantined: weight 0


def test_quarantine_is_logged_and_reversible() -> None:
    rep = PeerReputation(min_outcomes=5, threshold=0.3)
    for _ in range(4):
        rep.learn_one("p", 0.0)
    assert not rep.is_quarantined("p")  # not judged before min_outcomes
    rep.learn_one("p", 0.0)
    assert rep.is_quarantined("p")
    assert "peer quarantine" in (rep.quarantine_reason("p") or "")
    rep.release("p", "key rotated after compromise")
    assert not rep.is_quarantined("p")
    assert [a for _, a, _ in rep.log] == ["quarantine", "release"]
    for _ in range(5):  # judged again on new outcomes only
        rep.learn_one("p", 1.0)
    assert not rep.is_quarantined("p")
    with pytest.raises(InvalidInput):
        rep.release("p", "again")


def test_good_peer_never_quarantined_and_state_pickles() -> None:
    rep = PeerReputation()
    for i in range(50):
        rep.learn_one("p", float(i % 4 != 0))  # 75% success
    assert not rep.is_quarantined("p")
    back = pickle.loads(pickle.dumps(rep))
    assert back.posterior("p") == rep.posterior("p")


def test_learn_one_rejects_bad_reward() -> None:
    rep = PeerReputation()
    for bad in (float("nan"), -0.1, 1.5):
        with pytest.raises(InvalidInput):
            rep.learn_one("p", bad)
    with pytest.raises(InvalidInput):
        rep.learn_one("", 1.0)


def test_feedback_quarantine_after_repeated_failure() -> None:
    # the case: 10 rounds of reward 0 must lead to eviction, with a reason
    d = feedback_quarantine(0, 10)
    assert d.quarantine and "feedback quarantine" in d.reason
    assert not feedback_quarantine(0, 3).quarantine  # too few uses to judge
    assert not feedback_quarantine(7, 3).quarantine
    assert feedback_quarantine(0, 10, method="beta").quarantine
    assert not feedback_quarantine(7, 3, method="beta").quarantine
    with pytest.raises(InvalidInput):
        feedback_quarantine(-1, 2)
    with pytest.raises(InvalidInput):
        feedback_quarantine(1, 2, method="x")  # type: ignore[arg-type]


def test_beta_posterior_bounds() -> None:
    p = beta_posterior(30, 10)
    assert p.lcb < p.mean < 1
    with pytest.raises(InvalidInput):
        beta_posterior(1, 1, conf=1.0)
