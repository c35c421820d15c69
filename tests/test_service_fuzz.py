"""The API fuzzed from its own OpenAPI document (schemathesis): no 500, every error a problem.

Every route is fuzzed: the ``/v1`` API from ``/openapi.json`` as served, and the inspector's
``/ui/api`` routes (kept out of the served document on purpose, see
:mod:`memcurator.service.inspector.routes`) by putting them into the document of this test's
own app. Both generation modes run: inputs the schema allows (positive) and inputs it does not
(negative: wrong types, out-of-range numbers, missing and unknown fields, bad headers). After the
fuzzing, the namespace it wrote into still lists, reads back and recalls (an input that was
stored and then broke every read was the kind of bug issue 32 found).

Bounded: :data:`EXAMPLES` examples per operation and mode, no deadline (2 shared CPU cores), in
process over ASGI.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")

from _service_util import SQL_A, SQL_B, app_for, make_keys  # noqa: E402
from fastapi.openapi.utils import get_openapi  # noqa: E402
from fastapi.routing import APIRoute  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402

from memcurator.service.inspector.routes import inspector_router  # noqa: E402
from memcurator.service.routes.deps import key_of  # noqa: E402

#: examples per operation (each mode): enough to reach past the first field of every body
EXAMPLES = 25

# built at import: schemathesis parametrizes from a schema object (its from_fixture does not
# work with this pytest); the store lives in a temporary folder removed at the module's end
_DIR = tempfile.mkdtemp(prefix="memcurator-fuzz-")
_KEYS = make_keys()
_APP = app_for(Path(_DIR), _KEYS)
#: the inspector's API routes, fuzzed too: added to this test app's document only (a second
#: build of the same router, its routes put into the schema; the app serves its own)
_UI = [r for r in inspector_router(key_of).routes if isinstance(r, APIRoute)]
for _r in _UI:
    _r.include_in_schema = True
_DOC = _APP.openapi()
_UI_DOC = get_openapi(title=_APP.title, version=_APP.version, routes=_UI)
_DOC["paths"].update(_UI_DOC["paths"])
_DOC["components"]["schemas"].update(_UI_DOC.get("components", {}).get("schemas", {}))
_APP.openapi_schema = _DOC
with TestClient(_APP) as _c:  # something to find, update, release and forget
    _c.post("/v1/write", json={"text": SQL_A}, headers=_KEYS.h("a"))
    _c.post("/v1/write", json={"text": SQL_B}, headers=_KEYS.h("a_ext"))  # on probation
    _c.post("/v1/observations", json={"text": SQL_B, "label": "seed"}, headers=_KEYS.h("a"))
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=EXAMPLES
)


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    _APP.state.pool.close()
    shutil.rmtree(_DIR, ignore_errors=True)


def test_the_fuzzed_document_holds_every_route(tmp_path: Path) -> None:
    doc = TestClient(_APP).get("/openapi.json").json()
    have = {(p, m.upper()) for p, ops in doc["paths"].items() for m in ops}
    fresh = app_for(tmp_path, make_keys())  # /v1 as a server documents it
    served = fresh.openapi()
    fresh.state.pool.close()
    ui = {(r.path, m) for r in _UI for m in r.methods if m != "HEAD"}
    assert len(ui) >= 10 and ui <= have, sorted(ui - have)
    assert {(p, m.upper()) for p, ops in served["paths"].items() for m in ops} <= have
    assert ("/v1/observations", "POST") in have and ("/v1/write", "POST") in have


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_input_makes_the_server_fail(case: Any) -> None:
    r = case.call(headers=_KEYS.h("a"))
    assert r.status_code < 500, (case.method, case.path, r.status_code, r.text[:500])
    if r.status_code >= 400:
        ct = r.headers["content-type"]  # schemathesis keeps each header as a list
        ct = ct[0] if isinstance(ct, list) else ct
        assert ct.startswith("application/problem+json"), r.text[:300]
        assert "Traceback" not in r.text


def test_what_the_fuzzing_stored_still_reads_back() -> None:
    """Runs after the fuzzing (pytest keeps the file's order): every read of the namespace the
    fuzzer wrote into answers, whatever it stored."""
    with TestClient(_APP, raise_server_exceptions=False) as c:
        h = _KEYS.h("a")
        es = c.get("/v1/entries", params={"limit": 1000}, headers=h)
        assert es.status_code == 200, es.text[:300]
        for e in es.json()["entries"]:
            assert c.get(f"/v1/entries/{e['id']}", headers=h).status_code == 200
            assert c.get(f"/ui/api/entries/{e['id']}", headers=h).status_code == 200
        for path in ("/v1/decisions", "/ui/api/entries", "/ui/api/overview", "/ui/api/probation"):
            assert c.get(path, headers=h).status_code == 200, path
        r = c.post("/v1/recall", json={"query": "rows", "k": 1000}, headers=h)
        assert r.status_code == 200, r.text[:300]


# ---------------------------------------------------------------- the bad-input kinds, by hand
# Issue 32's kinds, each member on every route that takes it, REST and MCP alike: a 4xx (a tool
# error over MCP) and nothing changed. tests/test_service_limits.py holds the first members.
def _deep(depth: int) -> dict[str, Any]:
    node: Any = 1
    for _ in range(depth - 1):
        node = {"a": node}
    return {"k": node}


_BIG_META = {"blob": "x" * (100 * 1024)}  # 100 KiB
_HUGE, _TINY = 2**63, -(2**63) - 1
_TASK = {"id": "t1", "instruction": "count rows"}
_ENTRY = {"text": SQL_A, "kind": "insight", "bytes": 10, "q": 0.5, "a": 1.0, "rho_s": 0.1,
          "source_id": "e1"}  # fmt: skip

#: (method, path, JSON body or raw bytes) of bad requests, by kind
BAD_REST: dict[str, list[tuple[str, str, Any]]] = {
    "meta nested 40 levels": [
        ("post", "/v1/write", {"text": SQL_B, "meta": _deep(40)}),
        ("post", "/v1/write", {"text": SQL_B, "meta": {"l": [[[[_deep(38)]]]]}}),
    ],
    "meta of 100 KiB": [("post", "/v1/write", {"text": SQL_B, "meta": _BIG_META})],
    "integers outside 64 bits": [
        ("post", "/v1/write", {"text": SQL_B, "meta": {"n": _HUGE}}),
        ("post", "/v1/write", {"text": SQL_B, "meta": {"n": _TINY}}),
        ("post", "/v1/recall", {"query": "rows", "k": _HUGE}),
        ("post", "/v1/recall", {"query": "rows", "k": _TINY}),
        ("post", "/ui/api/recall", {"query": "rows", "k": _HUGE}),
        ("post", "/v1/hub/push", {"round": _TINY}),
        ("patch", "/v1/namespaces/a", {"max_bytes": _TINY}),
        ("post", "/v1/embeddings", {"input": "rows", "dimensions": _TINY}),
        ("get", "/v1/decisions?since=9223372036854775808", None),
        ("get", "/ui/api/decisions?before=9223372036854775808", None),
        ("get", "/ui/api/decisions?before=-9223372036854775809", None),
        ("get", "/ui/api/entries?offset=9223372036854775808", None),
        ("get", "/ui/api/probation?offset=9223372036854775808", None),
        ("get", "/v1/entries?created_to_step=-9223372036854775809", None),
    ],
    "NaN and Infinity in JSON numbers": [
        ("post", "/v1/write", b'{"text": "Task: t\\nAction: SELECT 1;", "meta": {"x": NaN}}'),
        (
            "post",
            "/v1/write",
            b'{"text": "Task: t\\nAction: SELECT 1;", "meta": {"x": [Infinity]}}',
        ),
        ("post", "/v1/recall", b'{"query": "rows", "min_score": NaN}'),
        ("post", "/v1/recall", b'{"query": "rows", "k": Infinity}'),
        (
            "post",
            "/v1/recall",
            b'{"query": "rows", "where": [{"field": "uses", "op": "gt", "value": -Infinity}]}',
        ),  # fmt: skip
        ("post", "/ui/api/recall", b'{"query": "rows", "min_score": NaN}'),
        ("post", "/v1/feedback", b'{"reward": NaN, "used": []}'),
        ("post", "/v1/feedback", b'{"reward": Infinity, "used": []}'),
        (
            "post",
            "/v1/record",
            b'{"task": {"id": "t1", "instruction": "count rows"}, "trajectory": {"reward": NaN}}',
        ),  # fmt: skip
        (
            "post",
            "/v1/record",
            b'{"task": {"id": "t1", "instruction": "count rows"}, '
            b'"trajectory": {"reward": 1.0, "metrics": {"m": Infinity}}}',
        ),
        ("patch", "/v1/namespaces/a", b'{"max_bytes": Infinity}'),
        ("put", "/v1/hub/sketch", b'{"round": 1, "sketch": [0.1, NaN]}'),
    ],
    "k out of range": [
        ("post", path, {"query": "rows", "k": k})
        for path in ("/v1/recall", "/ui/api/recall")
        for k in (10**9, 0, -1)
    ],
    "strings for numbers and booleans": [
        ("post", "/v1/recall", {"query": "rows", "k": "2"}),
        ("post", "/ui/api/recall", {"query": "rows", "k": "2"}),
        ("post", "/ui/api/recall", {"query": "rows", "min_score": "0.1"}),
        ("post", "/v1/feedback", {"reward": False, "used": []}),
        ("post", "/v1/record", {"task": _TASK, "trajectory": {"reward": False}}),
        ("post", "/v1/record", {"task": _TASK, "trajectory": {"reward": "1"}}),
        ("post", "/v1/hub/push", {"entries": [_ENTRY | {"q": "0.5"}]}),
    ],
    "unknown fields": [
        ("post", "/v1/write", {"text": SQL_B, "origin_detail": "root"}),
        ("post", "/v1/recall", {"query": "rows", "namespace": "b"}),
        ("post", "/ui/api/recall", {"query": "rows", "observe": True}),
        ("post", "/v1/feedback", {"reward": 1.0, "used": [], "verified": True}),
        ("post", "/v1/record", {"task": _TASK | {"x": 1}, "trajectory": {"reward": 1.0}}),
        ("post", "/v1/observations", {"text": SQL_B, "source": "web"}),
        ("post", "/v1/forget-all", {"reason": "x", "namespace": "b"}),
        ("patch", "/v1/namespaces/a", {"max_bytes": 10**6, "policy": "keep-all"}),
        ("post", "/v1/embeddings", {"input": "rows", "encoding": "float"}),
    ],
    "wrong embedding dimension": [
        ("post", "/v1/embeddings", {"input": "rows", "dimensions": 3}),
        ("post", "/v1/embeddings", {"input": "rows", "dimensions": 1 << 20}),
    ],
    "empty text": [
        ("post", "/v1/write", {"text": ""}),
        ("post", "/v1/write", {"text": " \n\t"}),
        ("post", "/v1/recall", {"query": ""}),
        ("post", "/ui/api/recall", {"query": ""}),
        ("post", "/v1/observations", {"text": ""}),
        (
            "post",
            "/v1/record",
            {"task": {"id": "t1", "instruction": ""}, "trajectory": {"reward": 1.0}},
        ),  # fmt: skip
        ("post", "/v1/embeddings", {"input": ""}),
        ("post", "/v1/embeddings", {"input": ["rows", ""]}),
    ],
}


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[tuple[TestClient, Any]]:
    keys = make_keys()
    app = app_for(tmp_path, keys)
    with TestClient(app, raise_server_exceptions=False) as c:
        c.post("/v1/write", json={"text": SQL_A}, headers=keys.h("a"))
        yield c, keys
    app.state.pool.close()


def _state(c: TestClient, keys: Any) -> Any:
    """Everything a bad request must leave as it was: entries, the log, the namespace, the
    key's observation session."""
    h = keys.h("a")
    obs = c.get("/v1/observations", headers=h).json()
    return (
        c.get("/v1/entries", params={"limit": 1000}, headers=h).json(),
        c.get("/v1/decisions", params={"limit": 1000}, headers=h).json(),
        c.get("/v1/namespaces/a", headers=h).json(),
        {k: v for k, v in obs.items() if k != "expires_in_s"},
    )


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param(*req, id=f"{kind}-{i}")
        for kind, reqs in BAD_REST.items()
        for i, req in enumerate(reqs)
    ],  # fmt: skip
)
def test_each_bad_input_kind_gets_a_4xx_over_rest_and_changes_nothing(
    svc: Any, method: str, path: str, body: Any
) -> None:
    c, keys = svc
    before = _state(c, keys)
    h = keys.h("a")
    if body is None:
        r = c.request(method, path, headers=h)
    elif isinstance(body, bytes):
        r = c.request(method, path, content=body, headers=h | {"content-type": "application/json"})
    else:
        r = c.request(method, path, json=body, headers=h)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/problem+json"), r.text[:200]
    assert _state(c, keys) == before


