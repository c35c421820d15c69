"""Keep that covers the workload (issue 35, item 2): a second exemplar of a covered request
pattern is worth less than the first of an uncovered one; redundancy comes from the residents'
embeddings only (memcurator.value.coverage, RhoDensity(coverage=True))."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.bench.measures import FamilyCoverage, recurring_families, resident_coverage
from memcurator.errors import InvalidInput
from memcurator.policy import create_policy
from memcurator.policy.keep import RhoDensity
from memcurator.value.coverage import (
    coverage_priority,
    near_neighbours,
    redundancy_to_kept,
)


def _unit(rows: list[list[float]]) -> np.ndarray:
    E = np.asarray(rows, dtype=np.float64)
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def _order(pr: np.ndarray) -> list[int]:
    """Keep's fill order: descending priority, ties to the later row."""
    n = len(pr)
    return np.lexsort((-np.arange(n), -pr)).tolist()


def _family_vectors(rng: np.random.Generator, n_fam: int, per: list[int], d: int = 32) -> tuple:
    """Exemplars around one centre per family: cosine within a family ~0.98, across ~0."""
    centres = rng.standard_normal((n_fam, d))
    rows, fam = [], []
    for f in range(n_fam):
        for _ in range(per[f]):
            rows.append(centres[f] + 0.1 * rng.standard_normal(d))
            fam.append(f)
    return _unit(rows), np.array(fam)


# ---------------------------------------------------------------- the ordering itself
@pytest.mark.parametrize("net_sign", ["positive", "negative"])
def test_second_exemplar_ranks_below_first_of_uncovered_family(net_sign: str) -> None:
    """Family A has two exemplars, each alone worth more than family B's only one; with one slot
    for two, A's second goes first — whether net values are positive or all negative (the
    SQL stream's regime, where harm exceeds value for every entry)."""
    E = _unit([[1, 0, 0], [0.99, 0.1, 0], [0, 0, 1]])
    V = np.array([0.5, 0.48, 0.3])
    H = np.zeros(3) if net_sign == "positive" else np.full(3, 0.8)
    pr = coverage_priority(V, H, np.full(3, 100.0), 1.0, near_neighbours(E, 0.7))
    assert _order(pr) == [0, 2, 1]
    # alone (no redundancy), A's second would outrank B
    alone = coverage_priority(V, H, np.full(3, 100.0), 1.0, [(np.zeros(0, int), np.zeros(0))] * 3)
    assert _order(alone) == [0, 1, 2]


def test_two_exemplars_against_one_over_many_families() -> None:
    """Slots below the number of families: every family's first exemplar precedes every second
    one, whatever the values, and the best exemplar of each family is the one taken first."""
    rng = np.random.default_rng(3)
    E, fam = _family_vectors(rng, 6, [3, 1, 2, 1, 2, 1])
    V = rng.uniform(0.1, 0.9, len(fam))
    H = rng.uniform(0.0, 0.05, len(fam))
    pr = coverage_priority(V, H, np.full(len(fam), 200.0), 1.0, near_neighbours(E, 0.7))
    order = _order(pr)
    firsts = order[:6]
    assert sorted(fam[firsts].tolist()) == list(range(6))  # one of each family first
    for f in range(6):
        members = np.flatnonzero(fam == f)
        assert order.index(int(members[np.argmax(V[members])])) < 6  # its best is its first


def test_near_duplicates_with_different_surface_text_through_memory() -> None:
    """Exemplars of one request that differ in literals and wording are redundant for
    curator/align's Keep: under a budget for four entries, the four request patterns stay
    covered and the evictions take the second exemplars."""
    pats = {
        "emails": "Task: get the email of user {v}\nAction: SELECT email FROM users WHERE "
        "id = {v};",
        "orders": "Task: count orders placed in {v}\nAction: SELECT COUNT(*) FROM orders WHERE "
        "year = {v};",
        "cheap": "Task: list products cheaper than {v} dollars\nAction: SELECT * FROM products "
        "WHERE price < {v};",
        "stock": "Task: which warehouses hold more than {v} crates of stock\nAction: SELECT w "
        "FROM stock WHERE crates > {v};",
    }
    writes = [("emails", 17), ("emails", 18), ("orders", 2021), ("emails", 19),
              ("orders", 2022), ("cheap", 5), ("stock", 40)]  # fmt: skip
    probe = Memory(policy="curator/align", max_bytes=None)
    sizes = [probe.write(pats[f].format(v=v)).id for f, v in writes]
    by_id = {m.id: m.bytes for m in probe.entries()}
    budget = sum(sorted(by_id[i] for i in sizes)[-4:]) + 10  # room for four, not five
    m = Memory(policy="curator/align", vector_dtype="float32", max_bytes=budget)
    fam_of = {}
    for f, v in writes:
        fam_of[m.write(pats[f].format(v=v)).id] = f
    kept = {fam_of[e.id] for e in m.entries()}
    assert kept == set(pats)  # every pattern covered
    assert len(m.entries()) == 4
    ev = m.decisions(action="evict")
    assert ev and all(fam_of[d.entry_id] in ("emails", "orders") for d in ev)
    assert all("redundancy" in d.reason for d in ev if "net-value" in d.reason)
    # the same stream under plain curator (distinct facts, issue 19) may leave a pattern bare
    plain = Memory(policy="curator", vector_dtype="float32", max_bytes=budget)
    for f, v in writes:
        plain.write(pats[f].format(v=v))
    assert len(plain.entries()) >= 3


