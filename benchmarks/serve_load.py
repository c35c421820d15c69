"""Load benchmark of ``memcurator serve`` on loopback, with the library in process as reference.

For each resident size N and client count C (issue 21's "load benchmark"):

- **fill**: a SQLite store's namespace is filled with N entries in bulk through the store
  (5,000-row transactions, embedded by the namespace's own embedder; no admission decisions
  are logged for them, which no timed operation reads);
- **library reference** (same run, same machine): one :class:`memcurator.Memory` in this
  process on a copy of the store, warmed by one untimed recall, times ``--ops`` writes then
  ``--ops`` recalls (k=3), one caller;
- **service**: ``memcurator serve`` (uvicorn, one process, 127.0.0.1) on another copy, its
  tenant warmed by one untimed recall, while C client processes
  (:class:`memcurator.client.Client`) each time ``--ops`` writes, then (all starting together)
  ``--ops`` recalls.

With ``--store postgres`` (issue 20's in-database recall): a throwaway local PostgreSQL
(:class:`memcurator.store.pglocal.LocalPostgres`), a new database per N filled by ``COPY`` (as
``benchmarks/recall_scale.py`` does), ANALYZE, and the namespace's HNSW index built by
:meth:`~memcurator.store.postgres.PostgresStore.ensure_hnsw`; the reference is
``Memory(url, recall_in_store=True)`` on that database and the service runs
``memcurator serve URL --recall-in-store`` (policy ``keep-all``, the default there: in-database
recall is for unbudgeted cosine-rank namespaces). The reference's writes stay in the database,
so each service run starts from N + ops entries (N + 2 ops for the second client count, ...).

It prints p50/p95/p99 latencies (ms) and requests/s (all clients together over the phase's wall
time) for both, and the service's p50 and p95 over the library's. At C > 1 the ratio also holds
the queueing of C callers on one namespace (the service runs one namespace's calls one at a
time; the reference is one caller), so read the C = 1 rows for the per-request overhead and
the C > 1 rows for what C agents sharing a namespace see. Client processes, the server and the
reference share the machine's cores. A benchmark, not a test: it reports numbers and asserts
nothing.

With ``--replicas R`` (issue 32, "one memory behind many replicas"): R ``memcurator serve``
replicas on one throwaway PostgreSQL database behind Debian's haproxy
(:class:`memcurator.service.balancer.Replicas`), and ``--clients`` client threads that each send
``--requests`` mixed requests through the balancer: write 40 %, recall 25 %, feedback on the
client's last recall id 10 %, hub push 12.5 %, hub pull 12.5 % (a namespace under ``lru`` with
a byte budget ``--max-bytes``, so eviction is in play). Once ``--kill-at`` of all requests are
done one replica gets ``kill -9``; the clients retry a refused connection or a balancer's
502/503/504 through the balancer (counted). It reports throughput and p50/p95/p99 per
operation, every status code, the budget at each 1 s sample and at the end, whether every
acknowledged write is still readable or was removed with a logged reason (evict, forget,
replace, distill), and how many hub messages were pulled through another replica than the one
they were pushed through (haproxy names the replica in an ``X-Replica`` header).

Usage::

    python benchmarks/serve_load.py --entries 10000,100000 --clients 1,8 --ops 200
    python benchmarks/serve_load.py --store postgres --entries 10000,100000 --clients 1,8 --ops 200
    python benchmarks/serve_load.py --replicas 3 --clients 16 --requests 2000   # the full size
    python benchmarks/serve_load.py --replicas 3 --clients 16 --requests 200    # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memcurator import Memory
from memcurator.retrieve.hybrid import recall_text
from memcurator.service.keys import KeyTable
from memcurator.service.launch import ServeProcess
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import SQLiteStore
from memcurator.types import Entry

ROOT = Path(__file__).resolve().parents[1]

CLIENT = r"""
import json, sys, time
from memcurator.client import Client
url, key, wid, ops = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = Client(url, key=key, timeout=300)
lat = {"write": [], "recall": []}
spans = {}
for phase in ("write", "recall"):
    print("ready", flush=True)
    sys.stdin.readline()  # every client starts a phase together
    t0 = time.perf_counter()
    for i in range(ops):
        t = time.perf_counter()
        if phase == "write":
            c.write(f"Task: load {wid} job {i} on table l{wid}_{i}\nAction: SELECT {i} FROM l{i};")
        else:
            c.recall(f"job {i} on table l{wid}_{i}", k=3)
        lat[phase].append(time.perf_counter() - t)
    spans[phase] = time.perf_counter() - t0
