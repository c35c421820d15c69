"""Write and recall latency at scale: SQLite (in-process recall) vs PostgreSQL (in-database HNSW).

Issue 20's latency bullet: write and recall p50/p95/p99 and throughput at 10^4 and 10^5 entries
(10^6 where it fits), 1 and 8 concurrent clients, SQLite vs PostgreSQL, and recall@10 of the
HNSW leg against exact search, printed as one table with ratios.

What is measured
----------------
- **fill**: the namespace is filled in bulk (SQLite: ``store.insert`` in 5,000-row transactions;
  PostgreSQL: ``COPY``), then PostgreSQL builds its HNSW index; rows/s and build time printed.
- **write**: one entry committed through the store (embed + one insert transaction: the
  namespace lock, the row, its HNSW/GIN upkeep on PostgreSQL), per client; ``--writes`` each.
  Memory's own write path (admission, Keep) is the same on both backends and not timed here.
- **recall**: ``k = 10`` for a query of the corpus' kind. SQLite:
  :meth:`memcurator.Memory.recall` on the keep-all resident set in process memory (exact; each
  client opens its own Memory, as separate agent processes would). PostgreSQL:
  :class:`memcurator.lifecycle.store_recall.StoreRecall` (HNSW + full-text in the database,
  fused; the clients share one pool), and the same with
  ``exact=True`` (no index).
- **recall@10**: overlap of the HNSW dense leg's 10 ids with exact search's 10 (no filter),
  averaged over 100 queries; and of the fused results (HNSW path vs exact path).

Usage::

    python benchmarks/recall_scale.py --sizes 10000,100000 --clients 1,8

Starts a throw-away local PostgreSQL (``memcurator.store.pglocal``) unless ``--pg-url`` is given.
A benchmark reports numbers; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.lifecycle.context import embedder_identity
from memcurator.lifecycle.store_recall import StoreRecall
from memcurator.retrieve.hybrid import recall_text
from memcurator.store.postgres import PostgresStore
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import SQLiteStore
from memcurator.types import Entry

VERBS = "count list sum average find delete update rank join group filter export".split()
NOUNS = "orders invoices staff sales customers products refunds shipments tickets logins".split()
WHERE = "region store country team month year quarter warehouse channel vendor".split()


def corpus_text(rng: random.Random, i: int) -> str:
    v, n, w = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(WHERE)
    return f"Task: {v} the {n} per {w} {rng.randrange(1000)} for account {i}\nAction: SELECT 1;"


def query_text(rng: random.Random) -> str:
    v, n, w = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(WHERE)
    return f"{v} all {n} of each {w} {rng.randrange(1000)}"


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.array(xs), p)) * 1000 if xs else float("nan")


def timed(
    fn: Callable[[int, int], Any], clients: int, per_client: int, *, warm: bool = False
) -> tuple[list[float], float]:
    """Latencies (s) of ``per_client`` calls ``fn(client, j)`` on each of ``clients`` threads,
    and the wall time of the whole. ``warm``: each client first makes its call ``j = 0`` once,
    untimed (a Memory's first recall builds its BM25 index: seconds at 10^5 entries)."""
    lat: list[float] = []
    lock = threading.Lock()
    if warm:
        for c in range(clients):
            fn(c, 0)

    def run(c: int) -> None:
        mine = []
        for j in range(per_client):
            t = time.perf_counter()
            fn(c, j)
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, time.perf_counter() - t0


def make_entries(n: int, emb: HashingEmbedder, ns: str, seed: int) -> tuple[list[str], np.ndarray]:
    rng = random.Random(seed)
    texts = [corpus_text(rng, i) for i in range(n)]
    E = np.vstack([emb.embed(recall_text(t)) for t in texts]).astype(np.float32)
    return texts, E


def entry(ns: str, i: int, text: str, e: np.ndarray, prefix: str = "e") -> Entry:
    b = default_sizeof(text, {}, e)
    return Entry(f"{prefix}{i}", ns, "raw", text, b, b, e, "self", "")


def fill_sqlite(path: str, ns: str, texts: list[str], E: np.ndarray, emb: HashingEmbedder) -> float:
    s = SQLiteStore(path)
    s.create_namespace(ns, embedder=embedder_identity(emb), dim=emb.dim, max_bytes=None)
    t0 = time.perf_counter()
    for lo in range(0, len(texts), 5000):
        with s.transaction(namespace=ns):
            for i in range(lo, min(lo + 5000, len(texts))):
                s.insert(entry(ns, i, texts[i], E[i]))
    dt = time.perf_counter() - t0
    s.close()
    return dt


def fill_pg(url: str, ns: str, texts: list[str], E: np.ndarray, emb: HashingEmbedder) -> float:
    import psycopg

    s = PostgresStore(url)
    s.create_namespace(ns, embedder=embedder_identity(emb), dim=emb.dim, max_bytes=None)
    s.close()
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c, c.cursor() as cur:
        cols = "id, namespace, kind, text, bytes, raw_bytes, vec, origin, meta"
        with cur.copy(f"COPY entries ({cols}) FROM STDIN") as cp:
            for i, t in enumerate(texts):
                b = default_sizeof(t, {}, E[i])
                vec = "[" + ",".join(map(repr, E[i].tolist())) + "]"
                cp.write_row((f"e{i}", ns, "raw", t, b, b, vec, "self", "{}"))
        c.execute("ANALYZE entries")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--queries", type=int, default=100, help="recalls per client")
    ap.add_argument("--writes", type=int, default=50, help="writes per client")
    ap.add_argument("--pg-url", default=None)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument(
        "--ef-search",
        default="100",
        help="hnsw.ef_search values, comma-separated: one HNSW row (and recall@10) per value",
    )
    ap.add_argument(
        "--sqlite-max-clients",
        type=int,
        default=None,
        help="skip the SQLite rows with more clients than this at n >= 10^6 (each in-process "
        "client holds the whole n x dim float32 matrix: 2 GB per client at 10^6, dim 512)",
    )
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    efs = [int(x) for x in str(a.ef_search).split(",")]
    clients = [int(x) for x in a.clients.split(",")]
    emb = HashingEmbedder()
    local = None
    base_url = a.pg_url
    if base_url is None:
        from memcurator.store.pglocal import LocalPostgres

        local = LocalPostgres()
        local.start()
        base_url = local.url
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    tmp = tempfile.mkdtemp(prefix="recall_scale_")
    try:
        from memcurator.store.pglocal import fresh_database

        for n in sizes:
            url = fresh_database(base_url, f"rs_{n}", maintenance_work_mem="4GB")
            ns = "bench"
            t0 = time.perf_counter()
            texts, E = make_entries(n, emb, ns, a.seed)
            t_emb = time.perf_counter() - t0
            sq_path = os.path.join(tmp, f"s{n}.db")
            t_sq = fill_sqlite(sq_path, ns, texts, E, emb)
            t_pg = fill_pg(url, ns, texts, E, emb)
            pg = PostgresStore(url, pool_size=max(clients) + 1)
            t0 = time.perf_counter()
            pg.ensure_hnsw(ns, m=a.m, ef_construction=a.ef_construction)
            t_hnsw = time.perf_counter() - t0
            notes.append(
                f"n={n}: embed {n / t_emb:,.0f}/s; fill SQLite {n / t_sq:,.0f} rows/s, "
                f"PostgreSQL COPY {n / t_pg:,.0f} rows/s; HNSW build (m={a.m}, "
                f"ef_construction={a.ef_construction}) {t_hnsw:.1f} s"
            )
            print(notes[-1], flush=True)
            qrng = random.Random(a.seed + 1)
            queries = [query_text(qrng) for _ in range(max(clients) * a.queries)]
            # recall@10 per ef_search: HNSW dense leg and fused result vs exact
            ex = StoreRecall(pg, ns, exact=True)
            exact_ids = []
            for q in queries[:100]:
                line = recall_text(q)
                e_q = emb.embed(line)
                d_x = {h.id for h in pg.search(ns, line, e_q, 10, exact=True).dense}
                exact_ids.append((line, e_q, d_x, set(ex.recall(q, 10).ids)))
            rec: dict[int, tuple[float, float]] = {}
            for ef in efs:
                pg.ef_search = ef
                hn = StoreRecall(pg, ns)
                r_dense, r_fused = [], []
                for q, (line, e_q, d_x, f_x) in zip(queries[:100], exact_ids, strict=True):
                    d_h = {h.id for h in pg.search(ns, line, e_q, 10).dense}
                    r_dense.append(len(d_h & d_x) / 10)
                    r_fused.append(len(set(hn.recall(q, 10).ids) & f_x) / 10)
                rec[ef] = (float(np.mean(r_dense)), float(np.mean(r_fused)))
                print(
                    f"n={n} ef_search={ef}: recall@10 dense {rec[ef][0]:.3f} "
                    f"fused {rec[ef][1]:.3f}",
                    flush=True,
                )
            for cl in clients:
                # ---- SQLite: each client its own Memory (its own resident set)
                if (
                    n >= 1_000_000
                    and a.sqlite_max_clients is not None
                    and cl > a.sqlite_max_clients
                ):
                    notes.append(f"n={n} clients={cl}: SQLite skipped (--sqlite-max-clients)")
                else:
                    _sqlite_rows(n, cl, sq_path, ns, emb, queries, a, rows)
                # ---- PostgreSQL: HNSW (per ef_search) and exact in the database, one pool
                modes = [(f"in-db HNSW ef {ef}", ef) for ef in efs] + [("in-db exact", None)]
                for mode, ef in modes:
                    if ef is None and n > 100_000:
                        continue
                    if ef is not None:
                        pg.ef_search = ef
                    rdr = StoreRecall(pg, ns) if ef is not None else ex
                    lat_w = timed(
                        lambda c, j, r=rdr, qs=queries: r.recall(qs[c * a.queries + j], k=10),
                        cl,
                        a.queries if ef is not None else max(a.queries // 5, 5),
                        warm=True,
                    )
                    w = None
                    if ef == efs[0]:
                        prng = random.Random(8)

                        def pg_write(
                            c: int, j: int, r: Any = prng, n: int = n, cl: int = cl, st: Any = pg
                        ) -> None:
                            t = corpus_text(r, n + c * 100000 + j)
                            e = emb.embed(recall_text(t))
                            with st.transaction(namespace="bench"):
                                st.insert(entry("bench", j, t, e, prefix=f"w{cl}_{c}_"))

                        w = timed(pg_write, cl, a.writes)
                    rows.append(
                        dict(
                            backend="postgres",
                            mode=mode,
                            n=n,
                            clients=cl,
                            rec=lat_w,
                            wr=w,
                            r10=rec[ef][0] if ef is not None else 1.0,
                            note=f"fused recall@10 {rec[ef][1]:.3f}" if ef is not None else "",
                        )
                    )
                print(f"n={n} clients={cl} done", flush=True)
            pg.close()
    finally:
        if local is not None:
            local.stop()
    render(rows, notes, a)


def _sqlite_rows(
    n: int,
    cl: int,
    sq_path: str,
    ns: str,
    emb: HashingEmbedder,
    queries: list[str],
    a: argparse.Namespace,
    rows: list[dict[str, Any]],
) -> None:
    """Time ``cl`` in-process Memories recalling (exact) and ``cl`` store writers on SQLite."""
    t0 = time.perf_counter()
    mems = [Memory(sq_path, namespace=ns, policy="keep-all", embedder=emb) for _ in range(cl)]
    t_open = time.perf_counter() - t0
    lat, wall = timed(
        lambda c, j, ms=mems, qs=queries: ms[c].recall(qs[c * a.queries + j], k=10),
        cl,
        a.queries,
        warm=True,
    )
    sq_rec = (lat, wall)
    wst = SQLiteStore(sq_path)
    wrng = random.Random(7)

    def sq_write(c: int, j: int, st: Any = wst, r: Any = wrng, n: int = n, cl: int = cl) -> None:
        t = corpus_text(r, n + c * 100000 + j)
        e = emb.embed(recall_text(t))
        with st.transaction(namespace="bench"):
            st.insert(entry("bench", j, t, e, prefix=f"w{cl}_{c}_"))

    sq_w = timed(sq_write, cl, a.writes)
    wst.close()
    for m in mems:
        m.store.close()
    rows.append(
        dict(
            backend="sqlite",
            mode="in-process exact",
            n=n,
            clients=cl,
            rec=sq_rec,
            wr=sq_w,
            r10=1.0,
            note=f"{cl} Memory open {t_open:.1f} s",
        )
    )


def _ratio(p95: float, base: float | None) -> str:
    """``p95`` over SQLite's p95 at the same size and clients; "-" where SQLite was skipped."""
    return "-" if base is None else f"{p95 / base:.2f}"


def render(rows: list[dict[str, Any]], notes: list[str], a: argparse.Namespace) -> None:
    print()
    print(
        f"recall k=10, hnsw.ef_search={a.ef_search}, m={a.m}, ef_construction="
        f"{a.ef_construction}; latencies in ms; ratio = this p95 / SQLite p95 (same n, clients)"
    )
    hdr = (
        "| backend | recall path | n | clients | recall p50 | p95 | p99 | recalls/s | "
        "ratio p95 | recall@10 | write p50 | p95 | p99 | writes/s | note |"
    )
    print(hdr)
    print("|" + "---|" * 15)
    base = {(r["n"], r["clients"]): pct(r["rec"][0], 95) for r in rows if r["backend"] == "sqlite"}
    for r in rows:
        lat, wall = r["rec"]
        p95 = pct(lat, 95)
        w = r["wr"]
        ws = (
            (
                f"{pct(w[0], 50):.2f} | {pct(w[0], 95):.2f} | {pct(w[0], 99):.2f} | "
                f"{len(w[0]) / w[1]:,.0f}"
            )
            if w
            else "- | - | - | -"
        )
        print(
            f"| {r['backend']} | {r['mode']} | {r['n']:,} | {r['clients']} | "
            f"{pct(lat, 50):.2f} | {p95:.2f} | {pct(lat, 99):.2f} | {len(lat) / wall:,.1f} | "
            f"{_ratio(p95, base.get((r['n'], r['clients'])))} | {r['r10']:.3f} | {ws} | "
            f"{r['note']} |"
        )
    for n in notes:
        print("-", n)


if __name__ == "__main__":
    main()
