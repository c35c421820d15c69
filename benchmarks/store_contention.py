"""Shared use of one store: a reader beside a writer, catch-up cost, one tenant beside others.

Issue 32, items 2 and 3, measured (a benchmark reports numbers; it asserts nothing):

- **reader p95**: a reader process's ``Memory.recall`` (k = 10, keep-all, a namespace of ``n``
  entries) quiet, and while a writer in another process writes one entry to the same
  namespace every ``--write-every`` s through its own handle. Two ways to follow the writer:
  ``feed`` (the change feed: the reader reads only the changed entries) and ``reload`` (the
  same code with the feed switched off, so every foreign commit reloads the namespace: what
  the store did before the feed).
- **catch-up**: one write through another handle, then the reader's next call; ms, median of
  ``--catchups`` rounds, feed vs reload.
- **one tenant vs four** (PostgreSQL): 4 processes write to 4 namespaces of their own; in the
  middle of the run the main process forgets one entry of the large namespace (a secure
  erase: ``VACUUM FULL``) and builds its HNSW index. The writers' write p99 before and during.

Usage::

    python benchmarks/store_contention.py --n 10000 --backends sqlite,postgres

Starts a throw-away local PostgreSQL (``memcurator.store.pglocal``) unless ``--pg-url`` is given.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recall_scale import (  # noqa: E402
    corpus_text,
    fill_pg,
    fill_sqlite,
    make_entries,
    query_text,
)

from memcurator import Memory  # noqa: E402
from memcurator.embed import HashingEmbedder  # noqa: E402
from memcurator.store import open_store  # noqa: E402

EMB = HashingEmbedder()
NS = "big"


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.array(xs), p)) * 1000 if xs else float("nan")


def _writer(
    where: str, ns: str, every: float, stop: Any, out: Any, seed: int, ready: Any = None
) -> None:
    """Write one entry every ``every`` s until ``stop``; put (t, latency s, error) rows."""
    mem = Memory(store=open_store(where), namespace=ns, policy="keep-all", embedder=EMB)
    if ready is not None:
        ready.set()
    rng = random.Random(seed)
    rows = []
    i = 0
    while not stop.is_set():
        t = time.time()
        err = ""
        try:
            mem.write(corpus_text(rng, 10_000_000 + seed * 100_000 + i))
        except Exception as e:  # noqa: BLE001 -- reported, not raised
            err = f"{type(e).__name__}: {e}"[:200]
        rows.append((t, time.time() - t, err))
        i += 1
        time.sleep(every)
    mem.store.close()
    out.put(rows)


def reader_p95(where: str, recalls: int, every: float, mode: str, writer: bool) -> dict[str, Any]:
    mem = Memory(store=open_store(where), namespace=NS, policy="keep-all", embedder=EMB)
    if mode == "reload":  # the feed switched off: every foreign commit reloads the namespace
        mem.store.changes_since = lambda ns, since: None  # type: ignore[method-assign]
    rng = random.Random(1)
    mem.recall(query_text(rng), k=10)  # builds BM25 once, untimed
    ctx = mp.get_context("fork")
    stop, out, ready = ctx.Event(), ctx.Queue(), ctx.Event()
    proc = None
    if writer:
        proc = ctx.Process(target=_writer, args=(where, NS, every, stop, out, 7, ready))
        proc.start()
        ready.wait(600)  # the writer's handle loaded the namespace
        time.sleep(0.5)
        len(mem)  # what the writer wrote so far: caught up (or reloaded) untimed
    res = mem._ctx.res
    r0, c0 = res.reloads, res.catchups
    lat = []
    for _ in range(recalls):
        t = time.perf_counter()
        mem.recall(query_text(rng), k=10)
        lat.append(time.perf_counter() - t)
    writes = 0
    if proc is not None:
        stop.set()
        writes = len(out.get(timeout=120))
        proc.join()
    mem.store.close()
    return {
        "p50": pct(lat, 50),
        "p95": pct(lat, 95),
        "writes": writes,
        "reloads": res.reloads - r0,
        "catchups": res.catchups - c0,
    }


def catch_up(where: str, rounds: int, mode: str) -> float:
    """Median ms of the reader's first call after one write through another handle."""
    mem = Memory(store=open_store(where), namespace=NS, policy="keep-all", embedder=EMB)
    if mode == "reload":
        mem.store.changes_since = lambda ns, since: None  # type: ignore[method-assign]
    other = Memory(store=open_store(where), namespace=NS, policy="keep-all", embedder=EMB)
    rng = random.Random(2)
    out = []
    for i in range(rounds):
        other.write(corpus_text(rng, 20_000_000 + i))
        t = time.perf_counter()
        len(mem)
        out.append(time.perf_counter() - t)
    mem.store.close()
    other.store.close()
    return statistics.median(out) * 1000


