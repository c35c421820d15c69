"""The inspector's read routes and probation actions (``/ui/api``), without a browser.

Same key, same scopes as ``/v1``; another namespace's id is answered as a missing one; the
actions are logged with the key's name; the listings filter and page on the server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _service_util import SQL_A, SQL_B, make_keys
from fastapi.testclient import TestClient


@pytest.fixture()
def env(tmp_path: Path) -> Any:
    from memcurator.service.app import create_app

    k = make_keys()
    _, k.tokens["a_write"] = k.table.create("a", name="writer", scopes=("write",))
    app = create_app(str(tmp_path / "s.db"), keys=k.table)
    with TestClient(app) as c:
        yield c, k
    app.state.pool.close()


def _w(c: TestClient, k: Any, who: str, text: str, **kw: Any) -> dict[str, Any]:
    r = c.post("/v1/write", json={"text": text, **kw}, headers=k.h(who))
    assert r.status_code == 200, r.text
    return dict(r.json())


def _texts(n: int) -> list[str]:
    return [
        f"Task: count the rows of table t{i} where col{i % 3} is set\n"
        f"Action: SELECT COUNT(*) FROM t{i} WHERE col{i % 3} IS NOT NULL;"
        for i in range(n)
    ]


READS = [
    ("GET", "/ui/api/overview"),
    ("GET", "/ui/api/usage"),
    ("GET", "/ui/api/entries"),
    ("GET", "/ui/api/decisions"),
    ("GET", "/ui/api/probation"),
    ("POST", "/ui/api/recall"),
]


@pytest.mark.parametrize(("method", "path"), READS)
def test_every_route_needs_a_key_and_the_read_scope(env: Any, method: str, path: str) -> None:
    c, k = env
    body = {"query": "count rows"} if method == "POST" else None
    assert c.request(method, path, json=body).status_code == 401
    bad = {"Authorization": "Bearer mck_000000000000_" + "x" * 43}
    assert c.request(method, path, json=body, headers=bad).status_code == 401
    r = c.request(method, path, json=body, headers=k.h("a_write"))
    assert r.status_code == 403 and "'read' scope" in r.json()["detail"]
    assert c.request(method, path, json=body, headers=k.h("a_read")).status_code == 200


def test_whoami_and_glossary_need_only_a_key(env: Any) -> None:
    c, k = env
    assert c.get("/ui/api/whoami").status_code == 401
    me = c.get("/ui/api/whoami", headers=k.h("a_read")).json()
    assert me == {"name": "reader", "namespace": "a", "origin": "self", "scopes": ["read"]}
    terms = c.get("/ui/api/glossary", headers=k.h("a_write")).json()
    assert {"ρ", "trust gate", "evictions"} <= {t["name"] for t in terms}


def test_entries_search_filter_and_page_on_the_server(env: Any) -> None:
    c, k = env
    ids = [_w(c, k, "a", t, meta={"family": f"f{i % 2}"})["id"] for i, t in enumerate(_texts(7))]
    ext = _w(c, k, "a_ext", SQL_B)["id"]

    def page(**q: Any) -> dict[str, Any]:
        r = c.get("/ui/api/entries", params=q, headers=k.h("a_read"))
        assert r.status_code == 200, r.text
        return dict(r.json())

    everything = page()
    assert everything["total"] == 8 and everything["rows"][0]["id"] == ext  # newest first
    assert [r["id"] for r in page(order="oldest", limit=3)["rows"]] == ids[:3]
    p2 = page(order="oldest", limit=3, offset=3)
    assert [r["id"] for r in p2["rows"]] == ids[3:6] and p2["next_offset"] == 6
    assert page(order="oldest", limit=3, offset=6)["next_offset"] is None
    assert [r["id"] for r in page(q="TABLE T4 ")["rows"]] == [ids[4]]  # case-insensitive
    assert [r["id"] for r in page(q=ids[2][:10])["rows"]] == [ids[2]]  # by id
    assert [r["id"] for r in page(state="probation")["rows"]] == [ext]
    assert page(state="injectable")["total"] == 7
    assert [r["id"] for r in page(origin="external")["rows"]] == [ext]
    assert page(meta_key="family", meta_value="f1", order="oldest")["total"] == 3
    assert page(meta_key="family")["total"] == 7
    assert page(q="paris", origin="self")["total"] == 0
    r = c.get("/ui/api/entries", params={"state": "bogus"}, headers=k.h("a_read"))
    assert r.status_code == 422 and "state must be one of" in r.json()["detail"]
    long = "Task: " + "x" * 400 + "\nAction: SELECT 1;"
    _w(c, k, "a", long)
    assert page(q="xxxx")["rows"][0]["preview"].endswith("…")


def test_overview_usage_and_an_entry_with_its_decisions(env: Any) -> None:
    c, k = env
    own = _w(c, k, "a", SQL_A)
    ext = _w(c, k, "a_ext", SQL_B)
    o = c.get("/ui/api/overview", headers=k.h("a_read")).json()
    assert o["states"] == {"injectable": 1, "probation": 1, "distilled": 0}
    assert o["origins"] == {"self": 1, "external": 1} and o["entries"] == 2
    u = c.get("/ui/api/usage", headers=k.h("a_read")).json()
    assert u["points"][-1]["used_bytes"] == u["now"]["used_bytes"] == o["used_bytes"]
    d = c.get(f"/ui/api/entries/{own['id']}", headers=k.h("a_read")).json()
    assert d["resident"] and d["entry"]["text"] == SQL_A and d["trust"]["state"] == "trusted"
    assert d["entry"]["origin_detail"] == "alice" and d["trust"]["signed"]
    assert [x["action"] for x in d["decisions"]] == ["admit"]
    v = c.get(f"/ui/api/entries/{own['id']}/value", headers=k.h("a_read")).json()
    assert v["policy"] == "curator" and v["terms"]["b"] == own_bytes(c, k, own)
    assert set(v["terms"]) >= {"rho", "V", "H", "p", "q", "a", "b"}
    e = c.get(f"/ui/api/entries/{ext['id']}", headers=k.h("a_read")).json()
    assert e["trust"]["state"] == "probation" and e["trust"]["probation"] == "origin external"
    assert not e["trust"]["signed"] and e["trust"]["lacks"]
    # forgotten: still shown, by its decisions
    c.delete(f"/v1/entries/{own['id']}", headers=k.h("a"))
    gone = c.get(f"/ui/api/entries/{own['id']}", headers=k.h("a_read")).json()
    assert not gone["resident"] and [x["action"] for x in gone["decisions"]] == ["admit", "forget"]
    u2 = c.get("/ui/api/usage", headers=k.h("a_read")).json()
    assert (
        u2["points"][-1]["used_bytes"] == u2["now"]["used_bytes"] == ext["used_bytes"] - own_b(own)
    )


def own_b(w: dict[str, Any]) -> int:
    return int(w["used_bytes"])


def own_bytes(c: TestClient, k: Any, w: dict[str, Any]) -> float:
    return float(c.get(f"/v1/entries/{w['id']}", headers=k.h("a")).json()["bytes"])


def test_decision_timeline_filters_and_pages(env: Any) -> None:
    c, k = env
    for t in _texts(5):
        _w(c, k, "a", t)
    _w(c, k, "a_ext", SQL_B)
    c.patch("/v1/namespaces/a", json={"max_bytes": 6000}, headers=k.h("a"))

    def page(**q: Any) -> dict[str, Any]:
        return dict(c.get("/ui/api/decisions", params=q, headers=k.h("a_read")).json())

    allrows = page()["decisions"]
    seqs = [d["seq"] for d in allrows]
    assert seqs == sorted(seqs, reverse=True)  # newest first
    ev = page(action="evict")["decisions"]
    assert ev and all(d["action"] == "evict" and d["term"] == "evictions" for d in ev)
    assert all("byte budget" in d["reason"] and d["words"] for d in ev)
    assert page(reason="BYTE BUDGET")["decisions"] == ev  # reason, case-insensitive
    first = page(limit=2)
    older = page(limit=2, before=first["next_before"])
    assert [d["seq"] for d in first["decisions"] + older["decisions"]] == seqs[:4]
    ext_rows = page(origin="external")["decisions"]
    assert ext_rows and all("origin external" in d["reason"] for d in ext_rows)
    assert len(page(action="admit")["decisions"]) == 6
    assert [d["seq"] for d in page(action="admit", before=seqs[0])["decisions"]][:1] != [seqs[0]]


def test_recall_playground_changes_nothing(env: Any) -> None:
    c, k = env
    for t in _texts(6):
        _w(c, k, "a", t)
    _w(c, k, "a_ext", SQL_B)
    before = c.get("/v1/namespaces/a", headers=k.h("a")).json()
    body = {"query": "count the rows of table t3", "k": 3}
    r = c.post("/ui/api/recall", json=body, headers=k.h("a_read")).json()
    api = c.post("/v1/recall", json={**body, "observe": False}, headers=k.h("a_read")).json()
    assert [x["id"] for x in r["candidates"]] == api["ids"]
    assert [x["score"] for x in r["candidates"]] == pytest.approx(api["scores"])
    top = r["candidates"][0]
    assert "t3 " in top["preview"] and 0 < top["dense"] <= 1 and top["lexical"] == 1.0
    assert r["removed"]["on probation"] == 1 and r["removed"]["where filter"] is None
    w = {**body, "where": [{"field": "meta.family", "op": "exists", "value": True}]}
    r2 = c.post("/ui/api/recall", json=w, headers=k.h("a_read")).json()
    assert r2["candidates"] == [] and r2["removed"]["where filter"] == 6
    assert c.get("/v1/namespaces/a", headers=k.h("a")).json() == before  # no log row, no step
    bad = c.post("/ui/api/recall", json={"query": "x", "code": "1"}, headers=k.h("a_read"))
    assert bad.status_code == 422


def test_release_and_forget_need_admin_and_are_logged_with_the_key(env: Any) -> None:
    c, k = env
    held = [_w(c, k, "a_ext", t)["id"] for t in _texts(2)]
    own = _w(c, k, "a", SQL_A)["id"]
    q = c.get("/ui/api/probation", headers=k.h("a_read")).json()
    assert q["total"] == 2 and {r["id"] for r in q["rows"]} == set(held)
    for who in ("a_read", "a_ext"):  # no admin scope: refused, nothing changed
        for what in ("release", "forget"):
            r = c.post(
                f"/ui/api/probation/{held[0]}/{what}", params={"reason": "x"}, headers=k.h(who)
            )
            assert r.status_code == 403, r.text
    assert c.get("/ui/api/probation", headers=k.h("a_read")).json()["total"] == 2
    r = c.post(f"/ui/api/probation/{own}/release", params={"reason": "x"}, headers=k.h("a"))
    assert r.status_code == 422 and "not on probation" in r.json()["detail"]
    r = c.post(f"/ui/api/probation/{held[0]}/release", params={"reason": " "}, headers=k.h("a"))
    assert r.status_code == 422
    r = c.post(
        f"/ui/api/probation/{held[0]}/release", params={"reason": "checked"}, headers=k.h("a")
    )
    assert r.status_code == 200 and r.json()["by"] == "alice"
    r = c.post(f"/ui/api/probation/{held[1]}/forget", params={"reason": "spam"}, headers=k.h("a"))
    assert r.status_code == 200 and r.json()["forgotten"] == [held[1]]
    log = c.get("/v1/decisions", headers=k.h("a")).json()["decisions"]
    corr = [d for d in log if d["action"] == "corroborate"]
    assert [d["entry_id"] for d in corr] == [held[0]] and "admin key 'alice'" in corr[0]["reason"]
    fg = [d for d in log if d["action"] == "forget"]
    assert [d["entry_id"] for d in fg] == [held[1]] and "admin key 'alice'" in fg[0]["reason"]
    assert c.get("/ui/api/probation", headers=k.h("a_read")).json()["total"] == 0
    rec = c.post("/v1/recall", json={"query": _texts(1)[0], "k": 1}, headers=k.h("a_read"))
    assert rec.json()["ids"] == [held[0]]  # released: recall injects it now


def test_another_namespace_id_is_answered_as_a_missing_one(env: Any) -> None:
    c, k = env
    b_id = _w(c, k, "b", SQL_A)["id"]
    b_held = c.post("/v1/write", json={"text": SQL_B, "origin": "external"}, headers=k.h("b"))
    b_held_id = b_held.json()["id"]
    probes = [
        ("GET", "/ui/api/entries/{}", None),
        ("GET", "/ui/api/entries/{}/value", None),
        ("POST", "/ui/api/probation/{}/release?reason=x", None),
        ("POST", "/ui/api/probation/{}/forget?reason=x", None),
    ]
    for method, path, body in probes:
        for bid in (b_id, b_held_id):
            theirs = c.request(method, path.format(bid), json=body, headers=k.h("a"))
            missing = c.request(method, path.format("0" * 18), json=body, headers=k.h("a"))
            assert theirs.status_code == missing.status_code == 404
            assert theirs.content == missing.content
    for path in ("/ui/api/entries", "/ui/api/decisions", "/ui/api/probation", "/ui/api/usage"):
        assert b_id not in c.get(path, headers=k.h("a")).text
    b = c.get(f"/ui/api/entries/{b_held_id}", headers=k.h("b")).json()
    assert b["trust"]["state"] == "probation"  # untouched by a's probes


def test_peers_traffic_needs_peer_or_admin(env: Any) -> None:
    c, k = env
    assert c.get("/ui/api/peers", headers=k.h("a_read")).status_code == 403
    entry = {
        "text": SQL_A,
        "kind": "insight",
        "bytes": 100,
        "q": 0.5,
        "a": 1.0,
        "rho_s": 0.1,
        "source_id": "s1",
    }
    r = c.post("/v1/hub/push", json={"entries": [entry], "notices": ["s0"]}, headers=k.h("a"))
    assert r.status_code == 200, r.text
    p = c.get("/ui/api/peers", headers=k.h("a")).json()["peers"]
    assert p == [
        {
            "peer": "alice",
            "messages": 1,
            "entries": 1,
            "wire_bytes": len(SQL_A.encode()),
            "notices": 1,
            "resident": 0,
            "probation": 0,
            "refused": 0,
            # no outcome yet: a new peer's Beta(1, 1) posterior, weighed by its lower bound
            "reputation": {
                "weight": pytest.approx(0.1),
                "mean": 0.5,
                "lcb": pytest.approx(0.1),
                "outcomes": 0,
                "quarantined": None,
            },
        }
    ]
    assert c.get("/ui/api/peers", headers=k.h("b")).json()["peers"] == []  # another group


def test_page_static_files_and_docs_stay_on_this_server(env: Any) -> None:
    c, _ = env
    page = c.get("/ui")
    assert (
        page.status_code == 200 and "default-src 'self'" in page.headers["content-security-policy"]
    )
    assert c.get("/ui/").status_code == 200
    for f in ("app.js", "app.css", "favicon.svg"):
        r = c.get(f"/ui/static/{f}")
        text = r.text.replace("http://www.w3.org/2000/svg", "")  # a name, never fetched
        assert r.status_code == 200 and "http://" not in text and "https://" not in text
    assert "innerHTML" not in c.get("/ui/static/app.js").text  # server text is put in as text
    assert "http" not in page.text.replace("http-equiv", "")
    docs = c.get("/docs")
    assert docs.status_code == 200 and "/ui/swagger/swagger-ui-bundle.js" in docs.text
    assert "cdn" not in docs.text.lower() and "https://" not in docs.text
    assert c.get("/ui/swagger/swagger-ui-bundle.js").status_code == 200
    assert c.get("/ui/swagger/swagger-ui.css").status_code == 200
    assert c.get("/redoc").status_code == 404
    assert c.get("/ui/static/nope.js").status_code == 404


@pytest.mark.parametrize("window", [1, 3, 512])
def test_newest_first_reads_the_whole_log_back_in_windows(tmp_path: Path, window: int) -> None:
    from memcurator import Memory
    from memcurator.service.inspector.views import newest_first

    path = str(tmp_path / "w.db")
    with (
        Memory(path, namespace="x", vector_dtype="float32", max_bytes=5000) as x,
        Memory(path, namespace="y") as y,
    ):
        for i, t in enumerate(_texts(9)):
            (x if i % 3 else y).write(t)  # the two namespaces interleave in the store's seqs
        want = [d.seq for d in reversed(x.decisions())]
        assert len(want) > 6 and any(d.action == "evict" for d in x.decisions())
        assert [d.seq for d in newest_first(x, window=window)] == want
        assert [d.seq for d in newest_first(x, before=want[2], window=window)] == want[3:]
        assert [d.seq for d in newest_first(y, window=window)] == [
            d.seq for d in reversed(y.decisions())
        ]


def test_the_page_routes_stay_out_of_the_api_contract(env: Any) -> None:
    c, _ = env
    paths = c.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]
    assert "/v1/write" in paths


def _state(c: TestClient, k: Any, who: str) -> Any:
    """What a read must leave as it was: the namespace, its log and its entries."""
    ns = c.get(f"/v1/namespaces/{'a' if who.startswith('a') else 'b'}", headers=k.h(who)).json()
    log = c.get("/v1/decisions", headers=k.h(who)).json()
    ents = c.get("/v1/entries", headers=k.h(who)).json()
    return ns, log, ents


def test_recall_playground_shows_the_top_k_texts_without_a_read_time_curator(env: Any) -> None:
    c, k = env
    texts = _texts(6)
    for t in texts:
        _w(c, k, "a", t)
    _w(c, k, "a_ext", SQL_B)  # on probation: never injected
    before = _state(c, k, "a")
    body = {"query": "count the rows of table t4 where col1 is set", "k": 2}
    r = c.post("/ui/api/recall", json=body, headers=k.h("a_read")).json()
    inj = r["inject"]
    assert inj["curator"] is None and inj["note"].startswith("this policy injects the top-k")
    ids = [x["id"] for x in r["candidates"]]
    assert inj["source_ids"] == ids and len(ids) == 2
    by_id = {x["id"]: x["preview"] for x in r["candidates"]}  # short texts: the whole text
    assert inj["payload"] == "\n\n".join(by_id[i] for i in ids)
    assert texts[4] in inj["payload"] and SQL_B not in inj["payload"]
    assert _state(c, k, "a") == before


@pytest.mark.parametrize(
    ("policy", "operator", "fell_back"),
    [("curator/align", "align", False), ("jitmem/untrained", "llm-brief", True)],
)
def test_recall_playground_shows_the_read_time_curators_payload_and_changes_nothing(
    tmp_path: Path, policy: str, operator: str, fell_back: bool
) -> None:
    from memcurator.service.app import create_app

    k = make_keys()
    k.table.configure("b", policy=policy)
    app = create_app(str(tmp_path / "s.db"), keys=k.table)
    try:
        with TestClient(app) as c:
            for t in _texts(6):
                _w(c, k, "b", t)
            cur = app.state.pool.tenant("b").memory.policy.curator
            seen, pending = cur._seen, cur._pending
            before = _state(c, k, "b")
            q = "count the rows of table t9 where col0 is set"
            r = c.post("/ui/api/recall", json={"query": q, "k": 2}, headers=k.h("b")).json()
            inj = r["inject"]
            assert inj["curator"] == "JitMemCurator" and inj["operator"] == operator
            assert inj["payload"].startswith(f"Task: {q}\nAction: SELECT COUNT(*) FROM t")
            assert inj["source_ids"] and inj["raw_chars"] > 0
            # no model runs in the inspector: an LLM operator's call fails and falls back
            assert any("fell back to align" in n for n in inj["notes"]) is fell_back
            assert _state(c, k, "b") == before
            assert (cur._seen, cur._pending) == (seen, pending)  # the curator's state as well
            bad = c.post("/ui/api/recall", json={"query": q, "domain": "nope"}, headers=k.h("b"))
            assert bad.status_code == 422 and "nope" in bad.text
            assert _state(c, k, "b") == before
    finally:
        app.state.pool.close()


def _fb(c: TestClient, k: Any, ids: list[str], reward: float) -> None:
    r = c.post("/v1/feedback", json={"used": ids, "reward": reward}, headers=k.h("a"))
    assert r.status_code == 204, r.text


def test_entry_page_shows_the_feedback_it_got(env: Any) -> None:
    c, k = env
    texts = _texts(3)
    good, bad = (_w(c, k, "a", t)["id"] for t in texts[:2])
    held = _w(c, k, "a_ext", texts[2])["id"]
    for r in (1.0, 0.0, 1.0):
        _fb(c, k, [good], r)
    for _ in range(4):  # the curator policy's feedback quarantine: 0/4 successes evicts
        _fb(c, k, [bad], 0.0)
    with c.app.state.pool.using(k.table.authenticate(k.tokens["a"])) as t:  # type: ignore[attr-defined]
        assert t.memory.trial_outcome(held, True, "the query ran and matched the checker")

    def fb(i: str) -> dict[str, Any]:
        r = c.get(f"/ui/api/entries/{i}", headers=k.h("a_read"))
        assert r.status_code == 200, r.text
        return dict(r.json()["feedback"])

    g = fb(good)
    assert g["counts"] == {"uses": 3, "successes": 2, "failures": 1, "last_used_step": 0}
    assert g["logged"] == [] and "keeps no row per feedback call" in g["note"]
    b = fb(bad)
    assert "counts" not in b  # evicted: its counts went with it, its rows did not
    assert [x["action"] for x in b["logged"]] == ["evict"]
    assert "feedback quarantine: 0/4 successes" in b["logged"][0]["reason"]
    h = fb(held)
    assert h["counts"]["uses"] == 1 and h["counts"]["successes"] == 1
    assert [(x["action"], x["reward"]) for x in h["logged"]] == [
        ("trial", 1.0),
        ("corroborate", 1.0),
    ]
    log = c.get("/v1/decisions", headers=k.h("a")).json()["decisions"]
    steps = {d["seq"]: d["step"] for d in log}
    assert all(x["step"] == steps[x["seq"]] for x in b["logged"] + h["logged"])


@pytest.mark.parametrize(("reward", "quarantined"), [(0.0, True), (1.0, False)])
def test_peers_show_each_peers_reputation_from_its_entries_outcomes(
    env: Any, reward: float, quarantined: bool
) -> None:
    from memcurator.policy.share import SharedEntry

    c, k = env
    shared = [SharedEntry(t, "insight", 0, 0.5, 1.0, 0.0, f"s{i}") for i, t in enumerate(_texts(5))]
    with c.app.state.pool.using(k.table.authenticate(k.tokens["a"])) as t:
        got = t.memory.receive(shared, "mallory")
    ids = [w.id for w in got if w.admitted]
    assert len(ids) == 5
    _fb(c, k, ids, reward)  # one outcome per entry used: five outcomes of mallory's
    after = c.get("/ui/api/peers", headers=k.h("a")).json()
    m = {p["peer"]: p for p in after["peers"]}["mallory"]
    assert m["messages"] == 0  # not through this hub: known here by its outcomes
    assert after == c.get("/ui/api/peers", headers=k.h("a")).json()  # reading changes nothing
    rep = {p["peer"]: p for p in after["peers"]}["mallory"]["reputation"]
    assert rep["outcomes"] == 5 and rep["mean"] == pytest.approx((1 + 5 * reward) / 7)
    assert (rep["quarantined"] is not None) is quarantined
    assert rep["weight"] == 0.0 if quarantined else rep["weight"] > 0.1
    assert "Beta posterior" in after["reputation_note"]


def test_peers_say_when_the_policy_keeps_no_reputation(tmp_path: Path) -> None:
    from memcurator.service.app import create_app

    k = make_keys()
    k.table.configure("a", policy="lru")
    app = create_app(str(tmp_path / "s.db"), keys=k.table)
    try:
        with TestClient(app) as c:
            push = {"entries": [{"text": SQL_A, "kind": "insight", "bytes": 100, "q": 0.5,
                                 "a": 1.0, "rho_s": 0.1, "source_id": "s1"}]}  # fmt: skip
            assert c.post("/v1/hub/push", json=push, headers=k.h("a")).status_code == 200
            p = c.get("/ui/api/peers", headers=k.h("a")).json()
            assert [(x["peer"], x["reputation"]) for x in p["peers"]] == [("alice", None)]
            assert p["reputation_note"] == "policy 'lru' keeps no peer reputation"
    finally:
        app.state.pool.close()


def test_decision_timeline_filters_by_peer() -> None:
    """The timeline's peer filter: a resident peer entry's rows by its sender, other rows by
    the peer their reason names; an unknown peer matches nothing."""
    from memcurator import Memory
    from memcurator.service.inspector import views
    from memcurator.service.inspector.queries import DecisionFilter
    from memcurator.types import Decision

    def by(peer: str) -> list[dict[str, Any]]:
        return views.decisions_page(m, DecisionFilter(peer=peer))["decisions"]

    m = Memory(":memory:", namespace="n", policy="keep-all")
    try:
        bob = [
            m.write(
                f"Task: count rows in t{i}\nAction: SELECT COUNT(*) FROM t{i};",
                origin="peer",
                origin_detail="bob",
            ).id
            for i in range(2)
        ]
        carol = m.write(
            "Task: sum totals in t9\nAction: SELECT SUM(total) FROM t9;",
            origin="peer",
            origin_detail="carol",
        ).id
        own = m.write("Task: list rows of t5\nAction: SELECT * FROM t5;").id
        assert sorted(d["entry_id"] for d in by("bob")) == sorted(bob)
        assert [d["entry_id"] for d in by("carol")] == [carol]
        assert by("dave") == []
        assert own in {d["entry_id"] for d in views.decisions_page(m)["decisions"]}
        # a row whose entry is not resident (refused, gone) is matched by the peer it names
        test = views._peer_test(m, "mallory")
        assert test is not None
        gone = Decision(1, "n", 0, "reject", "x", 0.0, "refused: peer mallory, risk 0.9", "p", 0, 0)
        other = Decision(2, "n", 0, "reject", "y", 0.0, "refused: peer bob, risk 0.9", "p", 0, 0)
        assert test(gone) and not test(other)
    finally:
        m.close()
