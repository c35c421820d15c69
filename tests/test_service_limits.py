"""Limits on every transport (issue 32): depth, size (streamed bodies too), numeric ranges, caps
and strict types, the same on REST, MCP and the library; the hub's byte caps.

Every bad input gets a clear 4xx (or :class:`~memcurator.errors.InvalidInput`) that names the
limit, and changes nothing: the entries and the decision log are the same before and after.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from _service_util import SQL_A, SQL_B, Keys, app_for, make_keys  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from memcurator import Memory, limits  # noqa: E402
from memcurator.errors import InvalidInput  # noqa: E402
from memcurator.service.hub import Hub  # noqa: E402


def nested(depth: int, leaf: Any = 1, as_list: bool = False) -> dict[str, Any]:
    """A meta dict ``depth`` levels deep (a flat dict is one level)."""
    node: Any = leaf
    for _ in range(depth - 1):
        node = [node] if as_list else {"a": node}
    return {"k": node}


def W(field: str, op: str, value: Any) -> dict[str, Any]:
    """One ``where`` condition."""
    return {"field": field, "op": op, "value": value}


class Fake:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[tuple[TestClient, Keys, Fake]]:
    keys = make_keys()
    _, p2 = keys.table.create("a", name="p2", scopes=("peer",), origin="peer")
    keys.tokens["p2"] = p2
    clock = Fake()
    peer_hub = Hub(max_peer_bytes=4000, max_group_bytes=6000, retention_s=60.0, clock=clock)
    app = app_for(tmp_path, keys, peer_hub=peer_hub)
    with TestClient(app, raise_server_exceptions=False) as c:
        c.post("/v1/write", json={"text": SQL_A}, headers=keys.h("a"))
        yield c, keys, clock
    app.state.pool.close()


def state(c: TestClient, keys: Keys) -> tuple[Any, Any]:
    """The namespace's entries and whole decision log (what must not change)."""
    h = keys.h("a")
    es = c.get("/v1/entries", params={"limit": 1000}, headers=h).json()
    ds = c.get("/v1/decisions", params={"limit": 1000}, headers=h).json()
    return es, ds


def refused(r: Any, status: int, *words: str) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text[:400])
    assert r.headers["content-type"].startswith("application/problem+json")
    doc: dict[str, Any] = r.json()
    for w in words:
        assert w in doc["detail"], (w, doc["detail"])
    return doc


# ---------------------------------------------------------------- REST: meta depth and size
@pytest.mark.parametrize(
    "meta",
    [
        nested(33),
        nested(260),
        nested(700),
        nested(40, as_list=True),
        {"ok": 1, "deep": nested(35)},
    ],
    ids=["33", "260", "700", "lists", "inner"],
)
def test_deep_meta_is_refused_at_the_door_and_changes_nothing(svc: Any, meta: Any) -> None:
    c, keys, _ = svc
    before = state(c, keys)
    for who in ("a", "a_ext"):  # the owner's key and a write-only external channel
        r = c.post("/v1/write", json={"text": SQL_B, "meta": meta}, headers=keys.h(who))
        assert r.status_code in (400, 422), r.text[:300]
        if r.status_code == 422:
            assert "MAX_META_DEPTH" in r.json()["detail"]
    assert state(c, keys) == before
    # listing, get and recall still work
    assert c.post("/v1/recall", json={"query": "rows in orders"}, headers=keys.h("a")).is_success


def test_meta_at_the_depth_limit_is_stored_and_read_back(svc: Any) -> None:
    c, keys, _ = svc
    meta = nested(limits.MAX_META_DEPTH)
    w = c.post("/v1/write", json={"text": SQL_B, "meta": meta}, headers=keys.h("a")).json()
    assert w["admitted"]
    got = c.get(f"/v1/entries/{w['id']}", headers=keys.h("a")).json()["meta"]
    assert got["k"] == meta["k"]
    r = c.post("/v1/recall", json={"query": "customers in Paris", "k": 2}, headers=keys.h("a"))
    assert r.is_success and w["id"] in r.json()["ids"]


