"""Demand-driven sharing, session 17 (issue 33): the compact frame of a fetched entry (nothing
the receiver can rebuild crosses, and a frame altered on the way fails the claim), the shape
key of a task (siblings: one template, other constants) and the offers made on it, and the
pull counts of the peer bench."""

from __future__ import annotations

import pytest
import test_peer_workloads as _pw

from memcurator import Memory
from memcurator.errors import InvalidInput
from memcurator.policy.share import (
    KEY_BYTES,
    SHAPE_BYTES,
    Demand,
    SharedEntry,
    answers,
    shape_key,
    task_shape,
)
from memcurator.trust.auth import Claim, KeyRing
from memcurator.trust.outcome import (
    OutcomeClaim,
    sign_outcome,
    state_hash,
    text_sha,
    verify_outcome,
)

TASKS = [
    "Count the orders placed by customer 17",
    "Count the orders placed by customer 23",  # a sibling of 0
    "Sum the amounts of the orders of region 4",
    "List the names of the stores in 'north'",
    "List the names of the stores in 'south'",  # a sibling of 3
]
ACTIONS = [
    "SELECT COUNT(*) FROM orders WHERE customer_id = 17;",
    "SELECT COUNT(*) FROM orders WHERE customer_id = 23;",
    "SELECT SUM(amount) FROM orders WHERE region = 4;",
    "SELECT name FROM stores WHERE region = 'north';",
    "SELECT name FROM stores WHERE region = 'south';",
]
TEXTS = [f"Task: {t}\nAction: {a}" for t, a in zip(TASKS, ACTIONS, strict=True)]


def _ring() -> KeyRing:
    ring = KeyRing()
    ring.add("p1", secret=b"k" * 32)
    return ring


def _signed(text: str, *, action: str | None = None, sha: str | None = None) -> SharedEntry:
    ring = _ring()
    act = action if action is not None else text.split("Action: ", 1)[1]
    claim = OutcomeClaim("t9", act, "pass", state_hash([[1]]), sha or text_sha(text))
    so = sign_outcome(ring, claim, to="me", sender="p1")
    sig = ring.sign(Claim("me", "peer", "p1", "insight", text), principal="p1")
    return SharedEntry(text, "insight", 2345, 0.25, 1.0, 1.2345678e-4, "e" * 32,
                       signature=sig, outcome=so)  # fmt: skip


@pytest.mark.parametrize("i", range(len(TEXTS)))
@pytest.mark.parametrize("known", [True, False])
def test_compact_frame_rebuilds_the_entry_and_its_claim(i: int, known: bool) -> None:
    e = _signed(TEXTS[i])
    task = TASKS[i] if known else None
    frame = e.compact("p1", task)
    assert len(frame) < e.wire_bytes("p1")
    if known:  # the task line stays home: the receiver demanded it
        assert TASKS[i].encode() not in frame
    sender, back = SharedEntry.from_compact(frame, task)
    assert sender == "p1" and back.text == e.text and back.outcome == e.outcome
    assert back.signature == e.signature and back.source_id == e.source_id
    assert back.q == 0.25 and back.rho_s == pytest.approx(1.235e-4)
    ring = _ring()
    assert verify_outcome(ring, back.outcome, namespace="me", peer="p1", text=back.text) == ""


def test_compact_frame_keeps_what_the_receiver_cannot_rebuild() -> None:
    # a claim whose action is not the text's Action line, about another text's hash, a raw
    # trajectory and another kind: all cross, and the rebuilt claim is the one signed
    e = _signed(TEXTS[0], action="COUNT(*)", sha="0" * 64)
    e = SharedEntry(e.text, "note", e.bytes, e.q, e.a, e.rho_s, e.source_id,
                    signature=e.signature, raw_text="raw steps", outcome=e.outcome)  # fmt: skip
    back = SharedEntry.from_compact(e.compact("p1", TASKS[0]), TASKS[0])[1]
    assert back.outcome == e.outcome and back.raw_text == "raw steps" and back.kind == "note"


def test_a_frame_rebuilt_with_another_task_fails_the_claim_and_signature() -> None:
    e = _signed(TEXTS[0])
    frame = e.compact("p1", TASKS[0])
    back = SharedEntry.from_compact(frame, TASKS[1])[1]  # the receiver fills in the wrong task
    ring = _ring()
    why = verify_outcome(ring, back.outcome, namespace="me", peer="p1", text=back.text)
    assert why != ""
    v = ring.verify(Claim("me", "peer", "p1", "insight", back.text), back.signature)
    assert v.status == "bad_signature"


@pytest.mark.parametrize(
    "frame",
    [b"", b"not json", b"[]", b'{"s":"p1"}', b'{"s":"p1","t":"Action: x","T":1}', b"\xff\xfe"],
)
def test_from_compact_refuses_what_is_not_a_frame(frame: bytes) -> None:
    with pytest.raises(InvalidInput):
        SharedEntry.from_compact(frame)


@pytest.mark.parametrize(
    "a,b,same",
    [
        (TASKS[0], TASKS[1], True),
        (TASKS[3], TASKS[4], True),
        ("Rows over 1,500.5 units", "Rows over 20 units", True),
        (TASKS[0], TASKS[2], False),
        ("Count the orders", "Count the orders placed", False),
    ],
)
def test_shape_key_folds_constants_only(a: str, b: str, same: bool) -> None:
    assert (shape_key(a) == shape_key(b)) is same
    assert len(shape_key(a)) == SHAPE_BYTES
    assert (task_shape(a) == task_shape(b)) is same


