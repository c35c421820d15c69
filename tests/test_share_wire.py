"""The uplink budget holds what crosses the link (issue 33): each shared entry's frame — its
text as JSON escapes it, the envelope, the signature and the signed outcome claim — not only
its text. Measured before: 5,595 B per agent and round on the wire at L = 5,000 (rotating)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from memcurator import Memory
from memcurator.bench.peers import decode, encode
from memcurator.trust.outcome import OutcomeClaim, state_hash, text_sha
from tests.test_peer_outcome import _ring

# several members: plain SQL records, text that JSON escapes heavily (newlines, quotes,
# backslashes), non-ASCII text, a long record
RECORDS = [
    "Task: Count the orders placed by customer 17\n"
    "Action: SELECT COUNT(*) FROM orders WHERE customer_id = 17;",
    "Task: Names with a quote\nAction: SELECT name FROM t WHERE note = 'he said \"hi\"';\n"
    + "\n".join(f'-- line {i} "q" \\ path' for i in range(30)),
    "Task: Zählen Sie die Bestellungen in Köln\n"
    "Action: SELECT COUNT(*) FROM bestellungen WHERE stadt = 'Köln';  -- 東京 ✓",
    "Task: The long one\nAction: SELECT "
    + ", ".join(f"col_{i}" for i in range(300))
    + " FROM wide;",
]


#: share everything that fits: no threshold, no redundancy cut
KW = {"sender": "p1", "to": "p2", "tau": -1e9, "tau_rise": 0.0, "delta": 1.01}


def _claim(text: str) -> OutcomeClaim:
    action = text.split("Action: ", 1)[1]
    return OutcomeClaim("t", action, "pass", state_hash([[1]]), text_sha(text))


@pytest.fixture
def sender() -> Iterator[tuple[Memory, list[str], np.ndarray]]:
    mem = Memory(namespace="p1", policy="curator", keyring=_ring("p1"), max_bytes=10**6)
    ids = []
    for t in RECORDS:
        ids.append(str(mem.write(t, signature=mem.sign(t)).id))
    sk = np.mean([mem.embedder.embed(t.split("\n")[0]) for t in RECORDS], axis=0)
    yield mem, ids, sk / np.linalg.norm(sk)
    mem.close()


@pytest.mark.parametrize("budget", [300, 800, 1_500, 3_000, 6_000, 20_000])
@pytest.mark.parametrize("claims", [False, True])
def test_the_frames_sent_fit_the_budget(sender, budget: int, claims: bool) -> None:
    mem, ids, sk = sender
    oc = {i: _claim(t) for i, t in zip(ids, RECORDS, strict=True)} if claims else {}
    out = mem.share(sk, budget, **KW, outcomes=oc)
    frames = [encode(s, "p1") for s in out]
    assert sum(len(f) for f in frames) <= budget
    assert all(len(f) == s.wire_bytes("p1") for f, s in zip(frames, out, strict=True))
    # the frames carry what the receiver needs (the claim travels when given)
    for f, s in zip(frames, out, strict=True):
        _, back = decode(f)
        assert back.text == s.text and back.signature == s.signature
        assert (back.outcome is not None) == claims


def test_the_envelope_and_claim_are_charged(sender) -> None:
    mem, ids, sk = sender
    oc = {i: _claim(t) for i, t in zip(ids, RECORDS, strict=True)}
    every = mem.share(sk, 10**6, **KW, outcomes=oc)
    assert len(every) == len(mem.entries()) >= 3
    # a budget of exactly the texts' bytes (the old charge) cannot carry their frames
    texts = sum(len(s.text.encode("utf-8")) for s in every)
    frames = sum(s.wire_bytes("p1") for s in every)
    assert frames > texts + len(every) * 300  # envelope + signed claim per entry
    out = mem.share(sk, texts, **KW, outcomes=oc)
    assert 0 < len(out) < len(every)
    assert sum(s.wire_bytes("p1") for s in out) <= texts