@pytest.mark.parametrize(
    ("meta", "word"),
    [
        ({"blob": "x" * (limits.MAX_META_BYTES + 10)}, "MAX_META_BYTES"),
        ({"n": 2**63}, "64-bit"),
        ({"n": -(2**63) - 1}, "64-bit"),
        ({"a": [1, 2, {"n": 10**30}]}, "64-bit"),
    ],
)
def test_oversized_meta_and_huge_integers_are_refused(svc: Any, meta: Any, word: str) -> None:
    c, keys, _ = svc
    before = state(c, keys)
    r = c.post("/v1/write", json={"text": SQL_B, "meta": meta}, headers=keys.h("a"))
    refused(r, 422, word)
    assert state(c, keys) == before


# ---------------------------------------------------------------- REST: integer ranges
@pytest.mark.parametrize(
    ("method", "path", "kw"),
    [
        ("get", "/v1/decisions", {"params": {"since": 2**63}}),
        ("get", "/v1/entries", {"params": {"offset": 2**63}}),
        ("get", "/v1/entries", {"params": {"created_from_step": 2**64}}),
        ("patch", "/v1/namespaces/a", {"json": {"max_bytes": 2**63}}),
        ("post", "/v1/recall", {"json": {"query": "rows", "k": 2**63}}),
        ("post", "/v1/embeddings", {"json": {"input": "rows", "dimensions": 2**63}}),
        ("post", "/v1/hub/push", {"json": {"round": 2**63}}),
        ("put", "/v1/hub/sketch", {"json": {"round": 2**70, "sketch": [0.1]}}),
        ("get", "/v1/hub/pull", {"params": {"since": 2**63}}),
        ("get", "/v1/hub/sketches", {"params": {"min_round": 2**63}}),
        ("post", "/v1/recall", {"json": {"query": "rows", "where": [W("meta.n", "eq", 2**64)]}}),
        ("post", "/v1/recall", {"json": {"query": "rows", "where": [W("uses", "gt", 10**400)]}}),
        ("post", "/v1/recall", {"json": {"query": "q", "where": [W("uses", "in", [1, 2**63])]}}),
    ],
)
def test_integers_outside_64_bits_get_422_not_500(
    svc: Any, method: str, path: str, kw: dict[str, Any]
) -> None:
    c, keys, _ = svc
    before = state(c, keys)
    r = getattr(c, method)(path, headers=keys.h("a"), **kw)
    refused(r, 422)
    assert state(c, keys) == before


def test_a_shared_entry_with_huge_bytes_is_refused(svc: Any) -> None:
    c, keys, _ = svc
    e = {"text": SQL_A, "kind": "insight", "bytes": 2**63, "q": 0.5, "a": 1.0, "rho_s": 0.1,
         "source_id": "e1"}  # fmt: skip
    refused(c.post("/v1/hub/push", json={"entries": [e]}, headers=keys.h("a")), 422)


# ---------------------------------------------------------------- REST: caps
@pytest.mark.parametrize("k", [limits.MAX_RECALL_K + 1, 10**9, 0, -1])
def test_recall_k_is_capped_as_in_the_library(svc: Any, k: int) -> None:
    c, keys, _ = svc
    refused(c.post("/v1/recall", json={"query": "rows", "k": k}, headers=keys.h("a")), 422, "k")


def test_recall_k_at_the_cap_is_served(svc: Any) -> None:
    c, keys, _ = svc
    r = c.post("/v1/recall", json={"query": "rows", "k": limits.MAX_RECALL_K}, headers=keys.h("a"))
    assert r.status_code == 200


def test_feedback_and_record_cap_their_ids(svc: Any) -> None:
    c, keys, _ = svc
    before = state(c, keys)
    ids = [f"id{i}" for i in range(limits.MAX_IDS + 1)]
    refused(c.post("/v1/feedback", json={"reward": 1.0, "used": ids}, headers=keys.h("a")), 422)
    rec = {"task": {"id": "t1", "instruction": "count rows"}, "trajectory": {"reward": 1.0},
           "used": ids}  # fmt: skip
    refused(c.post("/v1/record", json=rec, headers=keys.h("a")), 422)
    assert state(c, keys) == before


