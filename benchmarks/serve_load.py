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

It prints p50/p95/p99 latencies (ms) and requests/s (all clients together over the phase's wall
time) for both, and the service's p50 and p95 over the library's. At C > 1 the ratio also holds
the queueing of C callers on one namespace (the service runs one namespace's calls one at a
time; the reference is one caller), so read the C = 1 rows for the per-request overhead and
the C > 1 rows for what C agents sharing a namespace see. Client processes, the server and the
reference share the machine's cores. A benchmark, not a test: it reports numbers and asserts
nothing.

Usage::

    python benchmarks/serve_load.py --entries 10000,100000 --clients 1,8 --ops 200
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


def run(n: int, clients: list[int], ops: int, policy: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "load.db")
        fill_s = fill(store, n, policy)
        print(f"# N={n:,}: filled in {fill_s:.1f} s", flush=True)
        # in-process reference on a copy of the store, so the service starts from N entries
        ref = os.path.join(d, "ref.db")
        shutil.copy(store, ref)
        with Memory(ref, namespace="load", policy=policy) as m:
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
            work = os.path.join(d, f"c{c}.db")
            shutil.copy(store, work)
            keys = work + ".keys"
            table = KeyTable(keys)
            _, tok = table.create("load", name="load", scopes=("read", "write"))
            table.configure("load", policy=policy)
            table.close()
            srv = ServeProcess(work, keys=keys, log_path=os.path.join(d, f"serve{c}.log"))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", default="1000", help="resident sizes N, comma-separated")
    ap.add_argument("--clients", default="1,4", help="client process counts, comma-separated")
    ap.add_argument("--ops", type=int, default=200, help="writes and recalls per client")
    ap.add_argument("--policy", default="curator")
    a = ap.parse_args()
    clients = [int(x) for x in a.clients.split(",")]
    print(f"# load average at start (1, 5, 15 min): {os.getloadavg()}", flush=True)
    print(
        "| N | clients | op | p50 ms | p95 ms | p99 ms | req/s | library p50 ms | library p95 ms "
        "| library p99 ms | library req/s | p50 ratio | p95 ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in a.entries.split(",")):
        for r in run(n, clients, a.ops, a.policy):
            print(
                f"| {r['entries']:,} | {r['clients']} | {r['op']} | {r['p50']:.1f} | "
                f"{r['p95']:.1f} | {r['p99']:.1f} | {r['rps']:.0f} | {r['lib_p50']:.1f} | "
                f"{r['lib_p95']:.1f} | {r['lib_p99']:.1f} | {r['lib_rps']:.0f} | "
                f"{r['p50'] / r['lib_p50']:.1f}x | {r['p95'] / r['lib_p95']:.1f}x |",
                flush=True,
            )
    print(f"# load average at end (1, 5, 15 min): {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
