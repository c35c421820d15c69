"""Several ``memcurator serve`` replicas on one store behind a real load balancer (haproxy).

Their shared state (keys, the hub's queue, rate buckets, recall ids) is the store's backend
(:mod:`memcurator.service.state`): PostgreSQL for three replicas on one database, SQLite for
two on one file. Each check goes through one replica and looks through another (their own
ports), or through the balancer; a ``kill -9`` of one replica mid-stream must lose nothing
acknowledged while the clients carry on through the others. Counts and times are bounded.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from memcurator.service.balancer import HAPROXY, Replicas  # noqa: E402
from memcurator.service.keys import KeyTable  # noqa: E402
from memcurator.service.state.schema import STATE_VERSION  # noqa: E402
from memcurator.trust.auth import OWNER  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which(HAPROXY) is None and not Path(HAPROXY).exists(),
    reason="haproxy is not installed (apt-get install haproxy)",
)

#: answers a balancer gives while a replica is going away (the client tries again)
RETRY = (502, 503, 504)


def _h(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


def _call(method: str, url: str, tok: str, deadline_s: float = 30.0, **kw: Any) -> Any:
    """One request, retried on a refused connection or a balancer's 502/503/504 (never on an
    answer of the service itself) until ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            r = httpx.request(method, url, headers=_h(tok), timeout=30.0, **kw)
            if r.status_code not in RETRY:
                return r
        except httpx.TransportError:
            pass
        assert time.monotonic() < end, f"{method} {url} got no answer within {deadline_s} s"
        time.sleep(0.05)


def _keys(table: KeyTable, max_bytes: int = 200_000) -> dict[str, str]:
    tok: dict[str, str] = {}
    _, tok["owner"] = table.create("team", name="owner", scopes=("read", "write", "admin"))
    _, tok["p1"] = table.create("team", name="p1", scopes=("read", "peer"), origin="peer")
    _, tok["p2"] = table.create("team", name="p2", scopes=("read", "peer"), origin="peer")
    _, tok["slow"] = table.create("team", name="slow", scopes=("read",), rate_per_min=3.0)
    table.configure("team", policy="lru", max_bytes=max_bytes)
    return tok


