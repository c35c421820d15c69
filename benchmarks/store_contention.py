"""Shared use of one store: a reader beside a writer, catch-up cost, one tenant beside others.

Issue 32, items 2 and 3, measured (a benchmark reports numbers; it asserts nothing). The
machine this runs on is shared, so every ratio is taken from phases that alternate in one run:

- **reader p95**: a reader's ``Memory.recall`` (k = 10, keep-all, a namespace of ``n``
  entries) in this process. One writer process writes one entry to the same namespace every
  ``--write-every`` s through its own handle, but only during the "writer" phases; quiet and
  writer phases alternate (``--rounds`` pairs, ``--recalls`` recalls each, the order swapped
  every round). ``feed`` follows the writer by the change feed (the reader reads only the
  changed entries); ``reload`` (``--reload-recalls``) is the same code with the feed switched
  off, so every foreign commit reloads the namespace (what the store did before the feed).
- **catch-up**: one write through another handle, then the reader's next call; ms, median of
  ``--catchups`` rounds (feed) and ``--reload-catchups`` (reload).
- **one tenant vs four**: 4 processes write to 4 namespaces of their own; ``--window`` s of
  them alone alternate with a forget of one entry of the large namespace (a secure erase:
  PostgreSQL ``VACUUM FULL`` of its partition; SQLite ``secure_delete`` and a WAL checkpoint)
  and, on PostgreSQL, a build of its HNSW index (dropped again between rounds). The writers'
  write p50/p99 in the quiet windows and during the forget + build.

The namespace is filled in bulk (SQLite: the store's inserts in 5,000-row transactions;
PostgreSQL: ``COPY``), not through ``Memory.write``. The load average is printed with each part.

Usage::

    python benchmarks/store_contention.py --n 10000 --backends sqlite,postgres
    python benchmarks/store_contention.py --n 100000 --backends postgres --rounds 4 --recalls 50

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
    where: str,
    ns: str,
    every: float,
    stop: Any,
    out: Any,
    seed: int,
    ready: Any = None,
    go: Any = None,
) -> None:
    """Write one entry every ``every`` s while ``go`` is set (always when None), until ``stop``;
    put (t, latency s, error) rows."""
    mem = Memory(store=open_store(where), namespace=ns, policy="keep-all", embedder=EMB)
    if ready is not None:
        ready.set()
    rng = random.Random(seed)
    rows = []
    i = 0
    while not stop.is_set():
        if go is not None and not go.is_set():
            go.wait(0.05)
            continue
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


def _ready(ev: Any, proc: Any, timeout: float = 900.0) -> None:
    """Wait for a writer's ``ev``; fail at once if its process died (its traceback is above)."""
    end = time.time() + timeout
    while not ev.wait(0.5):
        if proc.exitcode is not None or time.time() > end:
            raise RuntimeError(f"writer {proc.name} exited ({proc.exitcode}) before it was ready")


def _rows(out: Any, procs: list[Any]) -> list[tuple[float, float, str]]:
    """Every writer's rows, once each has stopped; fail at once if one died without them."""
    import queue

    rows: list[tuple[float, float, str]] = []
    got = 0
    while got < len(procs):
        try:
            rows += out.get(timeout=1.0)
            got += 1
        except queue.Empty:
            if all(p.exitcode is not None for p in procs) and out.empty():
                raise RuntimeError(
                    f"{len(procs) - got} writer(s) died without their rows"
                ) from None
    for p in procs:
        p.join()
    return rows


def _reader(where: str, mode: str) -> Memory:
    mem = Memory(store=open_store(where), namespace=NS, policy="keep-all", embedder=EMB)
    if mode == "reload":  # the feed switched off: every foreign commit reloads the namespace
        mem.store.changes_since = lambda ns, since: None  # type: ignore[method-assign]
    return mem