def tenants(url: str, window: float, every: float) -> dict[str, Any]:
    """4 writers on namespaces of their own; forget + HNSW build on NS mid-run."""
    ctx = mp.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(url, f"w{k}", every, stop, out, 100 + k))
        for k in range(4)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)  # the writers open their handles
    t_quiet = time.time()
    time.sleep(window)
    t_act = time.time()
    mem = Memory(store=open_store(url), namespace=NS, policy="keep-all", embedder=EMB)
    victim = mem.entries()[0].id
    t0 = time.perf_counter()
    fr = mem.forget(victim)
    t_forget = time.perf_counter() - t0
    t0 = time.perf_counter()
    mem.store.ensure_hnsw(NS)  # type: ignore[attr-defined]
    t_index = time.perf_counter() - t0
    t_end = time.time()
    time.sleep(1.0)
    stop.set()
    rows = [r for _ in procs for r in out.get(timeout=300)]
    for p in procs:
        p.join()
    mem.store.close()
    quiet = [lat for t, lat, e in rows if t_quiet <= t < t_act and not e]
    during = [lat for t, lat, e in rows if t_act <= t < t_end and not e]
    errors = [e for t, lat, e in rows if e]
    return {
        "quiet_p99": pct(quiet, 99),
        "during_p99": pct(during, 99),
        "quiet_n": len(quiet),
        "during_n": len(during),
        "errors": errors[:3],
        "n_errors": len(errors),
        "forget_s": t_forget,
        "erased": fr.erased,
        "index_s": t_index,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--recalls", type=int, default=200)
    ap.add_argument(
        "--reload-recalls",
        type=int,
        default=30,
        help="recalls of the reload run (each may reload the namespace: seconds at 10^4+)",
    )
    ap.add_argument("--write-every", type=float, default=0.05)
    ap.add_argument("--catchups", type=int, default=20)
    ap.add_argument("--window", type=float, default=15.0, help="s of quiet writing (tenants)")
    ap.add_argument("--pg-url", default=None)
    a = ap.parse_args()
    texts, E = make_entries(a.n, EMB, NS, 0)
    for backend in a.backends.split(","):
        local = None
        tmp = tempfile.mkdtemp(prefix="mc-contention-")
        if backend == "sqlite":
            where = os.path.join(tmp, "store.sqlite")
            fill_sqlite(where, NS, texts, E, EMB)
        else:
            where = a.pg_url
            if where is None:
                from memcurator.store.pglocal import LocalPostgres

                local = LocalPostgres()
                where = local.start()
            fill_pg(where, NS, texts, E, EMB)
        try:
            print(f"\n## {backend}, n = {a.n:,} (keep-all, k = 10, HashingEmbedder 512-d)")
            print("| run | recall p50 ms | recall p95 ms | writes beside | reloads | catch-ups |")
            print("|---|---|---|---|---|---|")
            quiet = reader_p95(where, a.recalls, a.write_every, "feed", False)
            rows = [("quiet", quiet)]
            for mode, k in (("feed", a.recalls), ("reload", a.reload_recalls)):
                rows.append((f"writer, {mode}", reader_p95(where, k, a.write_every, mode, True)))
            for name, r in rows:
                ratio = "" if name == "quiet" else f" ({r['p95'] / quiet['p95']:.1f}x quiet)"
                print(
                    f"| {name} | {r['p50']:.1f} | {r['p95']:.1f}{ratio} | {r['writes']} | "
                    f"{r['reloads']} | {r['catchups']} |"
                )
            cf, cr = catch_up(where, a.catchups, "feed"), catch_up(where, a.catchups, "reload")
            print(
                f"\ncatch-up after one outside write: feed {cf:.1f} ms, reload {cr:.1f} ms "
                f"(median of {a.catchups})"
            )
            if backend == "postgres":
                t = tenants(where, a.window, 0.02)
                print(
                    f"\n4 writers on other namespaces: write p99 quiet {t['quiet_p99']:.0f} ms "
                    f"(n={t['quiet_n']}), during forget+index build {t['during_p99']:.0f} ms "
                    f"(n={t['during_n']}); errors {t['n_errors']} {t['errors']}; forget "
                    f"{t['forget_s']:.1f} s (erased={t['erased']}), HNSW build {t['index_s']:.1f} s"
                )
        finally:
            if local is not None:
                local.stop()


if __name__ == "__main__":
    main()