print(json.dumps({"lat": lat, "spans": spans}), flush=True)
"""


def _text(i: int) -> str:
    col = f"c{i % 31}"
    return f"Task: prefill {i} for table p{i % 997} column {col}\nAction: SELECT {col} FROM p{i};"


def _pcts(xs: list[float]) -> tuple[float, float, float]:
    a = np.asarray(xs) * 1000.0
    return tuple(float(np.percentile(a, q)) for q in (50, 95, 99))  # type: ignore[return-value]


def fill(store: str, n: int, policy: str) -> float:
    """Create namespace ``load`` (through :class:`Memory`, so it carries the memory's embedder
    identity) and insert ``n`` entries in bulk; returns the insert seconds."""
    with Memory(store, namespace="load", policy=policy, max_bytes=None) as m:
        emb = m.embedder
    s = SQLiteStore(store)
    t0 = time.perf_counter()
    for lo in range(0, n, 5000):
        with s.transaction(namespace="load"):
            for i in range(lo, min(lo + 5000, n)):
                text = _text(i)
                e = np.asarray(emb.embed(recall_text(text)), dtype=np.float32)
                b = default_sizeof(text, {}, e)
                s.insert(Entry(f"fill{i}", "load", "raw", text, b, b, e, "self", ""))
    s.close()
    return time.perf_counter() - t0


def fill_pg(base_url: str, n: int, policy: str) -> tuple[str, float, float]:
    """A new database ``serve_load_N`` on the server at ``base_url`` with namespace ``load``
    holding ``n`` entries, inserted by ``COPY``; ANALYZE; its HNSW index built. Returns
    (url, fill seconds, index build seconds)."""
    import psycopg

    from memcurator.store.pglocal import fresh_database
    from memcurator.store.postgres import PostgresStore

    url = fresh_database(base_url, f"serve_load_{n}", maintenance_work_mem="1GB")
    with Memory(url, namespace="load", policy=policy, max_bytes=None) as m:
        emb = m.embedder
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c, c.cursor() as cur:
        cols = "id, namespace, kind, text, bytes, raw_bytes, vec, origin, meta"
        with cur.copy(f"COPY entries ({cols}) FROM STDIN") as cp:
            for i in range(n):
                text = _text(i)
                e = np.asarray(emb.embed(recall_text(text)), dtype=np.float32)
                b = default_sizeof(text, {}, e)
                vec = "[" + ",".join(map(repr, e.tolist())) + "]"
                cp.write_row((f"fill{i}", "load", "raw", text, b, b, vec, "self", "{}"))
        c.execute("ANALYZE entries")
    fill_s = time.perf_counter() - t0
    s = PostgresStore(url)
    t0 = time.perf_counter()
    s.ensure_hnsw("load")
    hnsw_s = time.perf_counter() - t0
    s.close()
    return url, fill_s, hnsw_s


def run(
    n: int, clients: list[int], ops: int, policy: str, pg_base: str | None = None
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "load.db")
        extra: list[str] = []
        if pg_base is not None:
            store, fill_s, hnsw_s = fill_pg(pg_base, n, policy)
            print(
                f"# N={n:,}: COPY filled in {fill_s:.1f} s, HNSW built in {hnsw_s:.1f} s",
                flush=True,
            )
            ref, in_store, extra = store, {"recall_in_store": True}, ["--recall-in-store"]
        else:
            fill_s = fill(store, n, policy)
            print(f"# N={n:,}: filled in {fill_s:.1f} s", flush=True)
            # in-process reference on a copy of the store, so the service starts from N entries
            ref, in_store = os.path.join(d, "ref.db"), {}
            shutil.copy(store, ref)
        with Memory(ref, namespace="load", policy=policy, **in_store) as m:
            m.recall("warm up", k=3)  # untimed, as the service's warm-up below
            lw, lr = [], []
            t0 = time.perf_counter()
            for i in range(ops):
                t = time.perf_counter()
                m.write(f"Task: load 0 job {i} on table l0_{i}\nAction: SELECT {i} FROM l{i};")
                lw.append(time.perf_counter() - t)
            w_span = time.perf_counter() - t0
            t0 = time.perf_counter()
            for i in range(ops):
                t = time.perf_counter()
                m.recall(f"job {i} on table l0_{i}", k=3)
                lr.append(time.perf_counter() - t)
            r_span = time.perf_counter() - t0
        inproc = {
            "write": (*_pcts(lw), ops / w_span),
            "recall": (*_pcts(lr), ops / r_span),
        }
        for c in clients:
            if pg_base is not None:
                work, keys = store, os.path.join(d, f"c{c}.keys")
            else:
                work = os.path.join(d, f"c{c}.db")
                shutil.copy(store, work)
                keys = work + ".keys"
            table = KeyTable(keys)
            _, tok = table.create("load", name="load", scopes=("read", "write"))
            table.configure("load", policy=policy)
            table.close()
            srv = ServeProcess(
                work, keys=keys, log_path=os.path.join(d, f"serve{c}.log"), args=extra
            )
            srv.start()
            try:
                from memcurator.client import Client

                with Client(srv.url, key=tok, timeout=600) as warm:
                    warm.recall("warm up", k=3)  # opens the tenant: N entries loaded, untimed
                ps = [
                    subprocess.Popen(
                        [sys.executable, "-c", CLIENT, srv.url, tok, str(w), str(ops)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                        cwd=ROOT,
                    )
                    for w in range(c)
                ]
                for _phase in ("write", "recall"):  # clients start each phase together
                    for p in ps:
                        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
                    for p in ps:
                        assert p.stdin is not None
                        p.stdin.write("go\n")
                        p.stdin.flush()
                outs = [
                    json.loads(p.communicate(timeout=3600)[0].strip().splitlines()[-1]) for p in ps
                ]
            finally:
                srv.stop(timeout_s=30)
            if "Traceback" in srv.log(10**8):
                print(f"# the server logged a traceback: {srv.log()}", flush=True)
            for phase in ("write", "recall"):
                lat = [x for o in outs for x in o["lat"][phase]]
                span = max(o["spans"][phase] for o in outs)
                p50, p95, p99 = _pcts(lat)
                lib = inproc[phase]
                rows.append(
                    {
                        "entries": n,
                        "clients": c,
                        "op": phase,
                        "p50": p50,
                        "p95": p95,
                        "p99": p99,
                        "rps": len(lat) / span,
                        "lib_p50": lib[0],
                        "lib_p95": lib[1],
                        "lib_p99": lib[2],
                        "lib_rps": lib[3],
                        "fill_s": fill_s,
                    }
                )
    return rows


#: answers of a balancer while a replica goes away: the client sends again
_RETRY = (502, 503, 504)
#: decision-log actions that remove an entry with a logged reason
_REMOVALS = ("evict", "forget", "replace", "distill")


class _Load:
    """What the replica run's client threads record (under one lock)."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.lat: dict[str, list[float]] = {}
        self.codes: dict[int, int] = {}
        self.retries: dict[str, int] = {}  # what was sent again: "refused" or the code
        self.done = 0
        self.acked: list[str] = []
        self.pushed: dict[int, str] = {}  # seq -> the replica that acknowledged it
        self.pulled: dict[int, set[str]] = {}  # seq -> replicas it was pulled through