def reader_interleaved(
    where: str, rounds: int, per_round: int, every: float, mode: str
) -> dict[str, dict[str, Any]]:
    """Reader p50/p95, quiet and beside a writer process, in alternating phases.

    One reader handle in this process, one writer process for the whole run that writes only
    while its ``go`` event is set. Each round times ``per_round`` recalls quiet and
    ``per_round`` beside the writer (the order swaps every round, so a drift of the machine's
    load falls on both); between phases the reader catches up, untimed, and the writer's last
    write is waited out. Returns ``{"quiet": {...}, "writer": {...}}``.
    """
    mem = _reader(where, mode)
    rng = random.Random(1)
    mem.recall(query_text(rng), k=10)  # builds BM25 once, untimed
    ctx = mp.get_context("fork")
    stop, out, ready, go = ctx.Event(), ctx.Queue(), ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_writer, args=(where, NS, every, stop, out, 7, ready, go))
    proc.start()
    _ready(ready, proc)  # the writer's handle loaded the namespace
    res = mem._ctx.res
    lat: dict[str, list[float]] = {"quiet": [], "writer": []}
    counts = {k: {"reloads": 0, "catchups": 0, "s": 0.0} for k in lat}
    spans: dict[str, list[tuple[float, float]]] = {k: [] for k in lat}
    for r in range(rounds):
        for phase in ("quiet", "writer") if r % 2 == 0 else ("writer", "quiet"):
            if phase == "writer":
                go.set()
                time.sleep(3 * every)  # the writer is writing
            else:
                go.clear()
                time.sleep(max(0.3, 3 * every))  # its write in flight has committed
            len(mem)  # caught up (or reloaded), untimed
            r0, c0 = res.reloads, res.catchups
            t_phase = time.time()
            for _ in range(per_round):
                t = time.perf_counter()
                mem.recall(query_text(rng), k=10)
                lat[phase].append(time.perf_counter() - t)
            spans[phase].append((t_phase, time.time()))
            counts[phase]["reloads"] += res.reloads - r0
            counts[phase]["catchups"] += res.catchups - c0
            counts[phase]["s"] += time.time() - t_phase
    go.clear()
    stop.set()
    rows = _rows(out, [proc])
    mem.store.close()
    result = {}
    for phase, xs in lat.items():
        writes = sum(1 for t, _, _ in rows if any(a <= t < b for a, b in spans[phase]))
        result[phase] = {
            "p50": pct(xs, 50),
            "p95": pct(xs, 95),
            "n": len(xs),
            "writes": writes,
            **counts[phase],
        }
    return result


def catch_up(where: str, rounds: int, mode: str) -> float:
    """Median ms of the reader's first call after one write through another handle."""
    mem = _reader(where, mode)
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


def _drop_hnsw(url: str) -> None:
    """Drop NS's HNSW index (``CONCURRENTLY``) so the next round builds it again."""
    import psycopg

    from memcurator.store.postgres import hash_ns

    name = "entries_hnsw_" + format(abs(hash_ns(NS)), "x")
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')