def test_large_entry_of_covered_family_goes_before_small_one_of_uncovered() -> None:
    """A large exemplar of a covered family and a small one of an uncovered family: the large
    one ranks last even when, alone, its value is higher (and per byte equal)."""
    E = _unit([[1, 0], [0.98, 0.2], [0, 1]])
    V = np.array([0.6, 0.9, 0.3])  # the covered family's second (row 1) is worth most alone
    b = np.array([500.0, 1500.0, 500.0])
    pr = coverage_priority(V, np.zeros(3), b, 1.0, near_neighbours(E, 0.7))
    assert _order(pr)[-1] == 1
    r = redundancy_to_kept(near_neighbours(E, 0.7), pr, 0.7, 0.9)
    assert r[1] == pytest.approx(1.0) and r[0] == 0.0 and r[2] == 0.0


def test_ties_go_to_the_newer_entry_and_the_older_duplicate_ranks_last() -> None:
    """Three entries of equal value, rows 0 and 1 identical: ties go to the later row, as Keep's
    fill breaks them, so of the duplicate pair the newer (row 1) is taken and the older ranks
    last."""
    E = _unit([[1, 0], [1, 0], [0, 1]])
    V = np.full(3, 0.5)
    pr = coverage_priority(V, np.zeros(3), np.full(3, 100.0), 1.0, near_neighbours(E, 0.7))
    assert _order(pr) == [2, 1, 0]
    assert pr[0] < pr[1] == pr[2]


def test_partial_similarity_discounts_partially() -> None:
    """Below δ₀ nothing changes; between δ₀ and δ₁ the discount grows with the cosine."""

    def second_key(cos: float) -> float:
        E = _unit([[1, 0], [cos, np.sqrt(1 - cos * cos)]])
        pr = coverage_priority(
            np.array([0.9, 0.5]), np.zeros(2), np.full(2, 10.0), 1.0, near_neighbours(E, 0.7)
        )
        return float(pr[1])

    keys = [second_key(c) for c in (0.5, 0.69, 0.75, 0.8, 0.85, 0.95)]
    assert keys[0] == keys[1] == pytest.approx(0.05)  # alone: 0.5 / 10
    assert keys[1] > keys[2] > keys[3] > keys[4] > keys[5]
    assert keys[4] > keys[5] == second_key(0.99)  # saturated at δ₁


def test_greedy_is_the_exact_marginal_greedy() -> None:
    """The lazy greedy equals the plain greedy that rescores every candidate at every step."""
    rng = np.random.default_rng(11)
    E, _ = _family_vectors(rng, 5, [3, 2, 4, 1, 2])
    n = E.shape[0]
    V, H, b = rng.uniform(0, 1, n), rng.uniform(0, 0.6, n), rng.uniform(100, 900, n)
    nb = near_neighbours(E, 0.7)
    pr = coverage_priority(V, H, b, 1.0, nb)
    C = E @ E.T
    alone_net = V - H
    alone = np.where(alone_net > 0, alone_net / b, -1 + np.tanh(alone_net))
    gamma = alone.max() - alone.min() + 1
    taken: list[int] = []
    while len(taken) < n:
        best, bi = -np.inf, -1
        for i in range(n):
            if i in taken:
                continue
            c = max((C[i, j] for j in taken), default=-1.0)
            r = float(np.clip((c - 0.7) / 0.2, 0, 1))
            net = V[i] - r * max(V[i], 0) - H[i]
            k = (net / b[i] if net > 0 else -1 + np.tanh(net)) - r * gamma
            if k > best or (k == best and i > bi):
                best, bi = k, i
        taken.append(bi)
    assert _order(pr) == taken