# ---------------------------------------------------------------- REST: strict types
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/recall", {"query": "rows", "k": "2"}),
        ("/v1/recall", {"query": "rows", "k": 2.0}),
        ("/v1/recall", {"query": "rows", "k": True}),
        ("/v1/recall", {"query": "rows", "observe": 1}),
        ("/v1/recall", {"query": "rows", "min_score": "0.5"}),
        ("/v1/recall", {"query": 5}),
        ("/v1/feedback", {"reward": False, "used": []}),
        ("/v1/feedback", {"reward": "1", "used": []}),
        ("/v1/feedback", {"reward": True, "used": []}),
        ("/v1/write", {"text": SQL_B, "personal": "yes", "user": "u"}),
        ("/v1/write", {"text": 12345}),
        ("/v1/write", {"text": SQL_B, "user": 7}),
        ("/v1/forget-all", {"reason": 1}),
        ("/v1/embeddings", {"input": "rows", "dimensions": "64"}),
    ],
)
def test_wrong_json_types_are_refused_not_coerced(svc: Any, path: str, body: Any) -> None:
    c, keys, _ = svc
    before = state(c, keys)
    refused(c.post(path, json=body, headers=keys.h("a")), 422)
    assert state(c, keys) == before


def test_integers_still_go_into_number_fields(svc: Any) -> None:
    c, keys, _ = svc
    w = c.post("/v1/write", json={"text": SQL_B}, headers=keys.h("a")).json()
    r = c.post("/v1/feedback", json={"reward": 1, "used": [w["id"]]}, headers=keys.h("a"))
    assert r.status_code == 204
    r = c.post("/v1/recall", json={"query": "rows", "min_score": 0}, headers=keys.h("a"))
    assert r.status_code == 200


# ---------------------------------------------------------------- REST: body size, streamed
def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    head = b'{"text": "Task: count rows\\nAction: '
    yield head
    left = total - len(head)
    while left > 0:
        n = min(size, left)
        yield b"x" * n
        left -= n
    yield b'"}'


@pytest.mark.parametrize("total", [2 << 20, 20 << 20])
def test_a_chunked_body_over_the_limit_is_refused_before_it_is_read_whole(
    svc: Any, total: int
) -> None:
    c, keys, _ = svc
    before = state(c, keys)
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        for b in _chunks(total):
            sent += len(b)
            yield b

    h = keys.h("a") | {"content-type": "application/json"}
    r = c.post("/v1/write", content=body(), headers=h)
    refused(r, 413, "body limit")
    assert state(c, keys) == before
    for path in ("/v1/recall", "/v1/hub/push", "/v1/embeddings"):  # others of the kind
        refused(c.post(path, content=_chunks(total), headers=h), 413)
    assert state(c, keys) == before


def test_a_chunked_body_under_the_limit_is_served(svc: Any) -> None:
    c, keys, _ = svc

    def body() -> Iterator[bytes]:
        yield b'{"text": "Task: list the names of customers in Paris\\n'
        yield b"Action: SELECT name FROM customers WHERE city='Paris';\"}"

    h = keys.h("a") | {"content-type": "application/json"}
    r = c.post("/v1/write", content=body(), headers=h)
    assert r.status_code == 200 and r.json()["admitted"], r.text


def test_a_declared_body_over_the_limit_and_a_bad_length_are_refused(svc: Any) -> None:
    c, keys, _ = svc
    h = keys.h("a") | {"content-type": "application/json"}
    refused(c.post("/v1/recall", content=b"x" * ((1 << 20) + 1), headers=h), 413)
    bad = h | {"content-length": "-5"}
    assert c.post("/v1/recall", content=b"{}", headers=bad).status_code in (400, 413)


# ---------------------------------------------------------------- the hub's byte caps
def _push(c: TestClient, keys: Keys, who: str, n: int) -> Any:
    text = "Task: count rows in orders\nAction: SELECT COUNT(*) FROM orders; -- " + "y" * n
    e = {"text": text, "kind": "insight", "bytes": 100, "q": 0.5, "a": 1.0, "rho_s": 0.1,
         "source_id": f"s{n}"}  # fmt: skip
    return c.post("/v1/hub/push", json={"entries": [e]}, headers=keys.h(who))


