"""Many processes, one namespace: no lost or duplicated write, no budget overrun, no forgotten
entry served again (issue 20). Prints a table; ``tests/test_concurrency.py`` runs it small.

Each of P processes opens its own :class:`memcurator.Memory` on one namespace of one store (a
SQLite file or a ``postgresql://`` URL) and runs N operations drawn from a seeded mix: write
(10% of them one of a few texts every process writes, so duplicate checks race), recall (with
a ``get`` of a recalled id), feedback and forget of one of its own entries. Afterwards
:func:`verify` replays the namespace's decision log in order and checks:

- no process raised (``EntryNotFound`` from forgetting an entry another process evicted first
  is the only expected refusal and is counted apart);
- every admit a process was told of is in the log once, and the log has no other admit;
- the replayed resident set equals the store's entries (ids and bytes), and no two resident
  entries hold the same text;
- the budget: after each write's rows (an admit and the evictions that follow it in the same
  transaction) the replayed ``used_bytes`` is at most ``max_bytes``; every process also read
  ``used_bytes`` from the store after each of its writes;
- a recall that began after a forget returned (in any process) never returns that id.

Usage::

    python benchmarks/concurrency.py --procs 8 --ops 2000 [--pg URL | --local-pg] [--sqlite]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHARED = [
    f"Task: the shared runbook step {i} for every agent\nAction: SELECT {i};" for i in range(5)
]


def worker(target: str, ns: str, idx: int, n_ops: int, max_bytes: int, seed: int) -> dict:
    """One process's run; returns what it saw (times are ``time.time()``, one machine)."""
    from memcurator import Memory
    from memcurator.errors import EntryNotFound

    rng = random.Random(seed * 1000 + idx)
    out: dict[str, Any] = {
        "admitted": [],
        "forgot": [],
        "recalls": [],
        "gets_after_forget": [],
        "errors": [],
        "gone_first": 0,
        "over": [],
        "ops": Counter(),
        "lat": {"write": [], "recall": [], "feedback": [], "forget": []},
    }
    try:
        mem = Memory(target, namespace=ns, policy="lru", max_bytes=max_bytes, seed=100 + idx)
    except Exception as e:  # reported, never hidden: the verifier fails on any error
        out["errors"].append(f"open: {e!r}")
        return out
    mine: list[str] = []
    last = None
    for j in range(n_ops):
        r = rng.random()
        t0 = time.perf_counter()
        try:
            if r < 0.55:
                op = "write"
                if rng.random() < 0.1:
                    text = rng.choice(SHARED)
                else:
                    text = f"Task: process {idx} step {j} counts orders of {rng.randrange(10**6)}"
                    text += f"\nAction: SELECT COUNT(*) FROM o WHERE p={idx} AND s={j};"
                w = mem.write(text)
                if w.admitted and w.id is not None and not w.reason.startswith("reinforced"):
                    out["admitted"].append(w.id)
                    mine.append(w.id)
                used = mem.store.used_bytes(ns)
                if used > max_bytes:
                    out["over"].append(used)
            elif r < 0.8:
                op = "recall"
                start = time.time()
                last = mem.recall(f"orders of process {rng.randrange(8)}", k=5)
                out["recalls"].append((start, list(last.ids)))
            elif r < 0.9:
                op = "feedback"
                if last is not None and last.ids:
                    try:
                        mem.feedback(last, rng.choice([0.0, 1.0]))
                    except EntryNotFound:
                        out["gone_first"] += 1
            else:
                op = "forget"
                if mine:
                    fid = mine.pop(rng.randrange(len(mine)))
                    try:
                        mem.forget(fid)
                        out["forgot"].append((time.time(), fid))
                        try:
                            mem.get(fid)
                            out["gets_after_forget"].append(fid)
                        except EntryNotFound:
                            pass
                    except EntryNotFound:
                        out["gone_first"] += 1  # evicted by another process's write first
        except Exception as e:
            out["errors"].append(f"{op} {j}: {e!r}")
            continue
        out["ops"][op] += 1
        out["lat"][op].append(time.perf_counter() - t0)
    mem.close()
    return out


def _run_one(args: tuple[str, str, int, int, int, int]) -> dict:
    return worker(*args)


@dataclass
class Report:
    """What :func:`verify` found; ``problems`` empty means every check held."""

    backend: str
    procs: int
    ops: int
    seconds: float
    admitted: int
    evicted: int
    forgotten: int
    gone_first: int
    resident: int
    max_used: int
    max_bytes: int
    problems: list[str] = field(default_factory=list)
    lat: dict[str, list[float]] = field(default_factory=dict)


def run(target: str, *, procs: int, ops: int, max_bytes: int = 60_000, seed: int = 0) -> Report:
    """Run ``procs`` worker processes on namespace ``mp`` of ``target`` and verify."""
    ns = f"mp{seed}"
    from memcurator import Memory

    Memory(target, namespace=ns, policy="lru", max_bytes=max_bytes).close()  # create it once
    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    with ctx.Pool(procs) as pool:
        outs = pool.map(_run_one, [(target, ns, i, ops, max_bytes, seed) for i in range(procs)])
    secs = time.perf_counter() - t0
    return verify(target, ns, outs, max_bytes=max_bytes, procs=procs, ops=ops, seconds=secs)


