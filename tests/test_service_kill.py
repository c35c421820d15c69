"""``kill -9`` of ``memcurator serve`` during writes (issue 21): on restart nothing acknowledged
is lost.

A real server (:class:`memcurator.service.launch.ServeProcess`, uvicorn on 127.0.0.1) serves one
namespace while three client processes write and forget without pause, each recording every
answer it got. The test SIGKILLs the server at three kinds of moment (a few writes in; in the
middle of the stream after a random delay; a fraction of a second after a restart, while the
tenant is being opened) and restarts it on the same store each time. Then:

- every acknowledged write is resident with the text that was sent, or (with a budget) its
  eviction or forget is in the decision log; with no budget, every acknowledged write that no
  forget named is resident;
- every acknowledged forget is gone, with its forget logged;
- nothing half-written: the replayed decision log equals the resident entries (ids and bytes),
  every admission in the log is resident or later evicted/forgotten, each eviction or forget is
  logged once, and every resident entry holds exactly the text its writer made;
- while the server was down, each failed call raised :class:`~memcurator.errors.StoreError`
  ("unreachable") within seconds, never a hang, a 5xx or a raw transport error.

Runs on SQLite, with and without a budget, and on PostgreSQL (the ``pg_url`` fixture; under
``CI=true`` it fails when no PostgreSQL can be had).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from memcurator.client import Client  # noqa: E402
from memcurator.service.keys import KeyTable  # noqa: E402
from memcurator.service.launch import ServeProcess  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 3
#: a client's timeout (s); an error slower than a tenth of it would be a hang
CLIENT_TIMEOUT_S = 30.0

WRITER = r"""
import json, os, random, sys, time
from memcurator.client import Client
from memcurator.errors import EntryNotFound, MemcuratorError

url, key, wid, out_path, stop_path, timeout = sys.argv[1:7]
wid, timeout = int(wid), float(timeout)
rng = random.Random(wid)
c = Client(url, key=key, timeout=timeout)
mine = []
i = 0
with open(out_path, "a") as fh:
    while not os.path.exists(stop_path):
        i += 1
        op = "forget" if mine and rng.random() < 0.15 else "write"
        t0 = time.monotonic()
        try:
            if op == "forget":
                eid = mine.pop(rng.randrange(len(mine)))
                try:
                    c.forget(eid, reason=f"client {wid}")
                    rec = {"forgot": eid}
                except EntryNotFound:  # evicted first (budget), or forgotten by a lost answer
                    rec = {"gone": eid}
            else:
                text = (f"Task: client {wid} write {i} counts rows of t{wid}_{i}\n"
                        f"Action: SELECT COUNT(*) FROM t{wid}_{i};")
                r = c.write(text, meta={"client": wid, "i": i})
                rec = {"ack": r["id"], "text": text, "admitted": r["admitted"]}
                if r["admitted"]:
                    mine.append(r["id"])
        except MemcuratorError as e:
            rec = {"err": type(e).__name__, "msg": str(e)[:300], "s": time.monotonic() - t0,
                   "op": op}
            time.sleep(0.05)
        except Exception as e:  # anything else is a failure of the client's error mapping
            rec = {"err": type(e).__name__, "msg": repr(e)[:300], "s": time.monotonic() - t0,
                   "op": op, "raw": True}
            time.sleep(0.05)
        fh.write(json.dumps(rec) + "\n")
        fh.flush()
