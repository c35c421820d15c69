"""Issue 11, cause 4 (churn): LCB helpfulness, replacement margin, same-request duplicate test,
TokenWorth's B_max tied to the byte budget. Each is an opt-in preset; the defaults are unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.errors import InvalidInput
from memcurator.policy import create_policy
from memcurator.types import Entry
from memcurator.value.helpfulness import MarginalUtility
from memcurator.value.helpfulness_lcb import BetaLCBUtility


def _history(head: MarginalUtility, outcomes: list[float]) -> dict[str, float]:
    st: dict[str, float] = {}
    for r in outcomes:
        [st] = head.observe(r, [st])
    return st


def test_lcb_ranks_proven_over_new_where_the_paper_head_does_not() -> None:
    """The 0.7-discounted head puts a new entry near a 12-for-12 incumbent; the bound does not."""
    for head in (MarginalUtility(), BetaLCBUtility()):
        for _ in range(40):  # population: half the tasks succeed
            head.observe(1.0, [])
            head.observe(0.0, [])
        proven = _history(head, [1.0] * 12)
        mixed = _history(head, [1.0, 0.0, 1.0, 0.0])
        failing = _history(head, [0.0, 0.0])
        q = head.q_many([{}, proven, mixed, failing])
        assert q[1] > q[0] > q[3]
        if isinstance(head, BetaLCBUtility):
            assert q[1] - q[0] > 0.3  # the gap a new entry must close
        else:
            assert q[1] - q[0] < 0.3


def test_lcb_validates_and_keeps_peer_advertised_q() -> None:
    with pytest.raises(InvalidInput, match="level"):
        BetaLCBUtility(level=0.7)
    with pytest.raises(InvalidInput, match="lcb_gamma"):
        BetaLCBUtility(lcb_gamma=0.0)
    h = BetaLCBUtility()
    assert h.q({"q_adv": 0.4}) == pytest.approx(0.4)
    with pytest.raises(InvalidInput, match="helpfulness"):
        create_policy("curator", **{"rho.helpfulness": "bogus"})
    pol = create_policy("curator/lcb")
    pol.attach(8)
    assert isinstance(pol.scorer.helpfulness, BetaLCBUtility)


def _entries(n: int, successes: list[int]) -> tuple[list[Entry], np.ndarray]:
    E = np.tile(np.eye(1, 8, 0, dtype=np.float32), (n, 1))
    ents = [
        Entry(f"e{i}", "ns", "raw", "Task: t\nAction: SELECT 1;", 400, 400, E[i],
              successes=successes[i], uses=successes[i], created_step=i,
              stats={"q_n": 3.0, "q_r": 3.0, "n_in": 3.0, "r_in": 3.0})
        for i in range(n)
    ]  # fmt: skip
    return ents, E


def test_margin_zero_is_rho_density_and_margin_holds_proven_entries() -> None:
    base = create_policy("curator")
    same = create_policy("curator", **{"keep.keep": {"name": "rho-density-margin"}})
    held = create_policy("curator/margin")
    for p in (base, same, held):
        p.attach(8)
        p.observe_query(np.eye(1, 8, 0)[0])
    ents, E = _entries(2, [3, 0])  # identical entries; e0 proven (3 successes), e1 new
    pb = base.priority(ents, E, 5)
    assert np.array_equal(pb, same.priority(ents, E, 5))
    ph = held.priority(ents, E, 5)
    assert pb[0] == pytest.approx(pb[1]) and pb[0] > 0  # level under plain rho-density
    assert ph[0] == pytest.approx(pb[0] * 1.5) and ph[1] == pytest.approx(pb[1])
    with pytest.raises(InvalidInput, match="margin"):
        create_policy(
            "curator/margin", **{"keep.keep": {"name": "rho-density-margin", "margin": -1.0}}
        )


def _raw(task: str, sql: str) -> str:
    return f"Task: {task}\nObservation: Table pay(mid INT, amt INT)\nAction: {sql}\nOutcome: ok"


def test_dedup_rejects_a_variant_of_a_resident_request_and_admits_drift() -> None:
    mem = Memory(policy="curator/dedup", max_bytes=60_000)
    a = mem.write(_raw("Member 102 paid 75", "INSERT INTO pay VALUES (102, 75);"), kind="raw")
    b = mem.write(_raw("Member 205 paid 90", "INSERT INTO pay VALUES (205, 90);"), kind="raw")
    assert a.admitted and not b.admitted
    assert f"duplicate of resident {a.id}" in b.reason
    # after a schema migration the same request has another skeleton: admitted
    c = mem.write(_raw("Member 205 paid 90", "INSERT INTO payment VALUES (205, 90);"), kind="raw")
    assert c.admitted
    # another request (different SQL skeleton) is not a duplicate
    d = mem.write(
        _raw("Total paid by 205", "SELECT SUM(amt) FROM pay WHERE mid = 205;"), kind="raw"
    )
    assert d.admitted
    rejects = [x for x in mem.decisions() if x.action == "reject"]
    assert [x.entry_id for x in rejects] == [b.id] and "duplicate" in rejects[0].reason
    # plain curator admits the variant: the default is unchanged
    plain = Memory(policy="curator", max_bytes=60_000)
    plain.write(_raw("Member 102 paid 75", "INSERT INTO pay VALUES (102, 75);"), kind="raw")
    assert plain.write(_raw("Member 205 paid 90", "INSERT INTO pay VALUES (205, 90);")).admitted


def test_dedup_readmits_when_the_resident_twin_fails() -> None:
    mem = Memory(policy="curator/dedup", max_bytes=60_000)
    a = mem.write(_raw("Member 102 paid 75", "INSERT INTO pay VALUES (102, 75);"), kind="raw")
    mem.feedback([a.id], 0.0)
    b = mem.write(_raw("Member 205 paid 90", "INSERT INTO pay VALUES (205, 90);"), kind="raw")
    assert b.admitted


def test_tokenworth_bytes_capacity_runs_the_coverage_quality_rules() -> None:
    def run(name: str) -> list[str]:
        mem = Memory(policy=name, vector_dtype="float32", max_bytes=12_000)
        mem.policy.set_budget(mem.max_bytes)  # what the bench runner does
        for i in range(14):
            mem.recall(f"task kind {i % 7} number {i}", k=1)
            mem.write(f"Task: task kind {i % 7} number {i}\nAction: SELECT {i} FROM t{i % 7};")
        return [d.reason for d in mem.decisions() if d.action in ("admit", "reject")]

    plain = run("tokenworth")
    assert all("capacity remains" in r for r in plain if "/64" in r)
    tied = run("tokenworth/bytes-capacity")
    full = [r for r in tied if r.startswith("bank full")]
    assert full, tied
    cap = int(full[0].split("/")[1].split(")")[0])
    assert 3 <= cap <= 5  # 12,000 bytes / ~2.4 KB per entry


def test_margin_lifts_proven_entries_in_the_negative_regime_too() -> None:
    """Net value is negative for most entries on the SQL stream (harm exceeds value): the margin
    must still hold proven entries there, and never above a positive one."""
    from memcurator.policy.keep_margin import RhoDensityMargin

    class Fixed(RhoDensityMargin):
        def __init__(self, pr: np.ndarray, **kw: float) -> None:
            super().__init__(**kw)  # type: ignore[arg-type]
            self._pr = pr

    import memcurator.policy.keep as keep_mod

    ents, E = _entries(3, [3, 0, 0])
    pr = np.array([-1.5, -1.2, 1e-5])  # proven negative, new negative, new positive
    orig = keep_mod.RhoDensity.priority
    keep_mod.RhoDensity.priority = lambda self, e, M, s: self._pr  # type: ignore[method-assign]
    try:
        out = Fixed(pr, margin=0.5).priority(ents, E, 0)
        big = Fixed(pr, margin=5.0).priority(ents, E, 0)
    finally:
        keep_mod.RhoDensity.priority = orig  # type: ignore[method-assign]
    assert out[0] == pytest.approx(-0.75) and out[0] > out[1] and out[2] == pr[2]
    assert big[0] < 0 < big[2]