def _cross_replica_checks(reps: Replicas, table: KeyTable, tok: dict[str, str]) -> None:
    urls = [s.url for s in reps.servers]
    # a key made once works through every replica, and so does one made while they run
    _, late = table.create("team", name="late", scopes=("read",))
    for u in urls:
        for t in (tok["owner"], late):
            assert _call("GET", f"{u}/v1/namespaces/team", t).status_code == 200
    # a revocation reaches every replica at once
    info = next(k for k in table.list("team") if k.name == "late")
    table.revoke(info.key_id, "test")
    for u in urls:
        assert _call("GET", f"{u}/v1/namespaces/team", late).status_code == 401
    # a write acknowledged by one replica is read and recalled through each other one
    for i, a in enumerate(urls):
        text = f"Task: replica check {i}\nAction: the answer written through replica {i}"
        w = _call("POST", f"{a}/v1/write", tok["owner"], json={"text": text})
        assert w.status_code == 200 and w.json()["admitted"], w.text
        for b in urls:
            got = _call("GET", f"{b}/v1/entries/{w.json()['id']}", tok["owner"])
            assert got.status_code == 200 and got.json()["text"] == text
            rec = _call("POST", f"{b}/v1/recall", tok["owner"], json={"query": text, "k": 1})
            assert rec.json()["ids"] == [w.json()["id"]]
    # a recall id made by one replica takes feedback through another; unknown ids stay 404
    rec = _call("POST", f"{urls[0]}/v1/recall", tok["owner"], json={"query": "answer", "k": 2})
    rid = rec.json()["recall_id"]
    fb = _call(
        "POST", f"{urls[-1]}/v1/feedback", tok["owner"], json={"recall_id": rid, "reward": 1.0}
    )
    assert fb.status_code == 204, fb.text
    bad = _call(
        "POST", f"{urls[-1]}/v1/feedback", tok["owner"], json={"recall_id": "0" * 32, "reward": 1.0}
    )
    assert bad.status_code == 404
    # a hub message pushed through one replica is pulled through another (and only there)
    entry = {
        "text": "Task: shared\nAction: from p1",
        "kind": "experience",
        "bytes": 30,
        "q": 0.5,
        "a": 1.0,
        "rho_s": 0.01,
        "source_id": "p1-e1",
    }
    seqs = []
    for i, a in enumerate(urls):
        p = _call("POST", f"{a}/v1/hub/push", tok["p1"], json={"round": i, "entries": [entry]})
        assert p.status_code == 200, p.text
        seqs.append(p.json()["seq"])
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # one sequence, not one each
    for b in urls:
        pulled = _call("GET", f"{b}/v1/hub/pull", tok["p2"], params={"since": 0}).json()
        assert [m["seq"] for m in pulled["messages"]] == seqs
        assert [m["round"] for m in pulled["messages"]] == list(range(len(urls)))
        assert _call("GET", f"{b}/v1/hub/pull", tok["p1"]).json()["messages"] == []
    # the hub keeps each peer's cursor: a pull without ``since`` goes on where that peer's last
    # pull ended, whichever replica served it; an explicit ``since`` still reads from there
    more = []
    for i, a in enumerate(urls):
        p = _call("POST", f"{a}/v1/hub/push", tok["p1"], json={"round": 10 + i, "entries": [entry]})
        more.append(p.json()["seq"])
        b = urls[(i + 1) % len(urls)]
        got = _call("GET", f"{b}/v1/hub/pull", tok["p2"]).json()
        assert [m["seq"] for m in got["messages"]] == [more[-1]], got
        assert got["next_since"] == more[-1]
        again = _call("GET", f"{urls[i]}/v1/hub/pull", tok["p2"]).json()
        assert again["messages"] == [] and again["next_since"] == more[-1]
    old = _call("GET", f"{urls[0]}/v1/hub/pull", tok["p2"], params={"since": seqs[-1]}).json()
    assert [m["seq"] for m in old["messages"]] == more
    # every replica signed its writes with the one owner key of the shared ring
    with table.state.tx(write=False) as tx:
        assert [p for (p,) in tx.q("SELECT principal FROM svc_ring_keys")] == [OWNER]
    # the rate limit counts across replicas: 3 a minute in all, not 3 per replica
    t0 = time.monotonic()
    codes = [
        _call("GET", f"{urls[i % len(urls)]}/v1/namespaces/team", tok["slow"]).status_code
        for i in range(3 * len(urls))
    ]
    refill = int((time.monotonic() - t0) * 3.0 / 60.0)
    assert set(codes) <= {200, 429}
    assert 3 <= codes.count(200) <= 3 + refill, codes


def _writer(url: str, tok: str, w: int, n: int, acked: list[str], errors: list[str]) -> None:
    for i in range(n):
        text = f"Task: stream {w}-{i}\nAction: written by client {w}, item {i}"
        r = _call("POST", f"{url}/v1/write", tok, deadline_s=60.0, json={"text": text})
        if r.status_code == 200:
            acked.append(r.json()["id"])
        elif r.status_code != 409:  # a retried write that had landed: a duplicate
            errors.append(f"{r.status_code} {r.text[:200]}")


def _kill_one_mid_stream(reps: Replicas, tok: str, clients: int = 4, n: int = 40) -> None:
    acked: list[str] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=_writer, args=(reps.url, tok, w, n, acked, errors))
        for w in range(clients)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while len(acked) < clients * n // 3:
        assert time.monotonic() < deadline, "the clients made no progress"
        time.sleep(0.02)
    victim = reps.servers[-1]
    victim.kill()  # SIGKILL: nothing of the process runs on
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    assert errors == [], errors[:5]
    assert len(acked) >= clients * n * 0.9  # only retried writes that had landed are missing
    live = [s for s in reps.servers if s.alive]
    for i, eid in enumerate(acked):  # every acknowledged write, through the others
        for s in (live[i % len(live)],):
            got = _call("GET", f"{s.url}/v1/entries/{eid}", tok)
            assert got.status_code == 200, (eid, got.text)
    for s in reps.servers:
        assert "Traceback" not in s.log(10**7), s.log()