def test_the_hub_caps_bytes_per_peer_and_per_group(svc: Any) -> None:
    c, keys, clock = svc
    assert _push(c, keys, "a", 1500).status_code == 200
    assert _push(c, keys, "a", 1500).status_code == 200
    r = _push(c, keys, "a", 1500)  # alice's third: over 4000 bytes per peer
    doc = refused(r, 429, "max_peer_bytes", "4000")
    assert doc["error"] == "RateLimited" and int(r.headers["retry-after"]) >= 1
    assert _push(c, keys, "p2", 1500).status_code == 200  # another peer still may
    r = _push(c, keys, "p2", 1500)  # the group holds ~4.8 kB: over 6000 per group
    refused(r, 429, "max_group_bytes", "6000")
    assert _push(c, keys, "b", 1500).status_code == 200  # another group: its own caps
    # one push larger than the per-peer cap can never fit: 413
    refused(_push(c, keys, "p2", 5000), 413, "4000")
    # what was refused is not queued: p2 pulls alice's two pushes only
    pulled = c.get("/v1/hub/pull", headers=keys.h("p2")).json()["messages"]
    assert [m["sender"] for m in pulled] == ["alice", "alice"]
    # once the kept pushes expire, the caps free up
    clock.t += 61.0
    assert _push(c, keys, "a", 1500).status_code == 200


