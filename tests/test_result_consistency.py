"""Result objects whose fields never contradict each other (issue 31, item 5).

The kind: ``write`` returned ``admitted=True`` with its own id in ``evicted`` (the Keep pass the
write triggered evicted it), so a caller that checks ``admitted`` believed the entry stored. Now
``admitted`` means "in memory after the call" for write, update and receive, and a
:class:`WriteResult` that says otherwise cannot be built."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memcurator import Memory
from memcurator.errors import BudgetExceeded, InvalidInput
from memcurator.lifecycle.write import WriteResult


def _text(i: int, rng: random.Random) -> str:
    cols = "x, " * rng.randrange(1, 60)
    return f"Task: note {i} about table t{rng.randrange(40)}\nAction: SELECT {cols}y FROM t{i};"


def _check(mem: Memory, r: WriteResult) -> None:
    resident = {e.id for e in mem.entries()}
    assert r.admitted == (r.id in resident), r
    assert not (r.admitted and r.id in r.evicted)
    if not r.admitted and r.id in r.evicted:
        assert "evicted by the Keep pass" in r.reason


@pytest.mark.parametrize("policy", ["curator", "tokenworth", "lru", "curator/channel-trust"])
def test_admitted_means_resident_after_write_and_update(policy: str) -> None:
    mem = Memory(policy=policy, max_bytes=9000)
    rng = random.Random(0)
    self_evicted = 0
    for i in range(120):
        try:
            r = mem.write(_text(i, rng))
        except BudgetExceeded:
            continue
        _check(mem, r)
        self_evicted += r.id in r.evicted
        if i % 7 == 3 and len(mem):
            eid = rng.choice(mem.entries()).id
            try:
                u = mem.update(eid, _text(1000 + i, rng) + " -- corrected")
            except BudgetExceeded:
                continue
            _check(mem, u)
    if policy in ("curator", "tokenworth"):
        assert self_evicted > 0  # the case this test is about did occur


def test_a_self_evicted_write_is_logged_admitted_then_evicted() -> None:
    mem = Memory(policy="curator", max_bytes=9000)
    rng = random.Random(0)
    for i in range(120):
        r = mem.write(_text(i, rng))
        if r.id in r.evicted:
            acts = [d.action for d in mem.decisions() if d.entry_id == r.id]
            assert acts == ["admit", "evict"] and not r.admitted
            return
    pytest.fail("no write was evicted by its own Keep pass")


def test_received_entries_follow_the_same_rule() -> None:
    a = Memory(policy="curator", max_bytes=None)
    b = Memory(policy="curator", max_bytes=4000)
    rng = random.Random(1)
    for i in range(40):
        a.write(_text(i, rng))
    sent = a.share(np.asarray(b.sketch), 50_000)
    for r in b.receive(sent, peer="a"):
        _check(b, r)


def test_a_contradictory_write_result_cannot_be_built() -> None:
    with pytest.raises(InvalidInput, match="cannot be admitted"):
        WriteResult("e1", True, "ok", evicted=["e1"])
    assert not WriteResult.kept("e1", "ok", 0.5, ["e1"], []).admitted
    assert WriteResult.kept("e1", "ok", 0.5, ["e2"], []).admitted