def test_demand_with_shape_counts_and_checks_it() -> None:
    d = Demand.of(TASKS[0], with_shape=True)
    assert d.shape == shape_key(TASKS[0]) and d.bytes == KEY_BYTES + SHAPE_BYTES
    with pytest.raises(InvalidInput):
        Demand(d.key, shape=b"\x00" * (SHAPE_BYTES + 1))
    with pytest.raises(InvalidInput):
        task_shape("  ")


def test_answers_with_shape_takes_siblings_only_when_asked() -> None:
    sib = SharedEntry(TEXTS[1], "insight", 1, 0.0, 1.0, 0.0, "e")
    other = SharedEntry(TEXTS[2], "insight", 1, 0.0, 1.0, 0.0, "e")
    assert answers(Demand.of(TASKS[0], with_shape=True), sib, shape=True)
    assert not answers(Demand.of(TASKS[0]), sib, shape=True)  # no shape key sent
    assert not answers(Demand.of(TASKS[0], with_shape=True), other, shape=True)
    assert not answers(Demand.of(TASKS[0], with_shape=True), sib)  # not the exact task


def _mem(which: list[int]) -> tuple[Memory, dict[str, OutcomeClaim]]:
    mem = Memory(policy="curator", max_bytes=10**6)
    oc = {}
    for i in which:
        eid = str(mem.write(TEXTS[i]).id)
        oc[eid] = OutcomeClaim("t", ACTIONS[i], "pass", state_hash([[1]]), text_sha(TEXTS[i]))
    return mem, oc


@pytest.mark.parametrize("want,held,expect", [(0, [1, 2], 1), (3, [4, 0], 4), (1, [0, 1], 1)])
def test_offer_on_shape_prefers_exact_then_a_sibling(want: int, held: list[int],
                                                      expect: int) -> None:  # fmt: skip
    mem, oc = _mem(held)
    try:
        assert (mem.offer(Demand.of(TASKS[want]), outcomes=oc) is None) is (want not in held)
        o = mem.offer(Demand.of(TASKS[want], with_shape=True), outcomes=oc)
        assert o is not None and mem.get(o.source_id).text == TEXTS[expect]
        assert o.exact is (want == expect) and o.shape is (want != expect)
        assert o.match == ("exact" if want == expect else "shape")
        assert mem.covers(TASKS[want], shape=True)
        assert mem.covers(TASKS[want]) is (want in held)
    finally:
        mem.close()


def test_no_sibling_no_offer() -> None:
    mem, oc = _mem([2])
    try:
        assert mem.offer(Demand.of(TASKS[0], with_shape=True), outcomes=oc) is None
        assert not mem.covers(TASKS[0], shape=True)
    finally:
        mem.close()


# ------------------------------------------------------------------ the peer bench's pull
fams, ex = _pw.fams, _pw.ex  # the peer bench's fixtures (families, the scripted responder)


def _pull_cfg(**kw: object) -> object:
    from memcurator.bench.peers import PeerConfig

    base = dict(peers=4, n_tasks=12, share_every=6, n_families=3, outside_rate=0.0, seed=0,
                exchange="pull", attack_at=0.2)  # fmt: skip
    base.update(kw)
    return PeerConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw", [{}, {"shape": True}, {"compact": False}])
def test_pull_counts_what_became_of_each_fetched_entry(fams: list, ex: object, kw: dict) -> None:
    from memcurator.bench.peers import LIES_TOLERATED, run_group

    _, det = run_group("curator", fams, ex, _pull_cfg(**kw))
    p = det["pull"]
    # every admitted fetched entry is in exactly one state when its task runs
    assert p["released"] + p["waiting"] + p["held"] + p["probation"] == p["admitted"]
    assert p["admitted"] <= p["fetched"] and p["shown_ok"] <= p["shown"] <= p["released"]
    assert p["fetched"] >= 1 and p["shown"] >= 1
    rows = [r for r in det["records"] if r["pulled"]]
    assert len(rows) == p["fetched"]
    assert sum(r["pull_shown"] for r in rows) == p["shown"]
    assert {r["pull_state"] for r in rows} <= {"released", "waiting", "held", "probation", ""}
    # what was not released or not admitted has its reason counted
    assert sum(det["pull_reasons"].values()) >= p["fetched"] - p["released"]
    # the compromised peer lies (exact claims it cannot back, or false siblings) and is
    # dropped by each receiver after LIES_TOLERATED
    assert p["lies"] <= LIES_TOLERATED * 3


def test_compact_frames_cost_fewer_bytes_for_the_same_fetches(fams: list, ex: object) -> None:
    from memcurator.bench.peers import run_group

    runs = {c: run_group("curator", fams, ex, _pull_cfg(compact=c, attack=False)) for c in (0, 1)}
    (_, plain), (_, small) = runs[0], runs[1]
    assert small["pull"]["fetched"] == plain["pull"]["fetched"] >= 1
    assert [r["local_ok"] for r in small["records"]] == [r["local_ok"] for r in plain["records"]]
    assert small["uplink_bytes_per_round"] < plain["uplink_bytes_per_round"]


def test_the_compromised_peer_offering_false_siblings_is_kept_out(fams: list, ex: object) -> None:
    from memcurator.bench.peers import run_group

    _, det = run_group("curator", fams, ex, _pull_cfg(shape=True, n_tasks=20, share_every=5))
    c = det["claims"]
    # the false records it sends (pushed, or fetched as siblings) are released at most within
    # each receiver's release credit, and its attack entries stay out on every channel
    assert c["false_released"] <= 2 * 3
    for ch in ("peer", "external", "self"):
        asr = det["channels"][ch]["asr"]
        assert asr != asr or asr <= 0.02  # NaN: no target task after the attack