def test_three_replicas_on_postgresql_behind_haproxy(pg_url: str, tmp_path: Path) -> None:
    table = KeyTable.for_store(pg_url)
    tok = _keys(table, max_bytes=2_000_000)  # room for every write: none is evicted
    with Replicas(pg_url, 3, folder=tmp_path) as reps:
        _cross_replica_checks(reps, table, tok)
        # a message pushed through the replica about to die is pulled after it died
        last = reps.servers[-1].url
        p = _call("POST", f"{last}/v1/hub/push", tok["p2"], json={"round": 9, "notices": ["gone"]})
        assert p.status_code == 200
        _kill_one_mid_stream(reps, tok["owner"], clients=3, n=20)
        got = _call("GET", f"{reps.url}/v1/hub/pull", tok["p1"], params={"since": 0}).json()
        assert [m["seq"] for m in got["messages"]] == [p.json()["seq"]]
        assert got["messages"][0]["notices"] == ["gone"]
        # the budget held through it all
        ns = _call("GET", f"{reps.url}/v1/namespaces/team", tok["owner"]).json()
        assert ns["used_bytes"] <= ns["max_bytes"] == 2_000_000
    table.close()


def test_two_replicas_on_one_sqlite_file(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    table = KeyTable.for_store(store)
    tok = _keys(table)
    with Replicas(store, 2, folder=tmp_path) as reps:
        _cross_replica_checks(reps, table, tok)
        _kill_one_mid_stream(reps, tok["owner"], clients=2, n=25)
    table.close()


def test_an_old_key_file_is_imported_into_postgresql_and_upgraded_in_sqlite(
    pg_url: str, tmp_path: Path
) -> None:
    # a key file as memcurator wrote it before the shared state (two tables, no version)
    old = tmp_path / "old.keys"
    legacy = KeyTable(":memory:")
    live, live_tok = legacy.create("ns", name="alive", scopes=("read",), rate_per_min=5.0)
    gone, gone_tok = legacy.create("ns", name="gone", scopes=("read",))
    legacy.revoke(gone.key_id, "left")
    legacy.configure("ns", policy="lru", max_bytes=12345)
    rows = legacy.state.tx
    with rows() as tx:
        keys = tx.q("SELECT * FROM api_keys")
        spaces = tx.q("SELECT * FROM tenant_namespaces")
    c = sqlite3.connect(old)
    c.executescript(
        "CREATE TABLE api_keys (key_id TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, "
        "namespace TEXT NOT NULL, name TEXT NOT NULL, origin TEXT NOT NULL, scopes TEXT NOT NULL, "
        "rate_per_min REAL, created_at REAL NOT NULL, revoked_at REAL, revoked_reason TEXT);"
        "CREATE TABLE tenant_namespaces (name TEXT PRIMARY KEY, policy TEXT, max_bytes INTEGER);"
    )
    c.executemany("INSERT INTO api_keys VALUES (?,?,?,?,?,?,?,?,?,?)", keys)
    c.executemany("INSERT INTO tenant_namespaces VALUES (?,?,?)", spaces)
    c.commit()
    c.close()
    before = old.read_bytes()
    for store, keys_path in ((pg_url, old), (pg_url, old), (str(tmp_path / "s.db"), None)):
        if keys_path is None:  # SQLite: the old file is the store's key file, upgraded in place
            shutil.copy(old, store + ".keys")
        t = KeyTable.for_store(store, keys_path)
        assert t.state.version() == STATE_VERSION
        assert t.authenticate(live_tok).rate_per_min == 5.0
        with pytest.raises(Exception, match="invalid or revoked"):
            t.authenticate(gone_tok)
        assert [k.key_id for k in t.list()] == [live.key_id, gone.key_id]  # imported once
        cfg = t.namespace_config("ns")
        assert (cfg.policy, cfg.max_bytes) == ("lru", 12345)
        t.close()
    assert old.read_bytes() == before  # an import reads the file, never changes it