def test_hub_bounds_are_checked() -> None:
    for kw in ({"max_peer_bytes": 0}, {"max_group_bytes": -1}, {"retention_s": float("nan")}):
        with pytest.raises(InvalidInput):
            Hub(**kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the library: same limits
@pytest.fixture
def mem() -> Iterator[Memory]:
    m = Memory(":memory:", namespace="lim")
    m.write(SQL_A)
    yield m
    m.close()


def lib_state(m: Memory) -> tuple[Any, Any]:
    return [(e.id, e.text, e.meta) for e in m.entries()], [
        (d.seq, d.action, d.entry_id) for d in m.decisions()
    ]


@pytest.mark.parametrize(
    ("kw", "word"),
    [
        ({"meta": nested(700)}, "MAX_META_DEPTH"),
        ({"meta": nested(260)}, "MAX_META_DEPTH"),
        ({"meta": nested(50, as_list=True)}, "MAX_META_DEPTH"),
        ({"meta": {"n": 2**63}}, "64-bit"),
        ({"meta": {"blob": "x" * (limits.MAX_META_BYTES + 1)}}, "MAX_META_BYTES"),
        ({"meta": {"s": {1, 2}}}, "JSON"),
        ({"user": "u" * (limits.MAX_USER_CHARS + 1)}, "MAX_USER_CHARS"),
    ],
    ids=["700", "260", "lists", "int", "bytes", "set", "user"],
)
def test_library_write_refuses_what_the_service_refuses(
    mem: Memory, kw: dict[str, Any], word: str
) -> None:
    before = lib_state(mem)
    with pytest.raises(InvalidInput, match=word):
        mem.write(SQL_B, **kw)
    assert lib_state(mem) == before
    assert mem.recall("rows in orders").ids  # nothing left behind that breaks a read


def test_library_meta_that_contains_itself_is_refused(mem: Memory) -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(InvalidInput, match="MAX_META_DEPTH"):
        mem.write(SQL_B, meta=loop)


def test_library_recall_and_feedback_caps(mem: Memory) -> None:
    before = lib_state(mem)
    for k in (limits.MAX_RECALL_K + 1, 10**9):
        with pytest.raises(InvalidInput, match="MAX_RECALL_K"):
            mem.recall("rows", k=k)
    assert len(mem.recall("rows", k=limits.MAX_RECALL_K).ids) == 1
    with pytest.raises(InvalidInput, match="MAX_IDS"):
        mem.feedback([f"x{i}" for i in range(limits.MAX_IDS + 1)], 1.0)
    with pytest.raises(InvalidInput, match="64-bit"):
        mem.recall("rows", meta={"n": 2**63})
    with pytest.raises(InvalidInput, match="MAX_USER_CHARS"):
        mem.recall("rows", user="u" * (limits.MAX_USER_CHARS + 1))
    assert lib_state(mem) == before


def test_library_budget_beyond_64_bits_is_refused() -> None:
    with pytest.raises(InvalidInput, match="MAX_INT"):
        Memory(":memory:", namespace="big", max_bytes=2**63)


# ---------------------------------------------------------------- MCP: same limits
def test_mcp_tools_refuse_the_same_inputs(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from memcurator.service.mcp_server import create_mcp
    from memcurator.service.tenants import TenantPool

    keys = make_keys()
    pool = TenantPool(str(tmp_path / "store.db"), keys.table)
    server = create_mcp(pool, key=keys.table.authenticate(keys.tokens["a"]))
    bad_calls = [
        ("recall", {"query": "rows", "k": 10**9}, "1000"),
        ("recall", {"query": "rows", "k": limits.MAX_RECALL_K + 1}, "1000"),
        ("recall", {"query": "rows", "k": "2"}, "integer"),
        ("recall", {"query": "rows", "user": "u" * 300}, "256"),
        ("feedback", {"reward": False, "used": []}, "number"),
        ("feedback", {"reward": "1", "used": []}, "number"),
        ("feedback", {"reward": 1.0, "used": [f"x{i}" for i in range(1001)]}, "1000"),
        ("write", {"text": SQL_B, "meta": nested(40)}, "MAX_META_DEPTH"),
        ("write", {"text": SQL_B, "meta": nested(40, as_list=True)}, "MAX_META_DEPTH"),
        ("write", {"text": SQL_B, "meta": {"n": 2**63}}, "64-bit"),
        ("write", {"text": SQL_B, "meta": {"b": "x" * 70_000}}, "MAX_META_BYTES"),
        ("recall", {"query": "rows", "where": [W("meta.n", "eq", 2**63)]}, "InvalidInput"),
        ("recall", {"query": "rows", "where": [W("uses", "ge", -(2**70))]}, "64 bits"),
    ]

    async def main() -> None:
        async with Client(server) as c:
            w = (await c.call_tool("write", {"text": SQL_A})).structured_content
            assert w["admitted"]
            for tool, args, word in bad_calls:
                res = await c.call_tool(tool, args)
                text = " ".join(getattr(x, "text", "") for x in res.content)
                assert res.is_error, (tool, args)
                assert word in text, (tool, word, text[:300])
            ok = await c.call_tool("recall", {"query": "rows", "k": limits.MAX_RECALL_K})
            assert not ok.is_error

    try:
        anyio.run(main)
        with pool.using(keys.table.authenticate(keys.tokens["a"])) as t:
            assert [e.text for e in t.memory.entries()] == [SQL_A]
            assert [d.action for d in t.memory.decisions()] == ["admit"]
    finally:
        pool.close()


# ---------------------------------------------------------------- newcomer points
def test_keys_create_help_lists_every_scope() -> None:
    from typer.testing import CliRunner

    from memcurator.cli import app
    from memcurator.service.keys import SCOPES

    r = CliRunner().invoke(app, ["keys", "create", "--help"], terminal_width=200)
    assert r.exit_code == 0
    flat = " ".join(r.output.replace("│", " ").split())  # the help's box, unwrapped
    for s in SCOPES:
        assert f"{s} (" in flat, (s, flat[:2000])


def test_serving_without_keys_warns_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memcurator.cli_serve import _warn_without_keys
    from memcurator.service.keys import KeyTable

    t = KeyTable(str(tmp_path / "s.keys"))
    _warn_without_keys(t, str(tmp_path / "s.keys"), "s.db")
    err = capsys.readouterr().err
    assert "WARNING" in err and "no live API key" in err and "keys create" in err
    info, _ = t.create("ns", name="n1")
    _warn_without_keys(t, "k", "s.db")
    assert capsys.readouterr().err == ""
    t.revoke(info.key_id, "gone")  # only revoked keys: as good as none
    _warn_without_keys(t, "k", "s.db")
    assert "no live API key" in capsys.readouterr().err
