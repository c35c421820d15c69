"""Bounded release credit (issue 33, session 16): a peer's verified outcome claims release at
most ``release_credit + earned − strikes`` entries whose outcome the receiver has not seen; the
rest wait on probation and are released as the receiver confirms earlier releases."""

from __future__ import annotations

import pytest

from memcurator import Memory
from memcurator.errors import InvalidInput
from memcurator.trust.outcome import OUTCOME
from memcurator.trust.provenance import PROBATION, injectable
from memcurator.trust.reputation import PeerReputation
from tests.test_peer_outcome import _entry, _ring, _signed

TABLES = ("orders", "customers", "staff", "products", "invoices", "shipments", "stores")
TEXTS = [f"Task: Count the rows of {t}.\nAction: SELECT COUNT(*) FROM {t};" for t in TABLES]


def _send(mem: Memory, text: str, peer: str = "p1") -> str:
    (r,) = mem.receive([_entry(text, peer, "p2", _signed(text, sender=peer))], peer=peer)
    assert r.admitted and r.id is not None
    return r.id


@pytest.fixture
def mem() -> Memory:
    m = Memory(namespace="p2", policy="curator", keyring=_ring("p2"))
    yield m
    m.close()


def _status(mem: Memory) -> dict[str, str]:
    return {e.id: e.trust[OUTCOME]["status"] for e in mem.entries()}


# ------------------------------------------------------------------------------- reputation
@pytest.mark.parametrize("c", [0, 1, 2, 4])
def test_a_peer_without_confirmations_releases_at_most_its_credit(c: int) -> None:
    rep = PeerReputation(release_credit=c)
    n = 0
    for i in range(10):
        if rep.may_release("p1") == "":
            rep.note_release("p1", f"e{i}")
            n += 1
    assert n == c
    assert "no release credit" in rep.may_release("p1")


def test_confirmations_earn_credit_up_to_the_cap_and_a_failure_resets_it() -> None:
    rep = PeerReputation(release_credit=2, max_credit=5)
    i = 0
    for _ in range(10):  # release all it may, then confirm them all
        while rep.credit("p1"):
            rep.note_release("p1", f"e{i}")
            i += 1
        for e in rep.pending("p1"):
            rep.learn_claim("p1", 1.0, e)
    assert rep.credit("p1") == 5  # the cap: never more than max_credit outstanding
    for e in [f"x{j}" for j in range(5)]:
        rep.note_release("p1", e)
    rep.learn_claim("p1", 0.0, "x0")  # one failure: earned gone, a strike
    assert rep.credit("p1") == 0  # window 2, 4 pending, 1 strike
    assert rep.good_standing("p1") == ""  # still in standing: the credit is what bounds it
    # a second success of an already settled entry earns nothing
    rep.learn_claim("p1", 1.0, "e0")
    assert rep.credit("p1") == 0
    back = PeerReputation(release_credit=2, max_credit=5)
    back.load_state(rep.state())
    assert back.pending("p1") == rep.pending("p1") and back.credit("p1") == rep.credit("p1")


def test_credit_parameters_are_checked() -> None:
    with pytest.raises(InvalidInput):
        PeerReputation(release_credit=3, max_credit=2)
    with pytest.raises(InvalidInput):
        PeerReputation(release_credit=-1)


# -------------------------------------------------------------------------- through Memory
def test_claims_beyond_the_credit_wait_and_are_released_as_releases_are_confirmed(
    mem: Memory,
) -> None:
    ids = [_send(mem, t) for t in TEXTS[:5]]
    st = _status(mem)
    assert [st[i] for i in ids[:2]] == ["released", "released"]
    assert all(st[i].startswith("waiting: no release credit") for i in ids[2:])
    by = {e.id: e for e in mem.entries()}
    assert all(not injectable(by[i]) for i in ids[2:])
    mem.feedback([ids[0]], 1.0)  # the receiver saw one release work: credit 3 - 1 pending
    st = _status(mem)
    assert [st[i] for i in ids] == ["released"] * 4 + [st[ids[4]]]
    assert st[ids[4]].startswith("waiting")
    freed = [d for d in mem.decisions() if "credit freed" in d.reason]
    assert {d.entry_id for d in freed} == {ids[2], ids[3]}
    assert all(d.action == "corroborate" for d in freed)


def test_a_compromised_peer_releases_at_most_its_credit_before_detection(mem: Memory) -> None:
    ids = [_send(mem, t) for t in TEXTS]
    released = [i for i, s in _status(mem).items() if s == "released"]
    assert len(released) == 2  # of 7 valid claims: the constant, not a share
    mem.feedback(released, 0.0)  # both failed here
    rep = mem.policy.estimator("reputation").rep
    assert rep.standing_lost("p1") == (2, 2)
    assert all(PROBATION in e.trust for e in mem.entries())
    # nothing that waited is released after the failures
    assert not any(s == "released" for s in _status(mem).values())
    # another peer keeps its own credit
    other = _send(mem, "Task: Sum the totals of refunds.\nAction: SELECT SUM(total) FROM refunds;",
                  peer="p3")  # fmt: skip
    assert _status(mem)[other] == "released"
    assert len(ids) == 7


def test_a_failure_stops_releases_until_a_success_pays_the_strike(mem: Memory) -> None:
    a, b = _send(mem, TEXTS[0]), _send(mem, TEXTS[1])
    mem.feedback([a], 0.0)  # window 2, 1 pending, 1 strike: nothing more now
    c = _send(mem, TEXTS[2])
    assert _status(mem)[c].startswith("waiting")
    mem.feedback([b], 1.0)  # pays the strike, earns one: credit 3 - 0 - 0
    assert _status(mem)[c] == "released"
