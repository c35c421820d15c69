"""``memcurator serve`` in process (FastAPI's TestClient): routes, errors, keys, origins."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from _proc_util import run_python
from _service_util import SQL_A, SQL_B, Keys, app_for, make_keys  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from memcurator.memory import Memory  # noqa: E402

PROBLEM = "application/problem+json"


@pytest.fixture
def keys() -> Keys:
    return make_keys()


@pytest.fixture
def now() -> list[float]:
    return [0.0]


@pytest.fixture
def client(tmp_path: Path, keys: Keys, now: list[float]) -> Iterator[TestClient]:
    app = app_for(tmp_path, keys, rate_clock=lambda: now[0])
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c
    app.state.pool.close()


def _problem(r: Any, status: int, error: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    doc = r.json()
    assert doc["status"] == status and doc["error"] == error, doc
    assert set(doc) == {"type", "title", "status", "detail", "error"}
    assert "Traceback" not in r.text
    return doc


def test_write_recall_feedback_update_forget_round_trip(client: TestClient, keys: Keys) -> None:
    h = keys.h("a")
    w = client.post("/v1/write", json={"text": SQL_A, "meta": {"family": "f1"}}, headers=h)
    assert w.status_code == 200 and w.json()["admitted"], w.text
    eid = w.json()["id"]
    r = client.post("/v1/recall", json={"query": "how many rows in orders", "k": 2}, headers=h)
    assert r.json()["ids"] == [eid]
    assert r.json()["entries"][0]["meta"] == {
        "family": "f1",
        "text_sha1": r.json()["entries"][0]["meta"]["text_sha1"],
    }
    fb = client.post(
        "/v1/feedback", json={"recall_id": r.json()["recall_id"], "reward": 1.0}, headers=h
    )
    assert fb.status_code == 204, fb.text
    got = client.get(f"/v1/entries/{eid}", headers=h).json()
    assert (got["uses"], got["successes"]) == (1, 1)
    fb = client.post("/v1/feedback", json={"used": [eid], "reward": 0.0}, headers=h)
    assert client.get(f"/v1/entries/{eid}", headers=h).json()["failures"] == 1
    up = client.put(
        f"/v1/entries/{eid}", json={"text": SQL_A + " -- fast", "reason": "typo"}, headers=h
    )
    assert up.status_code == 200 and up.json()["id"] == eid
    assert client.get(f"/v1/entries/{eid}", headers=h).json()["text"].endswith("-- fast")
    f = client.delete(f"/v1/entries/{eid}", params={"reason": "user asked"}, headers=h)
    assert f.status_code == 200 and f.json()["ids"] == [eid] and f.json()["freed"] > 0
    _problem(client.get(f"/v1/entries/{eid}", headers=h), 404, "EntryNotFound")
    acts = [d["action"] for d in client.get("/v1/decisions", headers=h).json()["decisions"]]
    assert acts == ["admit", "update", "forget"]


def test_record_then_forget_all(client: TestClient, keys: Keys) -> None:
    h = keys.h("a")
    body = {
        "task": {"id": "t1", "instruction": "count rows in orders", "family": "f1"},
        "trajectory": {
            "steps": [{"observation": "", "action": "SELECT COUNT(*) FROM orders;"}],
            "reward": 1.0,
        },
    }
    r = client.post("/v1/record", json=body, headers=h)
    assert r.status_code == 200 and r.json()["written"]["admitted"], r.text
    assert client.get("/v1/namespaces", headers=h).json()[0]["step"] == 1
    # recording is the namespace's own experience: a peer key may not
    _problem(client.post("/v1/record", json=body, headers=keys.h("a_peer")), 403, "Forbidden")
    _problem(client.post("/v1/forget-all", json={}, headers=keys.h("a_peer")), 403, "Forbidden")
    fa = client.post("/v1/forget-all", json={"reason": "reset"}, headers=h)
    assert fa.status_code == 200 and len(fa.json()["ids"]) == 1
    assert client.get("/v1/entries", headers=h).json()["total"] == 0


# ---------------------------------------------------------------- keys and tenants
@pytest.mark.parametrize(
    "auth",
    [
        "Bearer nonsense",
        "Bearer mck_000000000000_" + "A" * 43,
        "Bearer mck_000000000000_" + "A" * 42,
    ],
)
def test_every_bad_key_gets_the_same_401(client: TestClient, auth: str) -> None:
    r = client.post("/v1/recall", json={"query": "rows"}, headers={"Authorization": auth})
    doc = _problem(r, 401, "Unauthorized")
    assert doc["detail"] == "invalid or revoked API key"
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("auth", [None, "Bearer", "Bearer ", "Basic dXNlcjpwdw=="])
def test_no_key_gets_a_401_that_says_how_to_send_one(client: TestClient, auth: str | None) -> None:
    # a newcomer who forgot the header (or sent another scheme) is told what to send; a
    # wrong key's answer stays the one sentence that says nothing about which part was wrong
    headers = {} if auth is None else {"Authorization": auth}
    r = client.post("/v1/recall", json={"query": "rows"}, headers=headers)
    doc = _problem(r, 401, "Unauthorized")
    assert doc["detail"] != "invalid or revoked API key"
    assert "no API key" in doc["detail"] and "Authorization: Bearer" in doc["detail"]
    assert r.headers["www-authenticate"] == "Bearer"


def test_a_revoked_key_is_refused_at_once_with_the_same_body(
    client: TestClient, keys: Keys
) -> None:
    assert client.get("/v1/namespaces", headers=keys.h("b")).status_code == 200
    kid = keys.tokens["b"].split("_")[1]
    keys.table.revoke(kid, "leaked")
    unknown = client.get(
        "/v1/namespaces", headers={"Authorization": "Bearer mck_" + "0" * 12 + "_" + "x" * 43}
    )
    revoked = client.get("/v1/namespaces", headers=keys.h("b"))
    assert revoked.status_code == 401 and revoked.content == unknown.content


def test_keys_are_stored_hashed_and_the_file_is_private(tmp_path: Path) -> None:
    k = make_keys(tmp_path / "s.keys")
    raw = (tmp_path / "s.keys").read_bytes()
    for tok in k.tokens.values():
        assert tok[17:].encode() not in raw  # the secret never reaches the file
    assert (tmp_path / "s.keys").stat().st_mode & 0o077 == 0


def test_scopes_are_enforced(client: TestClient, keys: Keys) -> None:
    _problem(
        client.post("/v1/write", json={"text": SQL_A}, headers=keys.h("a_read")), 403, "Forbidden"
    )
    assert (
        client.post("/v1/recall", json={"query": "rows"}, headers=keys.h("a_read")).status_code
        == 200
    )
    _problem(client.get("/metrics", headers=keys.h("a_read")), 403, "Forbidden")
    _problem(
        client.patch("/v1/namespaces/a", json={"max_bytes": 5000}, headers=keys.h("a_peer")),
        403,
        "Forbidden",
    )


def test_the_tenant_comes_only_from_the_key(client: TestClient, keys: Keys) -> None:
    # the client names b in a header, a query parameter and the body: all ignored or refused
    h = {**keys.h("a"), "X-Namespace": "b", "X-Memcurator-Namespace": "b"}
    w = client.post("/v1/write", params={"namespace": "b"}, json={"text": SQL_A}, headers=h)
    assert w.status_code == 200
    _problem(
        client.post("/v1/write", json={"text": SQL_B, "namespace": "b"}, headers=h),
        422,
        "InvalidInput",
    )
    assert client.get("/v1/entries", headers=keys.h("b")).json()["total"] == 0
    assert client.get("/v1/entries", params={"namespace": "b"}, headers=h).json()["total"] == 1
    assert [n["name"] for n in client.get("/v1/namespaces", headers=h).json()] == ["a"]


def test_rate_limit_answers_429_with_retry_after(
    client: TestClient, keys: Keys, now: list[float]
) -> None:
    h = keys.h("a_slow")  # 2 requests per minute
    assert client.get("/v1/namespaces", headers=h).status_code == 200
    assert client.get("/v1/namespaces", headers=h).status_code == 200
    r = client.get("/v1/namespaces", headers=h)
    _problem(r, 429, "RateLimited")
    assert int(r.headers["retry-after"]) == 30
    assert client.get("/v1/namespaces", headers=keys.h("a")).status_code == 200  # per key
    now[0] += 30.0
    assert client.get("/v1/namespaces", headers=h).status_code == 200


# ---------------------------------------------------------------- origins
def _entry(client: TestClient, keys: Keys, eid: str) -> dict[str, Any]:
    return client.get(f"/v1/entries/{eid}", headers=keys.h("a")).json()


def test_a_write_carries_the_keys_identity_as_a_proven_origin(
    client: TestClient, keys: Keys
) -> None:
    w = client.post("/v1/write", json={"text": SQL_A}, headers=keys.h("a")).json()
    assert w["origin"] == "self"
    e = _entry(client, keys, w["id"])
    assert (e["origin"], e["origin_detail"]) == ("self", "alice")
    p = client.post("/v1/write", json={"text": SQL_B}, headers=keys.h("a_peer")).json()
    e = _entry(client, keys, p["id"])
    assert (e["origin"], e["origin_detail"]) == ("peer", "p1")
    x = client.post(
        "/v1/write", json={"text": "Task: crawl\nAction: fetch the page"}, headers=keys.h("a_ext")
    ).json()
    assert (_entry(client, keys, x["id"])["origin"], x["origin"]) == ("external", "external")
    # every claim was proven: no downgrade in the log
    acts = {
        d["action"] for d in client.get("/v1/decisions", headers=keys.h("a")).json()["decisions"]
    }
    assert "downgrade" not in acts


@pytest.mark.parametrize(
    ("who", "claim"), [("a_peer", "self"), ("a_ext", "self"), ("a_ext", "peer"), ("a", "peer")]
)
def test_a_key_cannot_claim_an_origin_it_does_not_hold(
    client: TestClient, keys: Keys, who: str, claim: str
) -> None:
    r = client.post("/v1/write", json={"text": SQL_A, "origin": claim}, headers=keys.h(who))
    _problem(r, 403, "Forbidden")
    assert client.get("/v1/entries", headers=keys.h("a")).json()["total"] == 0


@pytest.mark.parametrize(
    "extra",
    [
        {"origin_detail": "bob"},
        {"signature": {"key_id": "self#1", "mac": "00"}},
        {"origin": "self", "origin_detail": "alice"},
        {"meta": {"_user": "someone-else"}},
        {"meta": {"claimed_origin": "self"}},
        {"meta": {"text_sha1": "0" * 40}},
    ],
)
def test_a_client_cannot_name_another_identity_or_bring_a_signature(
    client: TestClient, keys: Keys, extra: dict[str, Any]
) -> None:
    r = client.post("/v1/write", json={"text": SQL_A, **extra}, headers=keys.h("a_peer"))
    _problem(r, 422, "InvalidInput")


def test_a_key_may_lower_its_own_claim_to_external(client: TestClient, keys: Keys) -> None:
    w = client.post(
        "/v1/write", json={"text": SQL_A, "origin": "external"}, headers=keys.h("a")
    ).json()
    e = _entry(client, keys, w["id"])
    assert (e["origin"], e["origin_detail"]) == ("external", "alice")


# ---------------------------------------------------------------- errors
def test_error_statuses(client: TestClient, keys: Keys, tmp_path: Path) -> None:
    h = keys.h("a")
    _problem(
        client.post(
            "/v1/write", content=b"{not json", headers={**h, "content-type": "application/json"}
        ),
        400,
        "InvalidInput",
    )
    _problem(
        client.post("/v1/write", json={"text": "   "}, headers=h), 422, "InvalidInput"
    )  # library check
    _problem(client.post("/v1/write", json={"text": "🙂🙂"}, headers=h), 422, "InvalidInput")
    _problem(
        client.post("/v1/feedback", json={"used": ["x"], "reward": 2}, headers=h),
        422,
        "InvalidInput",
    )
    _problem(client.post("/v1/feedback", json={"reward": 1}, headers=h), 422, "InvalidInput")
    _problem(
        client.post("/v1/feedback", json={"recall_id": "nope", "reward": 1}, headers=h),
        404,
        "EntryNotFound",
    )
    _problem(client.get("/v1/nowhere", headers=h), 404, "HTTPError")
    _problem(client.delete("/v1/entries", headers=h), 405, "HTTPError")
    a = client.post("/v1/write", json={"text": SQL_A}, headers=h).json()["id"]
    b = client.post("/v1/write", json={"text": SQL_B}, headers=h).json()["id"]
    _problem(
        client.put(f"/v1/entries/{b}", json={"text": SQL_A.upper()}, headers=h),
        409,
        "DuplicateEntry",
    )
    assert client.get(f"/v1/entries/{b}", headers=h).json()["text"] == SQL_B  # unchanged
    _problem(client.post("/v1/write", content=b"x" * (2 << 20), headers=h), 413, "InvalidInput")
    # an entry larger than the whole budget: 413 BudgetExceeded, and the rejection is logged
    client.patch("/v1/namespaces/a", json={"max_bytes": 3000}, headers=h)
    r = client.post("/v1/write", json={"text": "Task: big\nAction: " + "word " * 400}, headers=h)
    _problem(r, 413, "BudgetExceeded")
    assert client.get("/v1/decisions", params={"action": "reject"}, headers=h).json()["decisions"]
    assert a  # (the first write stays resident or was evicted by the smaller budget, logged)


def test_a_bug_is_a_500_without_trace_or_message(
    client: TestClient, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("secret path /srv/keys and password hunter2")

    monkeypatch.setattr(Memory, "recall", boom)
    r = client.post("/v1/recall", json={"query": "rows"}, headers=keys.h("a"))
    doc = _problem(r, 500, "InternalError")
    assert "secret" not in r.text and "hunter2" not in r.text and "RuntimeError" not in r.text
    assert doc["detail"] == "the server failed to complete the request; the error is in its log"


def test_a_store_error_is_503_named(
    client: TestClient, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memcurator.errors import StoreError

    def locked(*a: Any, **k: Any) -> Any:
        raise StoreError("store locked past its timeout")

    monkeypatch.setattr(Memory, "write", locked)
    _problem(client.post("/v1/write", json={"text": SQL_A}, headers=keys.h("a")), 503, "StoreError")


# ---------------------------------------------------------------- where, listings
def test_recall_where_filters_are_data(client: TestClient, keys: Keys) -> None:
    h = keys.h("a")
    ids = {}
    for fam, (text, kind) in {
        "f1": (SQL_A, "insight"),
        "f2": (SQL_A + " -- v2 faster", "skill"),
    }.items():
        ids[fam] = client.post(
            "/v1/write",
            json={"text": text, "kind": kind, "meta": {"family": fam, "n": int(fam[1])}},
            headers=h,
        ).json()["id"]

    def recall(where: list[dict[str, Any]]) -> list[str]:
        r = client.post(
            "/v1/recall", json={"query": "count rows in orders", "k": 5, "where": where}, headers=h
        )
        assert r.status_code == 200, r.text
        return r.json()["ids"]

    assert set(recall([])) == set(ids.values())
    assert recall([{"field": "meta.family", "op": "eq", "value": "f2"}]) == [ids["f2"]]
    assert recall([{"field": "kind", "op": "in", "value": ["insight"]}]) == [ids["f1"]]
    assert recall([{"field": "meta.n", "op": "ge", "value": 2}]) == [ids["f2"]]
    assert recall([{"field": "meta.missing", "op": "exists", "value": True}]) == []
    assert set(recall([{"field": "origin_detail", "op": "eq", "value": "alice"}])) == set(
        ids.values()
    )
    for bad in (
        [{"field": "__class__", "op": "eq", "value": 1}],
        [{"field": "kind", "op": "eval", "value": "1"}],
        [{"field": "uses", "op": "lt", "value": "3"}],
        [{"field": "kind", "op": "in", "value": "insight"}],
        [{"field": "kind", "op": "eq", "value": "x", "code": "import os"}],
    ):
        r = client.post("/v1/recall", json={"query": "rows", "where": bad}, headers=h)
        _problem(r, 422, "InvalidInput")


def test_entries_are_paged_and_filtered(client: TestClient, keys: Keys) -> None:
    h = keys.h("a")
    for i in range(5):
        client.post(
            "/v1/write",
            json={
                "text": f"Task: job {i} on table t{i}\nAction: SELECT {i};",
                "user": "u1" if i % 2 else None,
            },
            headers=h,
        )
    client.post(
        "/v1/write", json={"text": "Task: crawl it\nAction: fetch"}, headers=keys.h("a_ext")
    )
    page = client.get("/v1/entries", params={"limit": 2}, headers=h).json()
    assert page["total"] == 6 and len(page["entries"]) == 2 and page["next_offset"] == 2
    seen = []
    off: int | None = 0
    while off is not None:
        p = client.get("/v1/entries", params={"limit": 4, "offset": off}, headers=h).json()
        seen += [e["id"] for e in p["entries"]]
        off = p["next_offset"]
    assert len(seen) == len(set(seen)) == 6
    assert client.get("/v1/entries", params={"origin": "external"}, headers=h).json()["total"] == 1
    assert client.get("/v1/entries", params={"user": "u1"}, headers=h).json()["total"] == 2
    assert client.get("/v1/entries", params={"kind": "skill"}, headers=h).json()["total"] == 0
    assert client.get("/v1/entries", params={"admitted_after": 0}, headers=h).json()["total"] == 6
    assert client.get("/v1/entries", params={"admitted_before": 0}, headers=h).json()["total"] == 0
    d = client.get("/v1/decisions", params={"limit": 4}, headers=h).json()
    assert len(d["decisions"]) == 4 and d["next_since"] == d["decisions"][-1]["seq"]
    rest = client.get("/v1/decisions", params={"since": d["next_since"]}, headers=h).json()
    assert len(rest["decisions"]) == 2 and rest["next_since"] is None


def test_namespace_budget_and_metrics(client: TestClient, keys: Keys) -> None:
    h = keys.h("a")
    for i in range(6):
        client.post(
            "/v1/write",
            json={"text": f"Task: report {i} for region r{i}\nAction: SELECT * FROM r{i};"},
            headers=h,
        )
    client.post("/v1/write", json={"text": SQL_B}, headers=keys.h("b"))
    ns = client.get("/v1/namespaces/a", headers=h).json()
    assert ns["entries"] == 6 and ns["max_bytes"] is None and ns["policy"] == "curator"
    small = client.patch(
        "/v1/namespaces/a", json={"max_bytes": ns["used_bytes"] // 2}, headers=h
    ).json()
    assert small["used_bytes"] <= small["max_bytes"] and small["entries"] < 6
    text = client.get("/metrics", headers=h).text
    assert 'memcurator_decisions_total{namespace="a",action="admit"' in text
    assert 'memcurator_decisions_total{namespace="a",action="evict"' in text
    assert f'memcurator_used_bytes{{namespace="a"}} {small["used_bytes"]}' in text
    assert 'route="/v1/write",method="POST",status="200"} 6' in text
    assert 'namespace="b"' not in text  # a key sees its own namespace's series only
    assert "memcurator_request_seconds_bucket" in text


def test_health_needs_no_key_and_tells_nothing_of_tenants(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and set(r.json()) == {"status", "version"}


# ---------------------------------------------------------------- OpenAPI document
ROUTES = {
    ("/healthz", "get"),
    ("/metrics", "get"),
    ("/v1/write", "post"),
    ("/v1/recall", "post"),
    ("/v1/embeddings", "post"),
    ("/v1/feedback", "post"),
    ("/v1/record", "post"),
    ("/v1/entries", "get"),
    ("/v1/entries/{entry_id}", "get"),
    ("/v1/entries/{entry_id}", "put"),
    ("/v1/entries/{entry_id}", "delete"),
    ("/v1/forget-all", "post"),
    ("/v1/decisions", "get"),
    ("/v1/namespaces", "get"),
    ("/v1/namespaces/{name}", "get"),
    ("/v1/namespaces/{name}", "patch"),
    ("/v1/hub/push", "post"),
    ("/v1/hub/pull", "get"),
    ("/v1/hub/sketch", "put"),
    ("/v1/hub/sketches", "get"),
    ("/v1/observations", "post"),
    ("/v1/observations", "get"),
    ("/v1/observations", "delete"),
}


def _refs(doc: Any) -> Iterator[str]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _refs(v)


def test_the_openapi_document_lists_every_route_with_valid_schemas(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    have = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert have == ROUTES
    schemas = doc["components"]["schemas"]
    for ref in set(_refs(doc)):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for path, method in ROUTES - {("/healthz", "get")}:
        op = doc["paths"][path][method]
        assert op.get("security") == [{"HTTPBearer": []}], (path, method)
        for status in ("401", "403", "422", "429"):
            assert op["responses"][status]["content"][PROBLEM]["schema"]["$ref"].endswith(
                "/Problem"
            )
    for name in ("WriteRequest", "RecallRequest", "FeedbackRequest", "Condition"):
        assert schemas[name]["additionalProperties"] is False, name
    # every schema is a valid JSON Schema (a compiled validator raises otherwise)
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    for s in schemas.values():
        jsonschema_rs.validator_for({**s, "components": doc["components"]})


def test_the_core_imports_without_the_serve_extra() -> None:
    code = (
        "import memcurator\n"
        "from memcurator import Memory\n"
        "from memcurator.service.keys import KeyTable\n"
        "KeyTable(':memory:').create('a', name='x')\n"
        "import memcurator.client\n"
        "from memcurator.service import create_app\n"
        "try:\n"
        "    create_app('x.db', keys=':memory:')\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = run_python(code, hide=("fastapi", "uvicorn", "starlette"))
    assert out.startswith("MissingExtra") and "memcurator[serve]" in out, out


def test_keys_cli_create_list_revoke(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memcurator.cli import app

    runner = CliRunner()
    store = str(tmp_path / "s.db")
    r = runner.invoke(
        app,
        [
            "keys",
            "create",
            store,
            "--namespace",
            "a",
            "--name",
            "alice",
            "--scopes",
            "read,admin",
            "--rate",
            "60",
            "--max-bytes",
            "9000",
            "--policy",
            "lru",
        ],
    )
    assert r.exit_code == 0, r.output
    token = r.stdout.strip().splitlines()[-1]
    from memcurator.service.keys import KeyTable

    t = KeyTable(store + ".keys")
    info = t.authenticate(token)
    assert (info.namespace, info.scopes, info.rate_per_min) == ("a", ("read", "admin"), 60.0)
    assert t.namespace_config("a").max_bytes == 9000 and t.namespace_config("a").policy == "lru"
    listed = runner.invoke(app, ["keys", "list", store, "--json"])
    row = json.loads(listed.stdout.strip().splitlines()[0])
    assert row["key_id"] == info.key_id and token[17:] not in listed.stdout
    bad = runner.invoke(
        app, ["keys", "create", store, "--namespace", "a", "--name", "x", "--scopes", "root"]
    )
    assert bad.exit_code == 2 and "scopes" in bad.output
    bad = runner.invoke(
        app, ["keys", "create", store, "--namespace", "a", "--name", "x", "--policy", "nope"]
    )
    assert bad.exit_code == 2
    assert (
        runner.invoke(app, ["keys", "revoke", store, info.key_id, "--reason", "rotated"]).exit_code
        == 0
    )
    from memcurator.errors import Unauthorized

    with pytest.raises(Unauthorized):
        t.authenticate(token)
    # a URL without a database of keys (not PostgreSQL) still needs a key file
    url = runner.invoke(app, ["keys", "list", "mysql://db/x"])
    assert url.exit_code == 2 and "--keys" in url.output
    # a PostgreSQL store keeps its keys in its database: an unreachable one says why
    pg = runner.invoke(app, ["keys", "list", "postgresql://db.invalid/x"])
    assert pg.exit_code == 2 and "cannot connect to PostgreSQL" in pg.output


def test_update_to_another_entrys_text_is_a_duplicate_and_still_invalid_input() -> None:
    from memcurator.errors import DuplicateEntry, InvalidInput

    m = Memory()
    a = m.write(SQL_A).id
    b = m.write(SQL_B).id
    with pytest.raises(DuplicateEntry) as e:
        m.update(b, "  " + SQL_A.upper())
    assert isinstance(e.value, InvalidInput) and a in str(e.value)
    assert m.get(b).text == SQL_B


def test_a_call_waiting_while_the_budget_changes_gets_the_reopened_memory(tmp_path: Path) -> None:
    import threading

    from memcurator.service.tenants import TenantPool

    keys = make_keys()
    pool = TenantPool(str(tmp_path / "s.db"), keys.table)
    key = keys.table.authenticate(keys.tokens["a"])
    old = pool.tenant("a")
    got: list[Any] = []
    with old.lock:  # a call holds the tenant; another waits for it; the budget changes
        waiter = threading.Thread(target=lambda: got.append(_use(pool, key)))
        waiter.start()
        reopen = threading.Thread(target=lambda: pool.reopen("a", max_bytes=5000))
        reopen.start()
        # release the tenant only once reopen has taken it out of the pool (reopen then waits
        # for this lock): released earlier, the waiter may rightly run first, on the old memory
        # and before the change (a race in the test, not in the pool)
        deadline = time.monotonic() + 10
        while "a" in pool.open_tenants() and time.monotonic() < deadline:
            time.sleep(0.005)
    waiter.join(10)
    reopen.join(10)
    assert got and got[0] is not old and got[0].memory.max_bytes == 5000
    pool.close()


def _use(pool: Any, key: Any) -> Any:
    with pool.using(key) as t:
        t.memory.write(SQL_A)  # a closed memory would raise here
        return t


def test_embeddings_speak_openais_format_with_the_namespaces_embedder(
    client: TestClient, keys: Keys
) -> None:
    import base64

    import numpy as np

    from memcurator.embed import HashingEmbedder

    ref = HashingEmbedder()
    texts = ["Task: count rows in orders", "用户喜欢喝绿茶", "x"]
    r = client.post("/v1/embeddings", json={"input": texts, "model": "any"}, headers=keys.h("a"))
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["object"] == "list" and doc["model"] == ref.name
    assert [d["index"] for d in doc["data"]] == [0, 1, 2]
    for d, t in zip(doc["data"], texts, strict=True):
        assert np.allclose(d["embedding"], ref.embed(t), atol=1e-6)
    assert doc["usage"]["prompt_tokens"] == doc["usage"]["total_tokens"] > 0
    # base64: little-endian float32 bytes, as OpenAI's own clients ask for by default
    r = client.post(
        "/v1/embeddings",
        json={"input": texts[1], "encoding_format": "base64"},
        headers=keys.h("a_read"),
    )
    raw = base64.b64decode(r.json()["data"][0]["embedding"])
    assert np.allclose(np.frombuffer(raw, dtype="<f4"), ref.embed(texts[1]))
    # nothing was stored or logged
    assert client.get("/v1/entries", headers=keys.h("a")).json()["total"] == 0
    assert client.get("/v1/decisions", headers=keys.h("a")).json()["decisions"] == []
    for body in (
        {"input": [1, 2, 3]},  # token arrays are not supported
        {"input": ""},
        {"input": []},
        {"input": ["t"] * 2049},
        {"input": "t", "dimensions": 384},
        {"input": "t", "encoding_format": "int8"},
        {"input": "t", "namespace": "b"},
    ):
        r = client.post("/v1/embeddings", json=body, headers=keys.h("a"))
        assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, (body, r.text)
    r = client.post("/v1/embeddings", json={"input": "t"})
    assert r.status_code == 401
