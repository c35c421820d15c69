"""The peer hub of ``memcurator serve`` (in process): scopes, groups, sender identity, cursors,
addressing, forget notices, and the client's wire-byte count."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")

from _service_util import app_for  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from memcurator import Memory  # noqa: E402
from memcurator.client import Client  # noqa: E402
from memcurator.errors import Forbidden, InvalidInput  # noqa: E402
from memcurator.policy.share import ForgetNotice, SharedEntry  # noqa: E402
from memcurator.service.hub import Hub  # noqa: E402
from memcurator.service.keys import KeyTable  # noqa: E402
from memcurator.trust.auth import OWNER, KeyRing  # noqa: E402

SQL = [
    "Task: count rows in orders\nAction: SELECT COUNT(*) FROM orders;",
    "Task: list the names of customers in Paris\n"
    "Action: SELECT name FROM customers WHERE city='Paris';",
    "Task: total amount of orders per customer\n"
    "Action: SELECT customer_id, SUM(amount) FROM orders GROUP BY customer_id;",
]


def _client(c: TestClient, headers: dict[str, str]) -> Client:
    """A :class:`Client` whose requests go to the in-process app (through ``c``)."""

    def forward(req: httpx.Request) -> httpx.Response:
        r = c.request(req.method, str(req.url), content=req.content, headers=req.headers)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    key = headers["Authorization"].removeprefix("Bearer ")
    return Client("http://testserver", key=key, transport=httpx.MockTransport(forward))


def _entry(text: str, sid: str = "e1") -> dict[str, Any]:
    return {"text": text, "kind": "insight", "bytes": 100, "q": 0.5, "a": 1.0, "rho_s": 0.1,
            "source_id": sid}  # fmt: skip


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, dict[str, str]]]]:
    t = KeyTable(":memory:")
    tok: dict[str, str] = {}
    for who, ns, name, scopes, origin in [
        ("p0", "ga", "p0", ("peer",), "peer"),
        ("p1", "ga", "p1", ("peer",), "peer"),
        ("p2", "ga", "p2", ("peer", "read"), "peer"),
        ("q0", "gb", "q0", ("peer",), "peer"),
        ("q1", "gb", "p1", ("peer",), "peer"),  # same name as a peer of ga, other group
        ("self_a", "ga", "alice", ("read", "write", "admin"), "self"),
    ]:
        _, tok[who] = t.create(ns, name=name, scopes=scopes, origin=origin)

    class K:
        table = t

    app = app_for(tmp_path, K)  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c, {w: {"Authorization": f"Bearer {v}"} for w, v in tok.items()}
    app.state.pool.close()


def test_non_peer_key_is_refused_on_every_hub_route(hub: Any) -> None:
    c, h = hub
    calls = [
        ("post", "/v1/hub/push", {"json": {"entries": [_entry(SQL[0])]}}),
        ("get", "/v1/hub/pull", {}),
        ("put", "/v1/hub/sketch", {"json": {"sketch": [0.1, 0.2]}}),
        ("get", "/v1/hub/sketches", {}),
    ]
    for method, path, kw in calls:
        r = getattr(c, method)(path, headers=h["self_a"], **kw)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"] == "Forbidden"
        assert r.headers["content-type"].startswith("application/problem+json")
        r = getattr(c, method)(path, **kw)  # no key at all
        assert r.status_code == 401, path
    # nothing the refused push carried reached the group
    assert c.get("/v1/hub/pull", headers=h["p1"]).json()["messages"] == []


def test_groups_are_apart_and_the_sender_is_the_key(hub: Any) -> None:
    c, h = hub
    r = c.post("/v1/hub/push", json={"entries": [_entry(SQL[0])]}, headers=h["p0"])
    assert r.status_code == 200 and r.json()["sender"] == "p0"
    c.post("/v1/hub/push", json={"entries": [_entry(SQL[1], "b1")]}, headers=h["q0"])
    c.put("/v1/hub/sketch", json={"sketch": [1.0, 2.0], "round": 3}, headers=h["q0"])
    # p1 (group ga) sees p0's push only; q1 (group gb, also named p1) sees q0's only
    ga = c.get("/v1/hub/pull", headers=h["p1"]).json()["messages"]
    gb = c.get("/v1/hub/pull", headers=h["q1"]).json()["messages"]
    assert [(m["sender"], m["entries"][0]["text"]) for m in ga] == [("p0", SQL[0])]
    assert [(m["sender"], m["entries"][0]["text"]) for m in gb] == [("q0", SQL[1])]
    assert c.get("/v1/hub/sketches", headers=h["p1"]).json() == {}
    assert c.get("/v1/hub/sketches", headers=h["q1"]).json() == {
        "q0": {"round": 3, "sketch": [1.0, 2.0]}
    }
    # the pusher never gets its own message back
    assert c.get("/v1/hub/pull", headers=h["p0"]).json()["messages"] == []
    # a body cannot name the sender, the origin or the group: 422, nothing stored
    for extra in ({"sender": "p2"}, {"namespace": "gb"}, {"origin_detail": "p2"}):
        r = c.post("/v1/hub/push", json={"entries": [], **extra}, headers=h["p0"])
        assert r.status_code == 422, extra
    bad = {**_entry(SQL[2]), "sender": "p2"}
    assert c.post("/v1/hub/push", json={"entries": [bad]}, headers=h["p0"]).status_code == 422
    everything = c.get("/v1/hub/pull", params={"since": 0}, headers=h["p1"])
    assert len(everything.json()["messages"]) == 1


def test_addressing_and_cursor(hub: Any) -> None:
    c, h = hub
    c.post("/v1/hub/push", json={"to": "p1", "entries": [_entry(SQL[0])]}, headers=h["p0"])
    c.post("/v1/hub/push", json={"to": "p2", "entries": [_entry(SQL[1])]}, headers=h["p0"])
    c.post("/v1/hub/push", json={"notices": ["old-id"], "round": 2}, headers=h["p0"])
    r = c.get("/v1/hub/pull", headers=h["p1"]).json()
    assert [m["seq"] for m in r["messages"]] == [1, 3] and r["next_since"] == 3
    assert r["messages"][1]["notices"] == ["old-id"] and r["messages"][1]["round"] == 2
    r = c.get("/v1/hub/pull", params={"since": 1}, headers=h["p2"]).json()
    assert [m["seq"] for m in r["messages"]] == [2, 3]
    assert c.get("/v1/hub/pull", params={"since": 3}, headers=h["p2"]).json() == {
        "messages": [],
        "next_since": 3,
    }
    # limit: one message per page; the cursor stops at the last one returned
    r = c.get("/v1/hub/pull", params={"since": 0, "limit": 1}, headers=h["p2"]).json()
    assert [m["seq"] for m in r["messages"]] == [2] and r["next_since"] == 2
    # a cursor past the end, a push to oneself: 422 naming the library's class, nothing stored
    r = c.get("/v1/hub/pull", params={"since": 9}, headers=h["p2"])
    assert r.status_code == 422 and r.json()["error"] == "InvalidInput"
    r = c.post("/v1/hub/push", json={"to": "p0", "entries": [_entry(SQL[2])]}, headers=h["p0"])
    assert r.status_code == 422 and r.json()["error"] == "InvalidInput"
    assert c.get("/v1/hub/pull", params={"since": 3}, headers=h["p1"]).json()["next_since"] == 3


@pytest.mark.parametrize(
    "entry",
    [
        {**_entry(SQL[0]), "a": 0.5},  # abstraction gain below 1
        {**_entry(SQL[0]), "text": ""},
        {**_entry(SQL[0]), "bytes": -1},
        {**_entry(SQL[0]), "source_id": ""},
        {**_entry(SQL[0]), "signature": ["k"]},
        {k: v for k, v in _entry(SQL[0]).items() if k != "kind"},
    ],
)
def test_malformed_entries_are_refused_whole(hub: Any, entry: dict[str, Any]) -> None:
    c, h = hub
    body = {"entries": [_entry(SQL[1]), entry]}
    assert c.post("/v1/hub/push", json=body, headers=h["p0"]).status_code == 422
    assert c.get("/v1/hub/pull", headers=h["p1"]).json()["messages"] == []


def test_non_finite_numbers_are_refused(hub: Any) -> None:
    c, h = hub
    raw = (
        '{"entries":[{"text":"x","kind":"insight","bytes":1,"q":NaN,"a":1,"rho_s":0,'
        '"source_id":"e"}]}'
    )
    r = c.post("/v1/hub/push", content=raw, headers={**h["p0"], "content-type": "application/json"})
    assert r.status_code in (400, 422)
    r = c.put("/v1/hub/sketch", content='{"sketch":[1, Infinity]}', headers=h["p0"])
    assert r.status_code in (400, 422)
    assert c.get("/v1/hub/sketches", headers=h["p1"]).json() == {}


def test_hub_drops_oldest_and_says_so() -> None:
    hb = Hub(max_messages=2)
    for i in range(3):
        hb.push("g", "a", to=None, round=i, entries=[], notices=[f"n{i}"])
    with pytest.raises(InvalidInput, match="dropped"):
        hb.pull("g", "b", 0, 10)
    msgs, nxt = hb.pull("g", "b", 1, 10)
    assert [m.notices for m in msgs] == [["n1"], ["n2"]] and nxt == 3


def test_each_peer_pull_goes_on_from_its_kept_cursor(tmp_path: Path) -> None:
    """Without ``since`` a pull starts where that peer's last pull ended: kept per group and
    peer in the shared state, so another Hub on the same state (a replica, a restart) goes on
    from there; a peer that never pulled starts at the oldest kept message; an explicit
    ``since`` reads from there and moves the cursor; a kept cursor that fell behind what the
    hub keeps is refused like a given one."""
    from memcurator.service.state.sqlite import SqliteState

    path = str(tmp_path / "state.keys")
    one, two = Hub(max_messages=3, state=SqliteState(path)), Hub(state=SqliteState(path))
    assert one.cursor("g", "b") is None
    for i in range(2):
        one.push("g", "a", to=None, round=i, entries=[], notices=[f"n{i}"])
    msgs, nxt = one.pull("g", "b", None, 1)
    assert [m.seq for m in msgs] == [1] and nxt == 1 and two.cursor("g", "b") == 1
    msgs, nxt = two.pull("g", "b", None, 10)  # the other replica goes on from seq 1
    assert [m.seq for m in msgs] == [2] and nxt == 2
    assert one.pull("g", "b", None, 10) == ([], 2)
    one.push("g", "b", to=None, round=0, entries=[], notices=["own"])  # b's own: skipped
    two.push("g", "c", to="a", round=0, entries=[], notices=["to-a"])  # another's: skipped
    assert one.pull("g", "b", None, 10) == ([], 4) and one.cursor("g", "b") == 4
    assert one.cursor("g", "c") is None and one.cursor("h", "b") is None  # per group and peer
    msgs, nxt = one.pull("g", "b", 1, 10)  # explicit since still reads from there ...
    assert [m.seq for m in msgs] == [2] and nxt == 4
    msgs, _ = two.pull("g", "a", None, 10)  # ... and a new peer starts at the oldest kept
    assert [m.notices for m in msgs] == [["own"], ["to-a"]]  # 1 and 2 dropped (max 3)
    assert [m.seq for m in one.pull("g", "b", 1, 1)[0]] == [2]  # b's cursor back at 2 ...
    # ... then the hub drops through 4
    for i in range(3):
        one.push("g", "a", to=None, round=9, entries=[], notices=[f"m{i}"])
    with pytest.raises(InvalidInput, match="dropped"):
        two.pull("g", "b", None, 10)
    assert two.cursor("g", "b") == 2  # a refused pull moves nothing
    for hb in (one, two):
        hb.state.close()


def _ring(seed: str, names: list[str], me: str) -> KeyRing:
    import hashlib

    ring = KeyRing()
    ring.add(OWNER, secret=hashlib.sha256(f"{seed}:owner:{me}".encode()).digest())
    for p in names:
        ring.add(p, secret=hashlib.sha256(f"{seed}:{p}".encode()).digest())
    return ring


def test_memories_exchange_through_the_hub_with_notices(hub: Any, tmp_path: Path) -> None:
    """Memory.share → Client.hub_push → hub → Client.hub_pull → Memory.receive, signed under
    the sender's link key; the forget of a shared entry reaches the receiver as a notice and
    its copy is forgotten (logged); the client counts the bytes it moved."""
    c, h = hub
    names = ["p0", "p1"]
    mems = {
        n: Memory(":memory:", namespace=n, policy="curator", keyring=_ring("t", names, n))
        for n in names
    }
    clients = {n: _client(c, h[n]) for n in names}
    try:
        p0 = mems["p0"]
        ids = [p0.write(t, origin="self", signature=p0.sign(t)).id for t in SQL]
        for t in SQL:
            mems["p1"].observe(t)
        clients["p1"].hub_publish_sketch(mems["p1"].sketch.tolist(), round=1)
        sk = clients["p0"].hub_sketches()
        assert set(sk) == {"p1"} and sk["p1"][0] == 1
        out = mems["p0"].share(
            np.asarray(sk["p1"][1]), 100_000, sender="p0", to="p1", peer="p1", tau=-1.0, delta=1.1
        )
        assert out and all(isinstance(s, SharedEntry) for s in out)
        before = clients["p0"].wire.copy()
        clients["p0"].hub_push(out, to="p1", round=1)
        sent = clients["p0"].wire.minus(before)
        assert sent.requests == 1 and sent.body_sent > sum(len(s.text) for s in out)
        assert sent.headers_sent > 0 and sent.body_received > 0
        msgs, cur = clients["p1"].hub_pull(0)
        assert [(s, r) for s, r, _ in msgs] == [("p0", 1)]
        res = mems["p1"].receive(msgs[0][2], peer=msgs[0][0])
        assert all(r.admitted for r in res)
        got = {e.text: e for e in mems["p1"].entries()}
        assert set(got) == {s.text for s in out}
        for e in got.values():  # proven peer origin: the signature matched the hub's sender
            assert e.origin == "peer" and e.origin_detail == "p0"
        assert not any(d.action == "downgrade" for d in mems["p1"].decisions())
        # forget one shared entry at p0: the next share carries a notice, p1 forgets its copy
        gone = next(s for s in out if s.source_id in ids)
        mems["p0"].forget(gone.source_id, reason="user asked")
        out2 = mems["p0"].share(
            mems["p1"].sketch, 100_000, sender="p0", to="p1", peer="p1", tau=1e9
        )
        assert ForgetNotice(gone.source_id) in out2
        clients["p0"].hub_push(out2, to="p1", round=2)
        msgs, cur2 = clients["p1"].hub_pull(cur)
        assert cur2 > cur and len(msgs) == 1
        mems["p1"].receive(msgs[0][2], peer=msgs[0][0])
        assert gone.text not in {e.text for e in mems["p1"].entries()}
        assert any(
            d.action == "forget" and "forget notice from peer 'p0'" in d.reason
            for d in mems["p1"].decisions()
        )
        # a peer key that signs as another peer: the hub names the real sender, the
        # signature does not match it, and the receiver downgrades the entry to external
        forged = mems["p0"].share(
            mems["p1"].sketch, 100_000, sender="p0", to="p1", peer="x", tau=-1.0, delta=1.1
        )
        p2 = _client(c, h["p2"])
        p2.hub_push(forged, to="p1", round=3)
        msgs, _ = clients["p1"].hub_pull(cur2)
        assert [s for s, _, _ in msgs] == ["p2"]
        mems["p1"].forget_all(reason="clean slate")
        mems["p1"].receive(msgs[0][2], peer=msgs[0][0])
        assert all(e.origin != "peer" for e in mems["p1"].entries())
        assert any(d.action == "downgrade" for d in mems["p1"].decisions())
    finally:
        for m in mems.values():
            m.close()


def test_client_refuses_what_it_cannot_send(hub: Any) -> None:
    c, h = hub
    cl = _client(c, h["p0"])
    with pytest.raises(InvalidInput):
        cl.hub_push(["not an entry"])  # type: ignore[list-item]
    with pytest.raises(Forbidden):
        _client(c, h["self_a"]).hub_pull()