def test_each_bad_input_kind_is_refused_over_mcp_and_changes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from mcp.server.mcpserver.exceptions import ToolError

    from memcurator.service.mcp_server import create_mcp
    from memcurator.service.tenants import TenantPool

    keys = make_keys()
    pool = TenantPool(str(tmp_path / "store.db"), keys.table)
    server = create_mcp(pool, key=keys.table.authenticate(keys.tokens["a"]))
    nan, inf = float("nan"), float("inf")
    bad: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "meta nested 40 levels": [("write", {"text": SQL_B, "meta": _deep(40)})],
        "meta of 100 KiB": [("write", {"text": SQL_B, "meta": _BIG_META})],
        "integers outside 64 bits": [
            ("write", {"text": SQL_B, "meta": {"n": _HUGE}}),
            ("write", {"text": SQL_B, "meta": {"n": _TINY}}),
            ("recall", {"query": "rows", "k": _HUGE}),
            ("recall", {"query": "rows", "k": _TINY}),
        ],
        "NaN and Infinity": [
            ("write", {"text": SQL_B, "meta": {"x": nan}}),
            ("write", {"text": SQL_B, "meta": {"x": [inf]}}),
            ("feedback", {"reward": nan, "used": []}),
            ("feedback", {"reward": inf, "used": []}),
            ("recall", {"query": "rows", "where": [{"field": "uses", "op": "gt", "value": -inf}]}),
        ],
        "k out of range": [("recall", {"query": "rows", "k": k}) for k in (10**9, 0, -1)],
        "strings for numbers and booleans": [
            ("recall", {"query": "rows", "k": "2"}),
            ("feedback", {"reward": False, "used": []}),
        ],
        "unknown arguments": [
            ("write", {"text": SQL_B, "origin": "self"}),
            ("recall", {"query": "rows", "namespace": "b"}),
            ("feedback", {"reward": 1.0, "used": [], "verified": True}),
            ("forget", {"entry_id": "x", "hard": True}),
            ("explain", {"entry_id": "x", "all": True}),
            ("observe", {"text": SQL_B, "source": "web"}),
        ],
        "empty text": [
            ("write", {"text": ""}),
            ("recall", {"query": ""}),
            ("observe", {"text": ""}),
            ("forget", {"entry_id": ""}),
        ],
    }

    async def main() -> None:
        async with Client(server) as c:
            assert not (await c.call_tool("write", {"text": SQL_A})).is_error
            mem = pool.tenant("a").memory
            before = ([e.id for e in mem.entries()], len(mem.decisions()), mem.used_bytes)
            for kind, calls in bad.items():
                for tool, args in calls:
                    if kind == "NaN and Infinity":
                        # the SDK's client sends NaN as null: hand the server what a client
                        # writing NaN literals would (the server's JSON parser accepts them)
                        with pytest.raises(ToolError, match="InvalidInput|finite"):
                            await server.call_tool(tool, args)
                        continue
                    res = await c.call_tool(tool, args)
                    assert res.is_error, (kind, tool, args)
            assert ([e.id for e in mem.entries()], len(mem.decisions()), mem.used_bytes) == before

    try:
        anyio.run(main)
    finally:
        pool.close()


