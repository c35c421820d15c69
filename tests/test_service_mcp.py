"""``memcurator mcp``: the MCP tools with the SDK's real client, in process (a stdio-style
server bound to one key) and over stateless streamable HTTP on 127.0.0.1 (a bearer key per
request)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

import anyio  # noqa: E402
import httpx2  # noqa: E402
import uvicorn  # noqa: E402
from _proc_util import free_port  # noqa: E402
from _service_util import SQL_A, SQL_B, Keys, make_keys  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from memcurator.service.mcp_server import create_mcp  # noqa: E402
from memcurator.service.problems import NOT_FOUND_DETAIL  # noqa: E402
from memcurator.service.tenants import TenantPool  # noqa: E402

TOOLS = {"write", "observe", "recall", "feedback", "forget", "explain"}


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[tuple[TenantPool, Keys]]:
    keys = make_keys()
    p = TenantPool(str(tmp_path / "store.db"), keys.table)
    yield p, keys
    p.close()


def test_tools_in_process_with_the_sdk_client(pool: tuple[TenantPool, Keys]) -> None:
    p, keys = pool
    a = create_mcp(p, key=keys.table.authenticate(keys.tokens["a"]))
    b = create_mcp(p, key=keys.table.authenticate(keys.tokens["b"]))

    async def main() -> None:
        async with Client(b) as cb:
            wb = (await cb.call_tool("write", {"text": SQL_B})).structured_content
        async with Client(a) as c:
            assert {t.name for t in (await c.list_tools()).tools} == TOOLS
            w = (await c.call_tool("write", {"text": SQL_A})).structured_content
            assert w["admitted"] and w["used_bytes"] > 0
            r = (
                await c.call_tool("recall", {"query": "rows in orders", "k": 3})
            ).structured_content
            assert [e["id"] for e in r["entries"]] == [w["id"]]  # never B's entry
            fb = await c.call_tool("feedback", {"reward": 1.0, "recall_id": r["recall_id"]})
            assert not fb.is_error
            ex = (await c.call_tool("explain", {"entry_id": w["id"]})).structured_content
            assert [d["action"] for d in ex["result"]] == ["admit"]
            # B's id and a missing id: the same error, naming the class, saying nothing of B
            answers = []
            for eid in (wb["id"], "f" * len(wb["id"])):
                for tool in ("explain", "forget"):
                    res = await c.call_tool(tool, {"entry_id": eid})
                    assert res.is_error
                    answers.append(_text(res))
            assert len(set(answers[0::2])) == 1 and len(set(answers[1::2])) == 1
            assert answers[1].endswith(f"EntryNotFound: {NOT_FOUND_DETAIL}")  # the SDK prefixes
            bad = await c.call_tool(
                "recall", {"query": "x rows", "where": [{"field": "__class__", "op": "eq"}]}
            )
            assert bad.is_error and "InvalidInput: " in _text(bad)
            f = (await c.call_tool("forget", {"entry_id": w["id"]})).structured_content
            assert f["ids"] == [w["id"]]
        # a read-only key may recall but not write
        ro = create_mcp(p, key=keys.table.authenticate(keys.tokens["a_read"]))
        async with Client(ro) as c:
            res = await c.call_tool("write", {"text": SQL_A})
            assert res.is_error and "Forbidden: " in _text(res)

    anyio.run(main)
    # B's entry is untouched
    assert [e.text for e in p.tenant("b").memory.entries()] == [SQL_B]


def test_a_revoked_key_stops_a_running_stdio_server(pool: tuple[TenantPool, Keys]) -> None:
    p, keys = pool
    info = keys.table.authenticate(keys.tokens["a"])
    server = create_mcp(p, key=info)

    async def main() -> None:
        async with Client(server) as c:
            assert not (await c.call_tool("write", {"text": SQL_A})).is_error
            keys.table.revoke(info.key_id, "leaked")
            res = await c.call_tool("recall", {"query": "rows"})
            assert res.is_error and "Unauthorized: " in _text(res)

    anyio.run(main)


def test_stateless_streamable_http_with_a_bearer_key(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "s.keys")
    p = TenantPool(str(tmp_path / "store.db"), keys.table)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    app = create_mcp(p, base_url=base).streamable_http_app(stateless_http=True, host="127.0.0.1")
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    try:
        deadline = time.monotonic() + 30
        while not srv.started:
            assert time.monotonic() < deadline and th.is_alive(), "MCP server did not start"
            time.sleep(0.05)

        def client(who: str | None) -> Client:
            headers = {} if who is None else keys.h(who)
            http = httpx2.AsyncClient(headers=headers, timeout=30)
            return Client(streamable_http_client(f"{base}/mcp", http_client=http))

        async def main() -> None:
            async with client("a") as c:
                w = (await c.call_tool("write", {"text": SQL_A})).structured_content
                assert w["admitted"]
            # stateless: a second connection (another worker, say) reads what the first wrote
            async with client("a") as c:
                r = (await c.call_tool("recall", {"query": "rows in orders"})).structured_content
                assert [e["id"] for e in r["entries"]] == [w["id"]]
            async with client("b") as c:
                r = (await c.call_tool("recall", {"query": "rows in orders"})).structured_content
                assert r["entries"] == []  # B sees nothing of A
            # no key, or a bad one: refused by the bearer middleware before any tool runs
            async with httpx2.AsyncClient(timeout=10) as h:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                for hdr in ({}, {"Authorization": "Bearer mck_nope"}):
                    resp = await h.post(f"{base}/mcp", json=body, headers=hdr)
                    assert resp.status_code == 401

        anyio.run(main)
    finally:
        srv.should_exit = True
        th.join(timeout=15)
        p.close()
    assert not th.is_alive()


def test_memcurator_mcp_over_stdio_as_an_agent_host_starts_it(tmp_path: Path) -> None:
    import os
    import sys

    from mcp import StdioServerParameters

    keys = make_keys(tmp_path / "s.keys")
    keys.table.close()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memcurator.cli", "mcp", str(tmp_path / "store.db")]
        + ["--keys", str(tmp_path / "s.keys")],
        env={**os.environ, "MEMCURATOR_KEY": keys.tokens["a"]},
        cwd=str(Path(__file__).resolve().parents[1]),
    )

    async def main() -> None:
        with anyio.fail_after(120):
            async with Client(params) as c:
                w = (await c.call_tool("write", {"text": SQL_A})).structured_content
                r = (await c.call_tool("recall", {"query": "rows in orders"})).structured_content
                assert w["admitted"] and [e["id"] for e in r["entries"]] == [w["id"]]

    anyio.run(main)


def test_every_tool_answers_another_tenants_ids_as_missing_ones(
    pool: tuple[TenantPool, Keys],
) -> None:
    """Generated from the server's own tool list: every tool argument that names an entry or
    a recall (``entry_id``, ``used``, ``recall_id``) gets, for B's value, exactly the answer it
    gets for a value that never existed; B's entries and log do not change."""
    p, keys = pool
    a = create_mcp(p, key=keys.table.authenticate(keys.tokens["a"]))
    b = create_mcp(p, key=keys.table.authenticate(keys.tokens["b"]))
    probed: list[tuple[str, str]] = []
    b_log: list[int] = []

    async def main() -> None:
        async with Client(b) as cb:
            wb = (await cb.call_tool("write", {"text": SQL_B})).structured_content
            rb = (await cb.call_tool("recall", {"query": "customers in Paris"})).structured_content
        b_log.append(len(p.tenant("b").memory.decisions()))
        b_vals = {"entry_id": wb["id"], "used": [wb["id"]], "recall_id": rb["recall_id"]}
        missing = {"entry_id": "f" * len(wb["id"]), "used": ["f" * len(wb["id"])],
                   "recall_id": "f" * len(rb["recall_id"])}  # fmt: skip
        async with Client(a) as c:
            await c.call_tool("write", {"text": SQL_A})
            for tool in (await c.list_tools()).tools:
                props = tool.input_schema.get("properties", {})
                for field in ("entry_id", "used", "recall_id"):
                    if field not in props:
                        continue
                    answers = []
                    for vals in (b_vals, missing):
                        args: dict[str, Any] = {field: vals[field]}
                        if "reward" in props:
                            args["reward"] = 1.0
                        res = await c.call_tool(tool.name, args)
                        answers.append((res.is_error, _text(res)))
                    assert answers[0] == answers[1], (tool.name, field, answers)
                    assert answers[0][0], (tool.name, field)  # an error, not a quiet success
                    assert wb["id"] not in answers[0][1]
                    probed.append((tool.name, field))

    anyio.run(main)
    assert {("explain", "entry_id"), ("forget", "entry_id")} <= set(probed)
    assert {("feedback", "used"), ("feedback", "recall_id")} <= set(probed)
    assert [e.text for e in p.tenant("b").memory.entries()] == [SQL_B]
    assert [len(p.tenant("b").memory.decisions())] == b_log