def verify(
    target: str, ns: str, outs: list[dict], *, max_bytes: int, procs: int, ops: int, seconds: float
) -> Report:
    """Replay the log of ``ns`` and check it against the store and what workers saw."""
    from memcurator.store import open_store

    store = open_store(target)
    problems: list[str] = []
    for i, o in enumerate(outs):
        problems += [f"process {i}: {e}" for e in o["errors"]]
        if o["over"]:
            problems.append(f"process {i} read used_bytes over the budget: {o['over'][:3]}")
        if o["gets_after_forget"]:
            problems.append(f"process {i}: get() returned forgotten {o['gets_after_forget']}")
    resident: dict[str, int] = {}
    admits: Counter[str] = Counter()
    used = max_used = 0
    n_evict = n_forget = 0

    def check_budget(seq: int) -> None:
        nonlocal max_used
        max_used = max(max_used, used)
        if used > max_bytes:
            problems.append(f"budget exceeded after the write ending before seq {seq}: {used}")

    for d in store.decisions(ns):
        if d.action == "admit":
            check_budget(d.seq)  # the previous write's rows are complete
            admits[d.entry_id] += 1
            if d.entry_id in resident:
                problems.append(f"admit of resident {d.entry_id} (seq {d.seq})")
            resident[d.entry_id] = d.bytes
            used += d.bytes
        elif d.action in ("evict", "forget") and d.entry_id:
            if d.entry_id not in resident:
                problems.append(f"{d.action} of non-resident {d.entry_id} (seq {d.seq})")
                continue
            used -= resident.pop(d.entry_id)
            n_evict += d.action == "evict"
            n_forget += d.action == "forget"
        elif d.action == "reinforce" and d.entry_id not in resident:
            problems.append(f"reinforce of non-resident {d.entry_id} (seq {d.seq})")
    check_budget(-1)
    told = Counter(i for o in outs for i in o["admitted"])
    if told != admits:
        lost = sorted(set(told) - set(admits))[:5]
        extra = sorted(set(admits) - set(told))[:5]
        dup = [k for k, v in admits.items() if v > 1][:5]
        problems.append(f"admits differ: lost {lost}, not reported {extra}, twice {dup}")
    entries = store.entries(ns)
    actual = {e.id: e.bytes for e in entries}
    if actual != resident:
        problems.append(
            f"replay != store: {len(resident)} vs {len(actual)} entries; only in replay "
            f"{sorted(set(resident) - set(actual))[:3]}, only in store "
            f"{sorted(set(actual) - set(resident))[:3]}"
        )
    if store.used_bytes(ns) > max_bytes:
        problems.append(f"final used_bytes {store.used_bytes(ns)} > {max_bytes}")
    keys = Counter(e.meta.get("text_sha1") for e in entries)
    if any(v > 1 for v in keys.values()):
        problems.append(f"duplicate texts resident: {[k for k, v in keys.items() if v > 1][:3]}")
    forgets = [(t, fid) for o in outs for t, fid in o["forgot"]]
    for t_f, fid in forgets:
        for o in outs:
            for t_r, ids in o["recalls"]:
                if t_r > t_f and fid in ids:
                    problems.append(f"forgotten {fid} returned by a recall begun after the forget")
    store.close()
    lat: dict[str, list[float]] = {}
    for o in outs:
        for k, v in o["lat"].items():
            lat.setdefault(k, []).extend(v)
    return Report(
        "postgres" if target.startswith("postgres") else "sqlite",
        procs,
        ops,
        seconds,
        sum(admits.values()),
        n_evict,
        n_forget,
        sum(o["gone_first"] for o in outs),
        len(actual),
        max_used,
        max_bytes,
        problems,
        lat,
    )


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--ops", type=int, default=2000, help="operations per process")
    ap.add_argument("--max-bytes", type=int, default=60_000)
    ap.add_argument("--sqlite", action="store_true", help="run on a new SQLite file")
    ap.add_argument("--pg", help="run on this PostgreSQL URL (an empty database)")
    ap.add_argument("--local-pg", action="store_true", help="run on a throw-away local server")
    a = ap.parse_args(argv)
    reports = []
    if a.sqlite:
        with tempfile.TemporaryDirectory() as d:
            path = str(Path(d) / "mp.sqlite")
            reports.append(run(path, procs=a.procs, ops=a.ops, max_bytes=a.max_bytes))
    if a.pg:
        reports.append(run(a.pg, procs=a.procs, ops=a.ops, max_bytes=a.max_bytes))
    if a.local_pg:
        from memcurator.store.pglocal import LocalPostgres

        with LocalPostgres() as pg:
            reports.append(run(pg.url, procs=a.procs, ops=a.ops, max_bytes=a.max_bytes))
    hdr = (
        f"{'backend':9} {'procs':>5} {'ops':>6} {'s':>7} {'ops/s':>7} {'admit':>6} {'evict':>6} "
        f"{'forget':>6} {'resident':>8} {'max used':>9} {'budget':>7} {'w p50/p95 ms':>13} "
        f"{'r p50/p95 ms':>13} problems"
    )
    print(hdr)
    for r in reports:
        total = r.procs * r.ops
        w, rc = r.lat.get("write", []), r.lat.get("recall", [])
        print(
            f"{r.backend:9} {r.procs:>5} {total:>6} {r.seconds:>7.1f} {total / r.seconds:>7.1f} "
            f"{r.admitted:>6} {r.evicted:>6} {r.forgotten:>6} {r.resident:>8} {r.max_used:>9} "
            f"{r.max_bytes:>7} {_pct(w, 0.5):>6.1f}/{_pct(w, 0.95):<6.1f} "
            f"{_pct(rc, 0.5):>6.1f}/{_pct(rc, 0.95):<6.1f} {len(r.problems)}"
        )
        for p in r.problems[:10]:
            print("   ", p)
    return 1 if any(r.problems for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