def test_mcp_over_http_refuses_nan_literals_and_a_streamed_20_mb_body(tmp_path: Path) -> None:
    """The wire path the SDK's client cannot take: JSON-RPC bodies with NaN/Infinity literals
    (the server's parser reads them), and a chunked body far over the limit (refused as it
    streams, as ``memcurator mcp --transport http`` serves it)."""
    pytest.importorskip("mcp")
    import json
    import logging

    from memcurator.service.guard import MAX_BODY_BYTES
    from memcurator.service.mcp_server import create_mcp
    from memcurator.service.tenants import TenantPool

    keys = make_keys()
    pool = TenantPool(str(tmp_path / "store.db"), keys.table)
    base = "http://127.0.0.1:9"  # never connected to: the app runs in process
    app = create_mcp(pool, base_url=base).streamable_http_app(
        stateless_http=True, host="127.0.0.1", max_request_body_size=MAX_BODY_BYTES
    )
    h = keys.h("a") | {"accept": "application/json, text/event-stream",
                       "content-type": "application/json"}  # fmt: skip

    def call(name: str, args: str) -> bytes:
        head = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "%s", '
        return (head % name + f'"arguments": {args}}}}}').encode()

    def chunks() -> Iterator[bytes]:
        yield call("write", '{"text": "Task: count rows\\nAction: ')[:-4]
        for _ in range(20 * 16):  # 20 MiB
            yield b"x" * 65536
        yield b'"}}}'

    text = json.dumps(SQL_B)
    bad = [
        call("write", f'{{"text": {text}, "meta": {{"x": NaN}}}}'),
        call("write", f'{{"text": {text}, "meta": {{"x": [-Infinity]}}}}'),
        call("feedback", '{"reward": Infinity, "used": []}'),
        call("feedback", '{"reward": NaN, "used": []}'),
        call("recall", '{"query": "rows", "k": 1e400}'),
        call("recall", '{"query": "rows", "k": 9223372036854775808}'),
        call("write", f'{{"text": {text}, "namespace": "b"}}'),
    ]
    logging.disable(logging.INFO)
    try:
        with TestClient(app, base_url=base, raise_server_exceptions=False) as c:
            ok = c.post("/mcp", content=call("write", json.dumps({"text": SQL_A})), headers=h)
            assert ok.status_code == 200 and '"isError":false' in ok.text, ok.text[:300]
            mem = pool.tenant("a").memory
            before = ([e.id for e in mem.entries()], len(mem.decisions()))
            for body in bad:
                r = c.post("/mcp", content=body, headers=h)
                assert r.status_code < 500 and '"isError":true' in r.text, (body, r.text[:300])
            r = c.post("/mcp", content=chunks(), headers=h)
            assert r.status_code == 413, r.text[:200]
            assert ([e.id for e in mem.entries()], len(mem.decisions())) == before
    finally:
        logging.disable(logging.NOTSET)
        pool.close()
