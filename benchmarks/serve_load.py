"""Load benchmark of ``memcurator serve`` on loopback, with the library in process as reference.

For each resident size N and client count C: a store is filled with N entries through the
library, then (1) the library itself times ``--ops`` writes and ``--ops`` recalls in process,
and (2) ``memcurator serve`` (uvicorn, one worker, 127.0.0.1) serves the same store while C
client processes (:class:`memcurator.client.Client`) each time ``--ops`` writes then ``--ops``
recalls. It prints p50/p95/p99 latencies (ms), requests/s (all clients together, over the
phase's wall time) and the service's p50 over the in-process p50. A benchmark, not a test: it
reports numbers and asserts nothing.

Usage::

    python benchmarks/serve_load.py --entries 1000,10000 --clients 1,4 --ops 200
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memcurator import Memory
from memcurator.service.keys import KeyTable

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(n: int, clients: list[int], ops: int, policy: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "load.db")
        t0 = time.perf_counter()
        with Memory(store, namespace="load", policy=policy, max_bytes=None) as m:
            for i in range(n):
                m.write(_text(i))
        fill = time.perf_counter() - t0
        # in-process reference on a copy of the store, so the service starts from N entries
        ref = os.path.join(d, "ref.db")
        subprocess.run(["cp", store, ref], check=True)
        with Memory(ref, namespace="load", policy=policy) as m:
            lw, lr = [], []
            for i in range(ops):
                t = time.perf_counter()
                m.write(f"Task: load 0 job {i} on table l0_{i}\nAction: SELECT {i} FROM l{i};")
                lw.append(time.perf_counter() - t)
            for i in range(ops):
                t = time.perf_counter()
                m.recall(f"job {i} on table l0_{i}", k=3)
                lr.append(time.perf_counter() - t)
        inproc = {"write": _pcts(lw), "recall": _pcts(lr)}
        for c in clients:
            work = os.path.join(d, f"c{c}.db")
            subprocess.run(["cp", store, work], check=True)
            keys = KeyTable(work + ".keys")
            _, tok = keys.create("load", name="load", scopes=("read", "write"))
            keys.configure("load", policy=policy)
            keys.close()
            port = _free_port()
            srv = subprocess.Popen(
                [sys.executable, "-m", "memcurator.cli", "serve", work, "--port", str(port)]
                + ["--log-level", "warning"],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            url = f"http://127.0.0.1:{port}"
            try:
                from memcurator.client import Client

                deadline = time.monotonic() + 120
                while True:
                    try:
                        Client(url, key=tok, timeout=2).health()
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.2)
                ps = [
                    subprocess.Popen(
                        [sys.executable, "-c", CLIENT, url, tok, str(w), str(ops)],
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
                srv.terminate()
                srv.wait(timeout=30)
            for phase in ("write", "recall"):
                lat = [x for o in outs for x in o["lat"][phase]]
                span = max(o["spans"][phase] for o in outs)
                p50, p95, p99 = _pcts(lat)
                rows.append(
                    {
                        "entries": n,
                        "clients": c,
                        "op": phase,
                        "p50": p50,
                        "p95": p95,
                        "p99": p99,
                        "rps": len(lat) / span,
                        "lib_p50": inproc[phase][0],
                        "lib_p95": inproc[phase][1],
                        "fill_s": fill,
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
    print(
        "| N | clients | op | p50 ms | p95 ms | p99 ms | req/s | library p50 ms | library p95 ms "
        "| p50 ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in a.entries.split(",")):
        for r in run(n, clients, a.ops, a.policy):
            print(
                f"| {r['entries']:,} | {r['clients']} | {r['op']} | {r['p50']:.1f} | "
                f"{r['p95']:.1f} | {r['p99']:.1f} | {r['rps']:.0f} | {r['lib_p50']:.1f} | "
                f"{r['lib_p95']:.1f} | {r['p50'] / r['lib_p50']:.1f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