# ---------------------------------------------------------------- the component
def test_rho_density_coverage_flag_and_bad_settings() -> None:
    assert RhoDensity().coverage is False  # plain CURATOR: distinct facts (issue 19)
    keep = create_policy("curator/align")._keep
    inner = getattr(keep, "_inner", keep)
    assert inner.coverage is True
    with pytest.raises(InvalidInput):
        RhoDensity(coverage=True, coverage_lo=0.9, coverage_hi=0.8)
    with pytest.raises(InvalidInput):
        RhoDensity(coverage=True, coverage_lo=float("nan"))
    with pytest.raises(InvalidInput):
        RhoDensity(coverage=True, coverage_max_rows=-1)


def test_no_extra_evictions_under_coverage() -> None:
    """Coverage reorders; it never evicts what fits: under a roomy budget nothing goes."""
    m = Memory(policy="curator/align", max_bytes=10**6)
    for v in range(12):
        m.write(f"Task: get the email of user {v}\nAction: SELECT email FROM users WHERE id={v};")
    assert len(m.entries()) == 12 and not m.decisions(action="evict")


# ---------------------------------------------------------------- the measure
def test_family_coverage_measure() -> None:
    assert recurring_families(["a", "b", "a"]) == {"a"}
    assert resident_coverage(["a", None], {"a", "b"}) == 0.5
    assert np.isnan(resident_coverage(["a"], set()))
    fc = FamilyCoverage(["a", "b", "a", "b", "c"])
    fc.observe(0, [])  # a seen, not covered
    fc.observe(1, ["a"])  # a, b seen: 1/2
    fc.observe(2, ["a", "b"])
    fc.observe(3, ["b", "c"])  # c is not recurring: 1/2
    fc.observe(4, ["b"])
    out = fc.result()
    assert out["family_coverage"] == 0.5
    assert out["family_coverage_mean"] == pytest.approx((0 + 0.5 + 1 + 0.5 + 0.5) / 5)


# ---------------------------------------------------------------- distillation that pays
def _raw(i: int, pad: int) -> str:
    return (
        f"Task: count the rows of table t{i}\nObservation: "
        + "x" * pad
        + f"\nAction: SELECT COUNT(*) FROM t{i};\nOutcome: success (reward 1, solver local)"
    )


class _Padder:
    """A distiller whose 'insight' is longer than what it replaces."""

    def distill(self, text: str) -> str:
        return text + "\n" + "y" * 200


def _fill(mem: Memory, n: int, pad: int) -> list[str]:
    return [mem.write(_raw(i, pad), kind="raw").id for i in range(n)]


def test_distillation_that_saves_bytes_happens_and_is_logged() -> None:
    probe = Memory(policy="curator", max_bytes=None)
    ids = _fill(probe, 4, 600)
    sizes = [probe.get(i).bytes for i in ids]
    m = Memory(
        policy="curator", vector_dtype="float32", max_bytes=sum(sizes) - 200
    )  # short of the last by 200 bytes
    _fill(m, 4, 600)
    d = m.decisions(action="distill")
    assert d and all("->" in x.reason for x in d)
    for x in d:
        old, new = (int(v) for v in x.reason.split(": ")[1].split(" bytes")[0].split(" -> "))
        assert new < old  # it paid
    assert not m.decisions(action="evict")  # the insight made room: nothing had to go
    assert m.used_bytes <= sum(sizes) - 200


def test_distillation_refused_when_not_smaller() -> None:
    probe = Memory(policy="curator", max_bytes=None)
    sizes = [probe.get(i).bytes for i in _fill(probe, 3, 300)]
    m = Memory(
        policy="curator", vector_dtype="float32", max_bytes=sum(sizes) - 50, distiller=_Padder()
    )
    _fill(m, 3, 300)
    assert not m.decisions(action="distill")
    notes = [x for x in m.decisions(action="notice") if "distillation refused" in x.reason]
    assert notes and "not smaller" in notes[0].reason
    assert len(m.decisions(action="evict")) == 1 and m.used_bytes <= sum(sizes) - 50


def test_distillation_refused_when_the_insight_would_not_fit() -> None:
    """Budget far below what even the insight needs: the raw entry is evicted as it is,
    without a rewrite that the same pass would throw away."""
    probe = Memory(policy="curator", max_bytes=None)
    sizes = [probe.get(i).bytes for i in _fill(probe, 3, 1500)]
    m = Memory(
        policy="curator", vector_dtype="float32", max_bytes=max(sizes) + 10
    )  # room for one raw entry
    _fill(m, 3, 1500)
    notes = [x for x in m.decisions(action="notice") if "would not fit" in x.reason]
    evicted = {x.entry_id for x in m.decisions(action="evict")}
    assert notes and {x.entry_id for x in notes} <= evicted
    assert not {x.entry_id for x in m.decisions(action="distill")} & evicted
