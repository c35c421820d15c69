"""Share counts a verified outcome as evidence of helpfulness (issue 33: a prior on q from a
verified pass; a verified fail is never sent; Eq. 7's budget and per-byte ranking still hold)."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.errors import InvalidInput
from memcurator.policy.share import VERIFIED_Q, select_for_peer, verified_share_scores
from memcurator.trust.outcome import OutcomeClaim, state_hash, text_sha
from memcurator.types import Entry

RECORDS = [
    "Task: Count the orders placed by customer 17\n"
    "Action: SELECT COUNT(*) FROM orders WHERE customer_id = 17;",
    "Task: Count the orders shipped to region 4\n"
    "Action: SELECT COUNT(*) FROM orders WHERE region = 4;",
    "Task: Count the orders paid by card\nAction: SELECT COUNT(*) FROM orders WHERE paid = 'card';",
    "Task: Count the open orders of store 9\n"
    "Action: SELECT COUNT(*) FROM orders WHERE store = 9 AND open = 1;",
]


def _claim(text: str, verdict: str = "pass") -> OutcomeClaim:
    action = text.split("Action: ", 1)[1]
    return OutcomeClaim("t", action, verdict, state_hash([[1]]), text_sha(text))


def _fresh(texts: list[str], near: list[int] | None = None) -> tuple[Memory, list[str], np.ndarray]:
    """A memory of new records (no feedback: q ≈ 0) and the sketch of a peer that works on the
    tasks of records ``near`` (default: all)."""
    mem = Memory(policy="curator", max_bytes=10**6)
    ids = [str(mem.write(t).id) for t in texts]
    idx = range(len(texts)) if near is None else near
    sk = np.mean([mem.embedder.embed(texts[i].split("\n")[0]) for i in idx], axis=0)
    return mem, ids, sk / np.linalg.norm(sk)


def test_unverified_new_records_are_not_shared_as_before() -> None:
    mem, _, peer = _fresh(RECORDS)
    try:
        assert mem.share(peer, 10_000) == []
    finally:
        mem.close()


@pytest.mark.parametrize("verified", [[0], [1, 3], [0, 2, 3]])
def test_verified_passes_are_shared_and_unverified_ones_are_not(verified: list[int]) -> None:
    mem, ids, peer = _fresh(RECORDS, near=verified)
    try:
        oc = {ids[i]: _claim(RECORDS[i]) for i in verified}
        out = mem.share(peer, 10_000, outcomes=oc, delta=1.01, tau_rise=0.0)
        assert {s.source_id for s in out} == {ids[i] for i in verified}
        assert all(s.q >= VERIFIED_Q for s in out)
        logged = mem.decisions(action="share")
        assert all("verified pass" in d.reason for d in logged)
    finally:
        mem.close()


def test_verified_pass_goes_before_unverified_under_a_negative_tau() -> None:
    # tau < 0 lets every entry through; the verified one must come first (higher ρ_s)
    mem, ids, peer = _fresh(RECORDS)
    try:
        out = mem.share(peer, 10_000, tau=-1.0, tau_rise=0.0, delta=1.01,
                        outcomes={ids[2]: _claim(RECORDS[2])})  # fmt: skip
        assert out[0].source_id == ids[2]
        assert len(out) == len(RECORDS)
    finally:
        mem.close()


@pytest.mark.parametrize("tau", [0.0, -1.0])
def test_a_verified_fail_is_never_shared(tau: float) -> None:
    mem, ids, peer = _fresh(RECORDS, near=[0, 1])
    try:
        oc = {ids[0]: _claim(RECORDS[0], "fail"), ids[1]: _claim(RECORDS[1])}
        out = mem.share(peer, 10_000, tau=tau, tau_rise=0.0, delta=1.01, outcomes=oc)
        sent = {s.source_id for s in out}
        assert ids[0] not in sent and ids[1] in sent
    finally:
        mem.close()


def test_a_claim_about_other_text_is_no_prior() -> None:
    mem, ids, peer = _fresh(RECORDS)
    try:
        stale = _claim(RECORDS[1])  # about record 1's text, filed under record 0
        assert mem.share(peer, 10_000, outcomes={ids[0]: stale}) == []
    finally:
        mem.close()


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_the_uplink_budget_is_respected(slots: int) -> None:
    mem, ids, peer = _fresh(RECORDS)
    try:
        oc = {i: _claim(t) for i, t in zip(ids, RECORDS, strict=True)}
        every = mem.share(peer, 10**6, outcomes=oc, delta=1.01, tau_rise=0.0)
        wire = {s.source_id: s.wire_bytes() for s in every}
        budget = slots * max(wire.values())
        out = mem.share(peer, budget, outcomes=oc, delta=1.01, tau_rise=0.0)
        # the link is charged what crosses it (the frame: text, envelope, claim), not the
        # stored footprint
        assert 1 <= len(out) <= slots
        assert sum(s.wire_bytes() for s in out) <= budget
        assert all(wire[s.source_id] > len(s.text.encode()) for s in out)
    finally:
        mem.close()


def test_a_big_verified_entry_loses_to_a_small_one_per_byte() -> None:
    small = RECORDS[0]
    big = (
        "Task: Count the orders placed by customer 17 in any of the warehouses we run\n"
        "Action: SELECT COUNT(*) FROM orders WHERE customer_id = 17 "
        + " ".join(f"AND warehouse_{k} IS NOT NULL" for k in range(250))
        + ";"
    )
    mem, ids, peer = _fresh([big, small])
    try:
        oc = {ids[0]: _claim(big), ids[1]: _claim(small)}
        assert mem.get(ids[0]).bytes > 3 * mem.get(ids[1]).bytes
        w_big, w_small = len(big.encode()), len(small.encode())
        # room for the big one or the small one, not both: the small one has more value per byte
        out = mem.share(peer, w_big, outcomes=oc, delta=1.01)
        assert [s.source_id for s in out] == [ids[1]]
        assert out[0].rho_s > 0 and w_small < w_big
    finally:
        mem.close()


def test_verified_share_scores_terms() -> None:
    n = 4
    one = np.ones(n)
    rho = np.array([0.0, 0.001, -0.001, 0.0])
    q = np.array([0.0, 0.5, 0.0, 0.0])
    b = np.array([100.0, 100.0, 100.0, 400.0])
    p = np.array([1.0, 1.0, 0.5, 1.0])
    r, q1, ok = verified_share_scores(rho, p, q, one, b, ["pass", "pass", "pass", None])
    # a pass lifts q to the prior (never lowers a learned q); ρ_s moves by p·Δq·a/b
    assert q1.tolist() == [VERIFIED_Q, 0.5, VERIFIED_Q, 0.0]
    assert r == pytest.approx([VERIFIED_Q / 100, 0.001, -0.001 + 0.5 * VERIFIED_Q / 100, 0.0])
    assert ok.all()
    _, _, ok = verified_share_scores(rho, p, q, one, b, ["fail", None, "pass", "fail"])
    assert ok.tolist() == [False, True, True, False]
    # the ranking of select_for_peer follows the lifted scores
    E = np.eye(n)
    chosen, _ = select_for_peer([_E(i, int(b[i])) for i in range(n)], E, r, q1, uplink_bytes=250)
    assert [i for i, _ in chosen] == [0, 1]


def test_verified_share_scores_checks_its_input() -> None:
    one = np.ones(2)
    with pytest.raises(InvalidInput, match="length"):
        verified_share_scores(one, one, one, one, one, ["pass"])
    with pytest.raises(InvalidInput, match="verdicts"):
        verified_share_scores(one, one, one, one, one, ["pass", "maybe"])
    with pytest.raises(InvalidInput, match="verified_q"):
        verified_share_scores(one, one, one, one, one, [None, None], verified_q=1.5)


def _E(i: int, nbytes: int) -> Entry:
    return Entry(f"e{i}", "ns", "insight", "x" * nbytes, nbytes, nbytes, np.eye(4)[i])
