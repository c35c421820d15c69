"""``memcurator serve`` as a real server: uvicorn on 127.0.0.1 in a subprocess, reached with
:class:`memcurator.client.Client`; and several client processes at once on one namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _proc_util import free_port, stop  # noqa: E402

from memcurator.client import Client  # noqa: E402
from memcurator.errors import EntryNotFound, Forbidden, Unauthorized  # noqa: E402
from memcurator.service.keys import KeyTable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 30_000  # bytes: about 14 resident entries of ~2.1 kB, so the writes below evict


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("serve")
    store = str(d / "store.db")
    keys = KeyTable(store + ".keys")
    _, admin = keys.create("team", name="agent", scopes=("read", "write", "admin"))
    _, other = keys.create("other", name="intruder", scopes=("read", "write", "admin"))
    keys.configure("team", max_bytes=BUDGET)
    keys.close()
    port = free_port()
    log = open(d / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memcurator.cli", "serve", store, "--port", str(port)]
        + ["--log-level", "warning"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                Client(url, key=admin, timeout=2).health()
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((d / "server.log").read_text()) from None
                time.sleep(0.2)
        yield {"url": url, "admin": admin, "other": other, "dir": d, "proc": proc}
    finally:
        stop(proc)
        log.close()


def test_the_client_speaks_to_a_real_server(server: dict[str, Any]) -> None:
    with (
        Client(server["url"], key=server["admin"]) as c,
        Client(server["url"], key=server["other"]) as o,
    ):
        w = c.write("Task: count rows in orders\nAction: SELECT COUNT(*) FROM orders;")
        assert w["admitted"] and w["origin"] == "self"
        r = c.recall("how many rows are in orders", k=1)
        assert r["ids"] == [w["id"]]
        c.feedback(r, 1.0)
        assert c.get(w["id"])["successes"] == 1
        assert c.max_bytes == BUDGET and 0 < c.used_bytes <= BUDGET
        # the library's errors come back as the same classes
        with pytest.raises(EntryNotFound):
            o.get(w["id"])
        with pytest.raises(EntryNotFound):
            o.forget(w["id"])
        with pytest.raises(Forbidden):
            o.write("Task: x\nAction: y", origin="peer")
        with pytest.raises(Unauthorized):
            Client(server["url"], key="mck_nope").recall("rows")
        assert "memcurator_used_bytes" in c.metrics()
        c.forget(w["id"], reason="test done")
        assert w["id"] not in {e["id"] for e in c.entries()}
        assert c.decisions(action="forget")[-1]["entry_id"] == w["id"]


WORKER = r"""
import json, random, sys
from memcurator.client import Client
from memcurator.errors import MemcuratorError
from memcurator.client import ServiceError

url, key, wid, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(wid)
c = Client(url, key=key, timeout=120)
out = {"admitted": [], "statuses": {}, "over_budget": [], "forgotten": [], "errors": []}
last = None
for i in range(n):
    op = rng.random()
    try:
        if op < 0.5:
            t = f"Task: worker {wid} job {i} on table t{wid}_{i}\nAction: SELECT {i} FROM x{i};"
            r = c.write(t, meta={"worker": wid, "i": i})
            if r["admitted"]:
                out["admitted"].append(r["id"])
            if r["max_bytes"] is not None and r["used_bytes"] > r["max_bytes"]:
                out["over_budget"].append(r["used_bytes"])
            kind = "write"
        elif op < 0.75:
            last = c.recall(f"job {rng.randrange(i + 1)} on table t{wid}", k=3)
            kind = "recall"
        elif op < 0.85 and last is not None and last["ids"]:
            c.feedback(last, rng.random())
            kind = "feedback"
        elif op < 0.95:
            c._call("GET", "/v1/entries", params={"limit": 5})
            kind = "entries"
        elif out["admitted"]:
            eid = rng.choice(out["admitted"])
            try:
                c.forget(eid, reason=f"worker {wid}")
                out["forgotten"].append(eid)
            except MemcuratorError as e:  # evicted or forgotten already
                if type(e).__name__ != "EntryNotFound":
                    raise
            kind = "forget"
        else:
            kind = "skip"
        out["statuses"][kind] = out["statuses"].get(kind, 0) + 1
    except ServiceError as e:
        out["errors"].append(str(e)[:300])
    except MemcuratorError as e:
        if type(e).__name__ == "EntryNotFound" and op < 0.85:
            out["statuses"]["feedback-gone"] = out["statuses"].get("feedback-gone", 0) + 1
        else:
            out["errors"].append(type(e).__name__ + ": " + str(e)[:300])
print(json.dumps(out))
"""


def test_concurrent_clients_lose_no_write_and_keep_the_budget(server: dict[str, Any]) -> None:
    """4 client processes x 100 mixed requests (writes, recalls, feedback, listings, forgets)
    on one namespace: no 5xx, every admitted entry is resident or its eviction/forget is
    logged (once), and no write ever saw the budget exceeded."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, server["url"], server["admin"], str(w), "100"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for w in range(4)
    ]
    outs = []
    for p in procs:
        so, se = p.communicate(timeout=300)
        assert p.returncode == 0, se[-2000:]
        outs.append(json.loads(so.strip().splitlines()[-1]))
    errors = [e for o in outs for e in o["errors"]]
    assert errors == []
    assert [b for o in outs for b in o["over_budget"]] == []
    admitted = [i for o in outs for i in o["admitted"]]
    assert len(admitted) == len(set(admitted)) and len(admitted) >= 50

    with Client(server["url"], key=server["admin"]) as c:
        resident = {e["id"]: e for e in c.entries()}
        log = c.decisions()
        ns = c.namespace()
    assert ns["used_bytes"] <= BUDGET and ns["used_bytes"] == sum(
        e["bytes"] for e in resident.values()
    )
    # the load was real: over 100 writes admitted (a write whose entry the same Keep pass
    # evicted on arrival reports admitted=False to its client, so the clients' count is lower
    # and depends on how the writes interleave; the log counts every admission)
    assert sum(1 for d in log if d["action"] == "admit") > 100
    gone = Counter(d["entry_id"] for d in log if d["action"] in ("evict", "forget"))
    assert max(gone.values()) == 1  # each eviction or forget logged exactly once
    assert sum(1 for d in log if d["action"] == "evict") > 0  # the budget did bind
    for eid in admitted:
        assert (eid in resident) != (eid in gone), eid  # resident, or gone with its reason
    assert {i for o in outs for i in o["forgotten"]} <= set(gone)
    assert (
        os.path.getsize(server["dir"] / "server.log") == 0
        or "Traceback" not in (server["dir"] / "server.log").read_text()
    )