def _send(http, load: _Load, op: str, method: str, path: str, **kw):
    """One request through the balancer, sent again after a refused connection or a
    502/503/504 (a replica going away), for up to 120 s; its latency is the whole wait."""
    import httpx

    t0 = time.perf_counter()
    end = time.monotonic() + 120.0
    while True:
        try:
            r = http.request(method, path, **kw)
            if r.status_code not in _RETRY:
                break
            why = str(r.status_code)
        except httpx.TransportError as e:
            why = type(e).__name__
        with load.lock:
            load.retries[why] = load.retries.get(why, 0) + 1
        if time.monotonic() > end:
            raise RuntimeError(f"{op}: no answer through the balancer within 120 s")
        time.sleep(0.05)
    dt = time.perf_counter() - t0
    with load.lock:
        load.lat.setdefault(op, []).append(dt)
        load.codes[r.status_code] = load.codes.get(r.status_code, 0) + 1
        load.done += 1
    return r


def _client(url: str, tok: str, peer_tok: str, wid: int, n: int, load: _Load, seed: int) -> None:
    import random

    import httpx

    rng = random.Random(seed * 1000 + wid)
    rid = None
    since = 0
    own = {"Authorization": f"Bearer {tok}"}
    peer = {"Authorization": f"Bearer {peer_tok}"}
    with httpx.Client(base_url=url, timeout=300.0) as http:
        for i in range(n):
            x = rng.random()
            if x < 0.40:
                text = (
                    f"Task: load {wid} job {i} on table l{wid}_{i}\nAction: SELECT {i} FROM l{i};"
                )
                r = _send(
                    http, load, "write", "POST", "/v1/write", headers=own, json={"text": text}
                )
                if r.status_code == 200 and r.json()["admitted"]:
                    with load.lock:
                        load.acked.append(r.json()["id"])
            elif x < 0.65:
                q = f"job {rng.randrange(max(1, i))} on table l{rng.randrange(16)}"
                r = _send(
                    http,
                    load,
                    "recall",
                    "POST",
                    "/v1/recall",
                    headers=own,
                    json={"query": q, "k": 3},
                )
                if r.status_code == 200:
                    rid = r.json()["recall_id"]
            elif x < 0.75 and rid is not None:
                body = {"recall_id": rid, "reward": float(rng.random() < 0.6)}
                _send(http, load, "feedback", "POST", "/v1/feedback", headers=own, json=body)
            elif x < 0.875:
                e = {
                    "text": f"Task: shared by {wid} #{i}\nAction: SELECT 1;",
                    "kind": "experience",
                    "bytes": 64,
                    "q": 0.5,
                    "a": 1.0,
                    "rho_s": 0.01,
                    "source_id": f"w{wid}-{i}",
                }
                r = _send(
                    http,
                    load,
                    "hub push",
                    "POST",
                    "/v1/hub/push",
                    headers=peer,
                    json={"round": i, "entries": [e]},
                )
                if r.status_code == 200:
                    with load.lock:
                        load.pushed[r.json()["seq"]] = r.headers.get("x-replica", "?")
            else:
                r = _send(
                    http,
                    load,
                    "hub pull",
                    "GET",
                    "/v1/hub/pull",
                    headers=peer,
                    params={"since": since, "limit": 1000},
                )
                if r.status_code == 200:
                    got = r.json()
                    since = got["next_since"]
                    with load.lock:
                        for m in got["messages"]:
                            load.pulled.setdefault(m["seq"], set()).add(
                                r.headers.get("x-replica", "?")
                            )