"""


def _text(meta: dict[str, Any]) -> str:
    w, i = meta["client"], meta["i"]
    return (
        f"Task: client {w} write {i} counts rows of t{w}_{i}\n"
        f"Action: SELECT COUNT(*) FROM t{w}_{i};"
    )


def _records(paths: list[Path]) -> list[list[dict[str, Any]]]:
    out = []
    for p in paths:
        lines = p.read_text().splitlines() if p.exists() else []
        out.append([json.loads(x) for x in lines if x.strip()])
    return out


def _acks(paths: list[Path]) -> int:
    return sum(1 for rs in _records(paths) for r in rs if "ack" in r)


def _wait_acks(paths: list[Path], n: int, srv: ServeProcess, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while _acks(paths) < n:
        assert srv.alive, f"the server died on its own: {srv.log()}"
        assert time.monotonic() < deadline, f"the clients did not reach {n} acknowledged writes"
        time.sleep(0.02)


def _run(store: str, tmp_path: Path, max_bytes: int | None, seed: int) -> None:
    rng = random.Random(seed)
    keys = str(tmp_path / "store.keys")
    t = KeyTable(keys)
    _, token = t.create("k", name="writer", scopes=("read", "write", "admin"))
    t.configure("k", policy="lru", max_bytes=max_bytes)
    t.close()
    srv = ServeProcess(store, keys=keys, log_path=str(tmp_path / "serve.log"))
    stop = tmp_path / "stop"
    outs = [tmp_path / f"client{w}.jsonl" for w in range(CLIENTS)]
    procs: list[subprocess.Popen[str]] = []
    srv.start()
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, srv.url, token, str(w), str(outs[w]), str(stop)]
                + [str(CLIENT_TIMEOUT_S)],
                cwd=ROOT,
                stderr=subprocess.PIPE,
                text=True,
            )
            for w in range(CLIENTS)
        ]
        # kill 1: a few writes in
        _wait_acks(outs, 5, srv)
        srv.kill()
        time.sleep(0.5)  # down: the clients keep calling
        srv.start()
        # kill 2: mid-stream, after a random delay
        _wait_acks(outs, _acks(outs) + 30, srv)
        time.sleep(rng.uniform(0.0, 0.3))
        srv.kill()
        time.sleep(0.5)
        srv.start()
        # kill 3: right after the restart answered, while the tenant is being (re)opened
        time.sleep(rng.uniform(0.0, 0.15))
        srv.kill()
        time.sleep(0.5)
        srv.start()
        _wait_acks(outs, _acks(outs) + 30, srv)
        stop.touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
        recs = _records(outs)
        with Client(srv.url, key=token) as c:
            resident = {e["id"]: e for e in c.entries()}
            log = c.decisions()
            ns = c.namespace()
    finally:
        stop.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        srv.stop()
    assert srv.starts == 4

    # what the clients were told
    acked = {r["ack"]: r["text"] for rs in recs for r in rs if "ack" in r and r["admitted"]}
    forgot = {r["forgot"] for rs in recs for r in rs if "forgot" in r}
    errs = [r for rs in recs for r in rs if "err" in r]
    assert len(acked) >= 65
    # while down: a clear error, fast, from every client
    assert all(sum("err" in r for r in rs) > 0 for rs in recs), "a client never saw the outage"
    bad = [e for e in errs if e["err"] != "StoreError" or "unreachable" not in e["msg"]]
    assert bad == [], bad[:5]
    assert max(e["s"] for e in errs) < CLIENT_TIMEOUT_S / 10, "an error took as long as a hang"

    # the log replayed equals the store; every eviction/forget logged once, of a resident entry
    replay: dict[str, int] = {}
    gone: Counter[str] = Counter()
    forgotten_logged: set[str] = set()
    for d in log:
        if d["action"] == "admit":
            assert d["entry_id"] not in replay, d
            replay[d["entry_id"]] = d["bytes"]
        elif d["action"] in ("evict", "forget") and d["entry_id"]:
            assert d["entry_id"] in replay, f"{d['action']} of an entry never admitted: {d}"
            del replay[d["entry_id"]]
            gone[d["entry_id"]] += 1
            if d["action"] == "forget":
                forgotten_logged.add(d["entry_id"])
    assert {k: e["bytes"] for k, e in resident.items()} == replay  # no admission left dangling
    assert not gone or max(gone.values()) == 1
    assert ns["used_bytes"] == sum(e["bytes"] for e in resident.values())
    if max_bytes is not None:
        assert ns["used_bytes"] <= max_bytes
        assert any(d["action"] == "evict" for d in log), "the budget never bound"
    else:
        assert not any(d["action"] == "evict" for d in log)
    # nothing acknowledged lost
    for eid, text in acked.items():
        if eid in resident:
            assert resident[eid]["text"] == text
        else:
            assert eid in gone, f"acknowledged write {eid} lost (not resident, not logged gone)"
    if max_bytes is None:
        assert set(acked) - forgotten_logged <= set(resident)
    assert forgot <= forgotten_logged and not forgot & set(resident)
    # nothing half-written: each resident entry holds the very text its writer made
    for e in resident.values():
        assert e["text"] == _text(e["meta"]), e
    assert "Traceback" not in srv.log(10**7)


@pytest.mark.parametrize("max_bytes", [None, 6_000], ids=["unbounded", "budget"])
def test_sigkill_sqlite_loses_nothing_acknowledged(tmp_path: Path, max_bytes: int | None) -> None:
    _run(str(tmp_path / "store.db"), tmp_path, max_bytes, seed=1 if max_bytes is None else 2)


def test_sigkill_postgres_loses_nothing_acknowledged(tmp_path: Path, pg_url: str) -> None:
    _run(pg_url, tmp_path, 6_000, seed=3)  # binds at the default (binary) precision


def test_a_request_to_a_dead_server_fails_fast(tmp_path: Path) -> None:
    """No server on the port at all: a clear StoreError at once, not a wait for the timeout."""
    from memcurator.errors import StoreError
    from memcurator.service.launch import free_port

    t0 = time.monotonic()
    with (
        Client(f"http://127.0.0.1:{free_port()}", key="mck_x", timeout=CLIENT_TIMEOUT_S) as c,
        pytest.raises(StoreError, match="unreachable"),
    ):
        c.write("Task: t\nAction: a")
    assert time.monotonic() - t0 < 5