def tenants(where: str, rounds: int, window: float, every: float, index: bool) -> dict[str, Any]:
    """4 writers on namespaces of their own; quiet windows alternate with a forget (and, on
    PostgreSQL, an HNSW build) in NS.

    Each round: ``window`` s of the 4 writers alone, then one forget of an entry of NS
    (secure erase) and, with ``index``, an HNSW build of NS (dropped again, untimed and outside
    both windows, before the next round's build); one more quiet window ends the run. The
    writers' write latencies are split by the window they began in.
    """
    ctx = mp.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(4)]
    procs = [
        ctx.Process(target=_writer, args=(where, f"w{k}", every, stop, out, 100 + k, readies[k]))
        for k in range(4)
    ]
    for p in procs:
        p.start()
    mem = Memory(store=open_store(where), namespace=NS, policy="keep-all", embedder=EMB)
    for ev, p in zip(readies, procs, strict=True):
        _ready(ev, p)
    time.sleep(2.0)  # the writers' first writes (namespace creation) are behind us
    quiet: list[tuple[float, float]] = []
    active: list[tuple[float, float]] = []
    forget_s, index_s, erased = [], [], []
    victims = [e.id for e in mem.entries()[: rounds + 1]]
    for r in range(rounds):
        t0 = time.time()
        time.sleep(window)
        quiet.append((t0, time.time()))
        t_act = time.time()
        t = time.perf_counter()
        erased.append(mem.forget(victims[r]).erased)
        forget_s.append(time.perf_counter() - t)
        if index:
            t = time.perf_counter()
            mem.store.ensure_hnsw(NS)  # type: ignore[attr-defined]
            index_s.append(time.perf_counter() - t)
        active.append((t_act, time.time()))
        if index:
            _drop_hnsw(where)
        time.sleep(1.0)
    t0 = time.time()  # a last quiet window: each active one has a quiet one on either side
    time.sleep(window)
    quiet.append((t0, time.time()))
    stop.set()
    rows = _rows(out, procs)
    mem.store.close()

    def inside(t: float, spans: list[tuple[float, float]]) -> bool:
        return any(a <= t < b for a, b in spans)

    q = [lat for t, lat, e in rows if inside(t, quiet) and not e]
    d = [lat for t, lat, e in rows if inside(t, active) and not e]
    errors = [e for t, lat, e in rows if e]
    return {
        "quiet_p50": pct(q, 50),
        "quiet_p99": pct(q, 99),
        "during_p50": pct(d, 50),
        "during_p99": pct(d, 99),
        "quiet_n": len(q),
        "during_n": len(d),
        "errors": errors[:3],
        "n_errors": len(errors),
        "forget_s": forget_s,
        "erased": erased,
        "index_s": index_s,
    }


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--rounds", type=int, default=4, help="quiet/writer phase pairs (reader)")
    ap.add_argument("--recalls", type=int, default=50, help="recalls per phase and round")
    ap.add_argument(
        "--reload-recalls",
        type=int,
        default=0,
        help="recalls per phase of a run with the feed off (each may reload the namespace: "
        "seconds at 10^4+); 0 skips it",
    )
    ap.add_argument("--write-every", type=float, default=0.05)
    ap.add_argument("--catchups", type=int, default=20)
    ap.add_argument(
        "--reload-catchups", type=int, default=3, help="catch-ups with the feed off (0: skip)"
    )
    ap.add_argument("--tenant-rounds", type=int, default=2)
    ap.add_argument("--window", type=float, default=15.0, help="s of quiet writing per round")
    ap.add_argument(
        "--skip", default="", help="comma-separated parts to skip: reader,catchup,tenants"
    )
    ap.add_argument("--pg-url", default=None)
    a = ap.parse_args()
    skip = set(a.skip.split(",")) - {""}
    t0 = time.perf_counter()
    texts, E = make_entries(a.n, EMB, NS, 0)
    print(f"# n = {a.n:,}: {a.n:,} texts embedded in {time.perf_counter() - t0:.1f} s")
    for backend in a.backends.split(","):
        local = None
        tmp = tempfile.mkdtemp(prefix="mc-contention-")
        if backend == "sqlite":
            where = os.path.join(tmp, "store.sqlite")
            fill_s = fill_sqlite(where, NS, texts, E, EMB)
        else:
            where = a.pg_url
            if where is None:
                from memcurator.store.pglocal import LocalPostgres

                local = LocalPostgres()
                where = local.start()
            fill_s = fill_pg(where, NS, texts, E, EMB)
        try:
            print(
                f"\n## {backend}, n = {a.n:,} (keep-all, k = 10, HashingEmbedder 512-d); "
                f"bulk fill {fill_s:.1f} s; load average {_load()}"
            )
            if "reader" not in skip:
                print(
                    f"\nreader: {a.rounds} rounds x {a.recalls} recalls per phase, quiet and "
                    f"writer phases alternating; the writer writes every {a.write_every} s"
                )
                print(
                    "| run | recall p50 ms | recall p95 ms | p95 / quiet | writes beside | "
                    "reloads | catch-ups |"
                )
                print("|---|---|---|---|---|---|---|")
                runs = [("feed", a.recalls)]
                if a.reload_recalls:
                    runs.append(("reload", a.reload_recalls))
                for mode, k in runs:
                    r = reader_interleaved(where, a.rounds, k, a.write_every, mode)
                    for phase in ("quiet", "writer"):
                        x = r[phase]
                        print(
                            f"| {mode}, {phase} | {x['p50']:.1f} | {x['p95']:.1f} | "
                            f"{x['p95'] / r['quiet']['p95']:.2f}x | {x['writes']} | "
                            f"{x['reloads']} | {x['catchups']} |"
                        )
                print(f"load average after: {_load()}")
            if "catchup" not in skip:
                cf = catch_up(where, a.catchups, "feed")
                line = (
                    f"\ncatch-up after one outside write: feed {cf:.1f} ms (median of {a.catchups}"
                )
                line += ")"
                if a.reload_catchups:
                    cr = catch_up(where, a.reload_catchups, "reload")
                    line += f", reload {cr:.1f} ms (median of {a.reload_catchups})"
                print(line + f"; load average {_load()}")
            if "tenants" not in skip:
                t = tenants(where, a.tenant_rounds, a.window, 0.02, backend == "postgres")
                what = "forget + HNSW build" if backend == "postgres" else "forget"
                print(
                    f"\n4 writers on other namespaces, {a.tenant_rounds} rounds: write p50/p99 "
                    f"quiet {t['quiet_p50']:.0f}/{t['quiet_p99']:.0f} ms (n={t['quiet_n']}), "
                    f"during {what} {t['during_p50']:.0f}/{t['during_p99']:.0f} ms "
                    f"(n={t['during_n']}), p99 ratio {t['during_p99'] / t['quiet_p99']:.2f}x; "
                    f"errors {t['n_errors']} {t['errors']}; forget s "
                    f"{[round(x, 1) for x in t['forget_s']]} (erased={t['erased']}), HNSW "
                    f"build s {[round(x, 1) for x in t['index_s']]}; load average {_load()}"
                )
        finally:
            if local is not None:
                local.stop()


if __name__ == "__main__":
    main()