def _removed(url: str, tok: str) -> set[str]:
    """Entry ids the decision log says were removed (evict, forget, replace, distill)."""
    import httpx

    out: set[str] = set()
    for action in _REMOVALS:
        since = 0
        while True:
            r = httpx.get(
                f"{url}/v1/decisions",
                params={"since": since, "limit": 1000, "action": action},
                headers={"Authorization": f"Bearer {tok}"},
                timeout=300.0,
            )
            r.raise_for_status()
            page = r.json()
            out.update(d["entry_id"] for d in page["decisions"])
            if page["next_since"] is None:
                break
            since = page["next_since"]
    return out


def replicas_run(a: argparse.Namespace) -> None:
    """The ``--replicas`` benchmark (see the module docstring); prints Markdown tables."""
    import threading

    import httpx

    from memcurator.service.balancer import Replicas
    from memcurator.store.pglocal import LocalPostgres

    clients = int(a.clients.split(",")[0])
    local = LocalPostgres()
    local.start()
    tmp = Path(tempfile.mkdtemp(prefix="mc-replicas-bench-"))
    try:
        import psycopg

        with psycopg.connect(local.url, autocommit=True) as c:
            c.execute("CREATE DATABASE replicas")
        url = local.url.rpartition("/")[0] + "/replicas"
        t = KeyTable.for_store(url)
        _, tok = t.create("load", name="agent", scopes=("read", "write", "admin"))
        peers = [
            t.create("load", name=f"peer{w}", scopes=("peer",), origin="peer")[1]
            for w in range(clients)
        ]
        t.configure("load", policy="lru", max_bytes=a.max_bytes)
        t.close()
        total = clients * a.requests
        print(
            f"# {a.replicas} replicas behind haproxy on one PostgreSQL; {clients} clients x "
            f"{a.requests} requests; kill -9 of one replica at {a.kill_at:.0%}; budget "
            f"{a.max_bytes:,} bytes; load average {os.getloadavg()}",
            flush=True,
        )
        with Replicas(url, a.replicas, folder=tmp) as reps:
            load = _Load()
            samples: list[tuple[int, int]] = []
            stop = threading.Event()

            def sample() -> None:
                while not stop.wait(1.0):
                    try:
                        r = httpx.get(
                            f"{reps.url}/v1/namespaces/load",
                            headers={"Authorization": f"Bearer {tok}"},
                            timeout=60.0,
                        )
                        if r.status_code == 200:
                            samples.append((r.json()["used_bytes"], r.json()["max_bytes"]))
                    except httpx.TransportError:
                        pass

            threads = [
                threading.Thread(
                    target=_client, args=(reps.url, tok, peers[w], w, a.requests, load, a.seed)
                )
                for w in range(clients)
            ]
            sampler = threading.Thread(target=sample)
            sampler.start()
            t0 = time.perf_counter()
            for th in threads:
                th.start()
            killed_at = None
            while any(th.is_alive() for th in threads):
                if killed_at is None and load.done >= a.kill_at * total:
                    reps.servers[-1].kill()
                    killed_at = load.done
                time.sleep(0.05)
            wall = time.perf_counter() - t0
            stop.set()
            sampler.join()
            # afterwards: every acknowledged write, read back through the balancer
            removed = _removed(reps.url, tok)
            missing = []
            with httpx.Client(base_url=reps.url, timeout=300.0) as http:
                for eid in load.acked:
                    r = http.get(f"/v1/entries/{eid}", headers={"Authorization": f"Bearer {tok}"})
                    if r.status_code != 200 and eid not in removed:
                        missing.append((eid, r.status_code))
                end = http.get("/v1/namespaces/load", headers={"Authorization": f"Bearer {tok}"})
            used, cap = end.json()["used_bytes"], end.json()["max_bytes"]
            cross = sum(1 for s, via in load.pulled.items() if via - {load.pushed.get(s)})
            logs = "".join(s.log(10**8) for s in reps.servers)
        print("| op | requests | p50 ms | p95 ms | p99 ms |")
        print("|---|---|---|---|---|")
        everything = [x for v in load.lat.values() for x in v]
        for op, xs in [*sorted(load.lat.items()), ("all", everything)]:
            p50, p95, p99 = _pcts(xs)
            print(f"| {op} | {len(xs):,} | {p50:.1f} | {p95:.1f} | {p99:.1f} |")
        fives = sum(n for c, n in load.codes.items() if c >= 500)
        print()
        print(f"- wall {wall:.1f} s, throughput {load.done / wall:.1f} requests/s")
        print(f"- status codes: {dict(sorted(load.codes.items()))}; 5xx answered: {fives}")
        print(
            "- sent again by the clients (the balancer's 502/503/504, or a transport error), "
            f"by cause: {load.retries or 'none'}"
        )
        print(f"- kill -9 of replica r{a.replicas - 1} after {killed_at} of {total} requests")
        print(
            f"- acknowledged writes: {len(load.acked):,}; removed with a logged reason: "
            f"{len(removed & set(load.acked)):,}; lost: {len(missing)} {missing[:5]}"
        )
        over = [s for s in samples if s[0] > s[1]]
        print(
            f"- budget: {used:,} / {cap:,} bytes at the end; {len(samples)} samples, "
            f"{len(over)} over, max {max((s[0] for s in samples), default=0):,}"
        )
        print(
            f"- hub: {len(load.pushed):,} pushes acknowledged, {len(load.pulled):,} pulled by "
            f"another peer, {cross:,} of them through another replica than the push"
        )
        print(f"- tracebacks in the replicas' logs: {logs.count('Traceback')}")
        print(f"# load average at end {os.getloadavg()}", flush=True)
    finally:
        local.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", default="1000", help="resident sizes N, comma-separated")
    ap.add_argument("--clients", default="1,4", help="client process counts, comma-separated")
    ap.add_argument("--ops", type=int, default=200, help="writes and recalls per client")
    ap.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="postgres: a local throwaway server, served with --recall-in-store",
    )
    ap.add_argument("--policy", default=None, help="default curator (sqlite), keep-all (postgres)")
    ap.add_argument(
        "--replicas", type=int, default=0, help="R replicas behind haproxy on one PostgreSQL"
    )
    ap.add_argument("--requests", type=int, default=200, help="--replicas: requests per client")
    ap.add_argument(
        "--kill-at", type=float, default=0.4, help="--replicas: kill -9 after this share"
    )
    ap.add_argument("--max-bytes", type=int, default=400_000, help="--replicas: the budget (bytes)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.replicas:
        replicas_run(a)
        return
    policy = a.policy or ("keep-all" if a.store == "postgres" else "curator")
    clients = [int(x) for x in a.clients.split(",")]
    local = None
    if a.store == "postgres":
        from memcurator.store.pglocal import LocalPostgres

        local = LocalPostgres()
        local.start()
    print(f"# store {a.store}, policy {policy}", flush=True)
    print(f"# load average at start (1, 5, 15 min): {os.getloadavg()}", flush=True)
    print(
        "| N | clients | op | p50 ms | p95 ms | p99 ms | req/s | library p50 ms | library p95 ms "
        "| library p99 ms | library req/s | p50 ratio | p95 ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    try:
        _table(a, clients, policy, None if local is None else local.url)
    finally:
        if local is not None:
            local.stop()
    print(f"# load average at end (1, 5, 15 min): {os.getloadavg()}", flush=True)


def _table(a: argparse.Namespace, clients: list[int], policy: str, pg_base: str | None) -> None:
    for n in (int(x) for x in a.entries.split(",")):
        for r in run(n, clients, a.ops, policy, pg_base):
            print(
                f"| {r['entries']:,} | {r['clients']} | {r['op']} | {r['p50']:.1f} | "
                f"{r['p95']:.1f} | {r['p99']:.1f} | {r['rps']:.0f} | {r['lib_p50']:.1f} | "
                f"{r['lib_p95']:.1f} | {r['lib_p99']:.1f} | {r['lib_rps']:.0f} | "
                f"{r['p50'] / r['lib_p50']:.1f}x | {r['p95'] / r['lib_p95']:.1f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
