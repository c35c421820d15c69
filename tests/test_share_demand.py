"""Demand-driven sharing (issue 33): a receiver that lacks a task publishes its key, peers
offer the entry of exactly that task (or, asked so, of a similar one), the receiver fetches one
and checks it is what was offered; every byte is counted against the sender's uplink."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.errors import InvalidInput
from memcurator.policy.share import (
    KEY_BYTES,
    Demand,
    Offer,
    SharedEntry,
    answers,
    entry_task,
    task_key,
)
from memcurator.trust.outcome import OutcomeClaim, state_hash, text_sha
from memcurator.trust.provenance import injectable

TASKS = [
    "Count the orders placed by customer 17",
    "Count the orders placed by customer 23",  # a sibling: another literal, same family
    "Sum the amounts of the orders of region 4",
    "List the names of the open stores",
]
ACTIONS = [
    "SELECT COUNT(*) FROM orders WHERE customer_id = 17;",
    "SELECT COUNT(*) FROM orders WHERE customer_id = 23;",
    "SELECT SUM(amount) FROM orders WHERE region = 4;",
    "SELECT name FROM stores WHERE open = 1;",
]
TEXTS = [f"Task: {t}\nAction: {a}" for t, a in zip(TASKS, ACTIONS, strict=True)]


def _claim(text: str, verdict: str = "pass") -> OutcomeClaim:
    action = text.split("Action: ", 1)[1]
    return OutcomeClaim("t", action, verdict, state_hash([[1]]), text_sha(text))


def _memory(which: list[int], verdict: str = "pass") -> tuple[Memory, dict[str, OutcomeClaim]]:
    mem = Memory(policy="curator", max_bytes=10**6)
    oc = {}
    for i in which:
        eid = str(mem.write(TEXTS[i]).id)
        oc[eid] = _claim(TEXTS[i], verdict)
    return mem, oc


@pytest.mark.parametrize(
    "a,b,same",
    [
        ("Count rows.", "Count rows.", True),
        ("Count  rows.\n", " Count rows.", True),
        ("Count rows.", "Count Rows.", False),  # case kept: literals are case-sensitive
        ("Count rows of 17.", "Count rows of 23.", False),
    ],
)
def test_task_key_folds_whitespace_only(a: str, b: str, same: bool) -> None:
    assert (task_key(a) == task_key(b)) is same
    assert len(task_key(a)) == KEY_BYTES


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_task_key_refuses_no_task(bad: object) -> None:
    with pytest.raises(InvalidInput):
        task_key(bad)  # type: ignore[arg-type]


def test_demand_counts_its_bytes_and_checks_its_fields() -> None:
    d = Demand.of(TASKS[0])
    assert d.text is None and d.bytes == KEY_BYTES
    dt = Demand.of("Zählen: 17", with_text=True)
    assert dt.bytes == KEY_BYTES + len("Zählen: 17".encode())
    with pytest.raises(InvalidInput):
        Demand(b"short")
    with pytest.raises(InvalidInput):
        Demand(task_key("x"), "  ")
    o = Offer("abc", 0.1, True, 500)
    assert o.bytes == 3 + 9  # what crosses: id, score, flag, size; not q or a


@pytest.mark.parametrize(
    "text,task",
    [
        (TEXTS[0], TASKS[0]),
        ("Task: a b  \nAction: x", "a b"),
        ("Action: x\nTask: later line", None),  # the task line must come first
        ("remove stopwords before indexing", None),
    ],
)
def test_entry_task_reads_the_insight_format(text: str, task: str | None) -> None:
    assert entry_task(text) == task


def test_answers_accepts_only_the_demanded_task() -> None:
    e = SharedEntry(TEXTS[0], "insight", 1, 0.0, 1.0, 0.0, "e")
    assert answers(Demand.of(TASKS[0]), e)
    assert not answers(Demand.of(TASKS[1]), e)  # a sibling is not the task
    assert not answers(Demand.of(TASKS[0]), SharedEntry("free text", "insight", 1, 0, 1, 0, "e"))


@pytest.mark.parametrize("want", [0, 1, 2])
def test_offer_names_the_entry_of_exactly_the_demanded_task(want: int) -> None:
    mem, oc = _memory([0, 1, 2, 3])
    try:
        o = mem.offer(Demand.of(TASKS[want]), outcomes=oc, peer="p", sender="me", to="p")
        assert o is not None and o.exact
        assert mem.get(o.source_id).text == TEXTS[want]
        assert o.rho_s > 0 and o.wire > len(TEXTS[want])  # the frame, envelope and claim
        assert mem.decisions(action="share") == []  # an offer sends nothing yet
        se = mem.fetch(o, sender="me", to="p", peer="p", outcomes=oc)
        assert se is not None and se.text == TEXTS[want]  # unsigned: no keyring here
        assert answers(Demand.of(TASKS[want]), se)
        assert [d.entry_id for d in mem.decisions(action="share")] == [o.source_id]
    finally:
        mem.close()


def test_no_offer_without_the_task_unless_similar_is_asked() -> None:
    mem, oc = _memory([1, 2])
    try:
        assert mem.offer(Demand.of(TASKS[0]), outcomes=oc) is None  # only a sibling held
        o = mem.offer(Demand.of(TASKS[0], with_text=True), outcomes=oc, match_cos=0.5)
        assert o is not None and not o.exact
        assert mem.get(o.source_id).text == TEXTS[1]  # the sibling, not the other family
        # a key-only demand cannot be matched by similarity (the sender lacks the text)
        assert mem.offer(Demand.of(TASKS[0]), outcomes=oc, match_cos=0.5) is None
        assert mem.offer(Demand.of(TASKS[3], with_text=True), outcomes=oc, match_cos=0.99) is None
    finally:
        mem.close()


def test_offer_keeps_out_failures_unverified_and_the_peers_own() -> None:
    mem, oc = _memory([0], verdict="fail")
    try:  # a verified fail is evidence the entry misleads: never sent
        assert mem.offer(Demand.of(TASKS[0]), outcomes=oc) is None
    finally:
        mem.close()
    mem, _ = _memory([0])
    try:  # no verdict and no reuse: q ≈ 0, ρ_s <= τ (as Share)
        assert mem.offer(Demand.of(TASKS[0]), outcomes={}) is None
    finally:
        mem.close()


def test_received_entries_are_not_offered_back_and_probation_is_not_coverage() -> None:
    a = Memory(policy="curator", max_bytes=10**6)
    b = Memory(policy="curator", max_bytes=10**6)
    try:
        eid = str(a.write(TEXTS[0]).id)
        oc = {eid: _claim(TEXTS[0])}
        o = a.offer(Demand.of(TASKS[0]), outcomes=oc, peer="b")
        assert o is not None
        se = a.fetch(o, peer="b", outcomes=oc)
        assert se is not None
        res = b.receive([se], peer="a")
        assert res[0].admitted
        m = b.get(res[0].id)
        # unsigned, no keyring: held on probation, so b does not cover the task with it
        assert b.covers(TASKS[0]) is injectable(m)
        assert not b.covers(TASKS[1])
        # whatever b holds from a is never offered back to a
        assert b.offer(Demand.of(TASKS[0]), peer="a") is None
    finally:
        a.close()
        b.close()


def test_fetch_after_forget_sends_nothing() -> None:
    mem, oc = _memory([0, 2])
    try:
        o = mem.offer(Demand.of(TASKS[2]), outcomes=oc)
        assert o is not None
        mem.forget(o.source_id)
        assert mem.fetch(o, outcomes=oc) is None
        assert mem.decisions(action="share") == []
    finally:
        mem.close()


@pytest.mark.parametrize(
    "bad", [{"match_cos": 0.0}, {"match_cos": 1.5}, {"outcomes": {"x": "pass"}}]
)
def test_offer_refuses_bad_arguments(bad: dict[str, object]) -> None:
    mem, _ = _memory([0])
    try:
        with pytest.raises(InvalidInput):
            mem.offer(Demand.of(TASKS[0]), **bad)
        with pytest.raises(InvalidInput):
            mem.offer("a task", outcomes={})
        with pytest.raises(InvalidInput):
            mem.fetch("abc")
    finally:
        mem.close()


def test_a_non_sharing_policy_cannot_offer() -> None:
    mem = Memory(policy="lru", max_bytes=10**6)
    try:
        mem.write(TEXTS[0])
        with pytest.raises(InvalidInput):
            mem.offer(Demand.of(TASKS[0]))
        assert mem.covers(TASKS[0]) and not mem.covers(TASKS[1])
    finally:
        mem.close()


def test_offer_prefers_higher_share_score_among_exact_copies() -> None:
    mem, oc = _memory([0])
    try:
        other = "Task: " + TASKS[0] + "\nAction: SELECT COUNT(*) FROM orders WHERE customer_id=17"
        eid = str(mem.write(other).id)
        o = mem.offer(Demand.of(TASKS[0]), outcomes=oc)  # only the first has a verified pass
        assert o is not None and o.source_id != eid
        both = {**oc, eid: _claim(other)}
        o2 = mem.offer(Demand.of(TASKS[0]), outcomes=both)
        assert o2 is not None and np.isfinite(o2.rho_s)
    finally:
        mem.close()
