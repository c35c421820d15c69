"""Keep prices an entry released off probation on evidence like the agent's own (issue 33).

Traced in the peer bench (rotating, fake executor): a peer entry released on a verified signed
outcome kept ψ's ``peer`` flag, so its provenance hazard Ĥ was twice an own entry's
(median 0.43 vs 0.21) and its ρ the lowest resident; 46 of 48 released entries were evicted
before the tasks they were for. Released entries (a verified outcome, a contained trial) are
now priced at the channel they were released to; withdrawn, at their origin again.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.trust.outcome import sign_outcome
from memcurator.trust.provenance import CORROBORATED, PROBATION, priced_channel
from tests.test_peer_outcome import TEXTS, _claim, _entry, _ring, _signed


def _terms(mem: Memory) -> dict[str, tuple[float, float]]:
    """text -> (π, ρ) of every resident, from the policy's own ρ estimator."""
    ents = mem.entries()
    E = np.vstack([m.embedding for m in ents])
    t = mem.policy.estimator("rho").terms(ents, E)
    return {m.text: (float(t.pi[i]), float(t.rho[i])) for i, m in enumerate(ents)}


@pytest.fixture
def receiver() -> Memory:
    mem = Memory(namespace="p2", policy="curator", keyring=_ring("p2"))
    yield mem
    mem.close()


@pytest.fixture
def own() -> Memory:
    mem = Memory(namespace="p2", policy="curator")  # no key ring: a plain write is the agent's
    yield mem
    mem.close()


@pytest.mark.parametrize(
    ("trust", "origin", "priced"),
    [
        ({}, "peer", "peer"),
        ({}, "external", "external"),
        ({}, "self", "self"),
        ({PROBATION: {"since": 0}}, "peer", "peer"),
        ({CORROBORATED: ["outcome"]}, "peer", "self"),
        ({CORROBORATED: ["agreement"]}, "external", "self"),
        ({CORROBORATED: ["trial"], PROBATION: {"since": 3}}, "peer", "peer"),  # withdrawn
    ],
)
def test_priced_channel(trust: dict, origin: str, priced: str) -> None:
    assert priced_channel(trust, origin) == priced  # type: ignore[arg-type]


def test_a_claim_released_peer_entry_carries_an_own_entrys_hazard(
    receiver: Memory, own: Memory
) -> None:
    for text in TEXTS[:2]:  # released on a verified outcome
        receiver.receive([_entry(text, "p1", "p2", _signed(text))], peer="p1")
    for text in TEXTS[2:]:  # no claim: held on probation
        receiver.receive([_entry(text, "p1", "p2", None)], peer="p1")
    for text in TEXTS:
        own.write(text)
    got, ref = _terms(receiver), _terms(own)
    for text in TEXTS[:2]:
        assert PROBATION not in next(m for m in receiver.entries() if m.text == text).trust
        assert got[text][0] == pytest.approx(ref[text][0])
    for text in TEXTS[2:]:  # unproven: still priced as a peer's
        assert got[text][0] > ref[text][0] + 1e-6
    # the released entries outrank the held ones on ρ (same sender, same advertised numbers)
    assert min(got[t][1] for t in TEXTS[:2]) > max(got[t][1] for t in TEXTS[2:])


def test_a_withdrawn_release_is_priced_as_its_origin_again(receiver: Memory) -> None:
    for text in TEXTS[:2]:
        receiver.receive([_entry(text, "p1", "p2", _signed(text))], peer="p1")
    before = _terms(receiver)
    ids = [m.id for m in receiver.entries()]
    receiver.feedback(ids, 0.0)  # two failures: p1 loses standing, its releases are withdrawn
    assert all(PROBATION in m.trust for m in receiver.entries())
    after = _terms(receiver)
    for text in TEXTS[:2]:
        assert after[text][0] > before[text][0] + 1e-6


def test_a_trial_released_external_entry_carries_an_own_entrys_hazard(
    receiver: Memory, own: Memory
) -> None:
    text = TEXTS[1]
    res = receiver.write(text, origin="external", origin_detail="feed")
    assert res.admitted and PROBATION in receiver.entries()[0].trust
    held = _terms(receiver)[text][0]
    assert receiver.trial_outcome(res.id, True, "contained trial passed")
    own.write(text)
    released = _terms(receiver)[text][0]
    assert released == pytest.approx(_terms(own)[text][0])
    assert held > released + 1e-6


def test_under_a_full_budget_a_released_entry_outlives_a_held_copy() -> None:
    """Two receivers, one sender's same four entries; one gets them with claims (released),
    the other without (held). Then each writes its own records until the budget evicts: the
    released entries outlive the held ones (before: the same, all evicted)."""
    out = {}
    for with_claims in (True, False):
        mem = Memory(
            namespace="p2",
            policy="curator",
            keyring=_ring("p2"),
            vector_dtype="float32",
            max_bytes=14_000,
        )
        try:
            for text in TEXTS:
                so = sign_outcome(_ring("p1"), _claim(text), to="p2", sender="p1")
                mem.receive([_entry(text, "p1", "p2", so if with_claims else None)], peer="p1")
            for i in range(8):  # the agent's own signed records
                t = (
                    f"Task: Count the rows of table t{i} where x > {i}.\n"
                    f"Action: SELECT COUNT(*) FROM t{i} WHERE x > {i};"
                )
                mem.write(t, signature=mem.sign(t))
            left = {m.text for m in mem.entries()}
            out[with_claims] = sum(t in left for t in TEXTS)
        finally:
            mem.close()
    assert out[True] > out[False]
