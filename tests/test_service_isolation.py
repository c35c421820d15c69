"""Tenant isolation of ``memcurator serve``, generated from its own OpenAPI document.

For every route that takes an id or a name (in the path, or in the body: ``used``,
``recall_id``), a key of tenant A acting on B's ids gets exactly the status and body it gets for
ids that never existed; B's entries, budget and decision log do not change, and A's log never
names B's ids. Every listing route A can call shows nothing of B. A new route is covered
without editing this file, unless it takes a request body this file has no example for (then
the test fails and says which).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from _service_util import SQL_A, SQL_B, Keys, app_for, make_keys  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

#: a valid body for each request schema a by-id route takes
BODIES: dict[str, dict[str, Any]] = {
    "UpdateRequest": {"text": "Task: replaced\nAction: SELECT 2;", "reason": "probe"},
    "NamespacePatch": {"max_bytes": 1000},
}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[TestClient, Keys, dict[str, Any]]]:
    keys = make_keys()
    app = app_for(tmp_path, keys)
    with TestClient(app, raise_server_exceptions=False) as c:
        b = {
            "entry_id": c.post("/v1/write", json={"text": SQL_B}, headers=keys.h("b")).json()["id"],
            "name": "b",
        }
        b["recall_id"] = c.post(
            "/v1/recall", json={"query": "customers in Paris"}, headers=keys.h("b")
        ).json()["recall_id"]
        c.post("/v1/write", json={"text": SQL_A}, headers=keys.h("a"))
        # B's peer group holds a message and a sketch: the hub routes must show A neither
        shared = {"text": SQL_B, "kind": "insight", "bytes": 10, "q": 0.5, "a": 1.0,
                  "rho_s": 0.1, "source_id": b["entry_id"]}  # fmt: skip
        c.post("/v1/hub/push", json={"entries": [shared]}, headers=keys.h("b"))
        c.put("/v1/hub/sketch", json={"sketch": [0.5, 0.25]}, headers=keys.h("b"))
        yield c, keys, b
    app.state.pool.close()


def _table(rows: list[tuple[str, ...]]) -> None:
    """With ``MEMCURATOR_ISOLATION_TABLE=FILE`` set, append the probes' rows to FILE as a
    markdown table (the closing note's isolation table comes from this test, not a copy)."""
    out = os.environ.get("MEMCURATOR_ISOLATION_TABLE")
    if out:
        with open(out, "a") as f:
            f.writelines("| " + " | ".join(r) + " |\n" for r in rows)


def _missing_like(value: str) -> str:
    return "f" * len(value) if value != "b" else "zz-no-such-namespace"


def _snapshot(c: TestClient, keys: Keys) -> str:
    h = keys.h("b")
    return json.dumps(
        [
            c.get("/v1/entries", headers=h).json(),
            c.get("/v1/decisions", params={"limit": 1000}, headers=h).json(),
            c.get("/v1/namespaces/b", headers=h).json(),
        ],
        sort_keys=True,
    )


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield path, method, op


def _body_schema(op: dict[str, Any]) -> str | None:
    rb = op.get("requestBody")
    if rb is None:
        return None
    return rb["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]


def test_by_id_routes_answer_another_tenants_ids_as_missing_ones(world: Any) -> None:
    c, keys, b = world
    doc = c.get("/openapi.json").json()
    before = _snapshot(c, keys)
    probed = []
    for path, method, op in _operations(doc):
        names = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
        if not names:
            continue
        schema = _body_schema(op)
        assert schema is None or schema in BODIES, f"add an example body for {schema} ({path})"
        body = BODIES.get(schema) if schema else None
        answers = []
        for pick in (lambda v: v, _missing_like):
            url = path
            for n in names:
                assert n in b, f"no value of B for path parameter {n!r} ({path})"
                url = url.replace("{" + n + "}", pick(b[n]))
            r = c.request(method.upper(), url, json=body, headers=keys.h("a"))
            answers.append((r.status_code, r.content))
        assert answers[0] == answers[1], (method, path, answers)
        assert answers[0][0] == 404, (method, path, answers[0])
        probed.append((method, path))
    assert len(probed) >= 5  # entries get/put/delete, namespace get/patch
    assert _snapshot(c, keys) == before
    _table([(m.upper(), p, "B's id in the path", "404", "404", "identical", "unchanged")
            for m, p in probed])  # fmt: skip


def test_ids_in_bodies_answer_another_tenants_ids_as_missing_ones(world: Any) -> None:
    c, keys, b = world
    doc = c.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    before = _snapshot(c, keys)
    probed = []
    for path, method, op in _operations(doc):
        schema = _body_schema(op)
        if schema is None:
            continue
        props = schemas[schema].get("properties", {})
        for field in ("used", "recall_id"):
            if field not in props:
                continue
            answers = []
            for value in (b["entry_id"], _missing_like(b["entry_id"])):
                body: dict[str, Any] = {"reward": 1.0} if "reward" in props else {}
                if schema == "RecordRequest":
                    body = {
                        "task": {"id": "t", "instruction": "count rows"},
                        "trajectory": {"reward": 1.0},
                    }
                body[field] = [value] if field == "used" else value
                if field == "recall_id":
                    body[field] = b["recall_id"] if value == b["entry_id"] else "f" * 32
                r = c.request(method.upper(), path, json=body, headers=keys.h("a"))
                answers.append((r.status_code, r.content))
            assert answers[0] == answers[1], (path, field, answers)
            assert answers[0][0] == 404, (path, field, answers[0])
            probed.append((path, field))
    assert {("/v1/feedback", "used"), ("/v1/feedback", "recall_id")} <= set(probed)
    assert _snapshot(c, keys) == before
    _table([("POST", p, f"B's id in `{f}`", "404", "404", "identical", "unchanged")
            for p, f in probed])  # fmt: skip


def test_no_listing_shows_anything_of_another_tenant(world: Any) -> None:
    c, keys, b = world
    doc = c.get("/openapi.json").json()
    secrets = (b["entry_id"], "customers", "Paris", "bob", 'namespace="b"', '"name":"b"')
    seen = 0
    listed: list[tuple[str, str]] = []
    for path, method, op in _operations(doc):
        if any(p["in"] == "path" for p in op.get("parameters", [])) or path == "/healthz":
            continue
        if method == "get":
            # a query parameter naming B is not a way in either
            r = c.get(path, params={"namespace": "b", "limit": 1000}, headers=keys.h("a"))
        elif path == "/v1/recall":
            r = c.post(path, json={"query": SQL_B, "k": 100}, headers=keys.h("a"))
        else:
            continue
        assert r.status_code == 200, (path, r.text)
        for s in secrets:
            assert s not in r.text, (path, s)
        seen += 1
        listed.append((method.upper(), path))
    assert seen >= 7  # entries, decisions, namespaces, metrics, recall, hub pull and sketches
    ns = c.get("/v1/namespaces", headers=keys.h("a")).json()
    assert [(n["name"], n["entries"]) for n in ns] == [("a", 1)]
    # and A's own log never names B's ids after all the probing above and below
    c.delete(f"/v1/entries/{b['entry_id']}", headers=keys.h("a"))
    log = c.get("/v1/decisions", params={"limit": 1000}, headers=keys.h("a")).text
    assert b["entry_id"] not in log
    _table([(m, p, "B's text as query" if p == "/v1/recall" else "listing, `namespace=b` asked",
             "200", "-", "nothing of B", "-") for m, p in listed])  # fmt: skip
