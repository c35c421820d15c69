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

``--api`` runs the same mix through ``memcurator serve`` instead: each worker process holds a
:class:`memcurator.client.Client` (REST over 127.0.0.1) to one of ``--servers`` server processes
serving the store (``serve`` has no ``--workers``: several servers on one store stand in for
several workers), and the same :func:`verify` checks the store afterwards; any error answer
(a 5xx included) is a problem, and so is a traceback in a server's log.

Usage::

    python benchmarks/concurrency.py --procs 8 --ops 2000 [--pg URL | --local-pg] [--sqlite]
    python benchmarks/concurrency.py --procs 8 --ops 2000 --sqlite --api --servers 1,2
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


class _Ops:
    """The mix's calls that pass straight to the target (``self.t``: a Memory or a Client)."""

    t: Any

    def feedback(self, handle: Any, reward: float) -> None:
        self.t.feedback(handle, reward)

    def forget(self, eid: str) -> None:
        self.t.forget(eid)

    def get(self, eid: str) -> None:
        self.t.get(eid)

    def close(self) -> None:
        self.t.close()


class _LibraryOps(_Ops):
    """The mix's calls on :class:`memcurator.Memory` (the library in the worker's process)."""

    def __init__(self, target: str, ns: str, idx: int, max_bytes: int):
        from memcurator import Memory

        self.ns = ns
        self.t = Memory(target, namespace=ns, policy="lru", max_bytes=max_bytes, seed=100 + idx)

    def write(self, text: str) -> tuple[bool, str | None, str, int]:
        """(admitted, id, reason, used_bytes after the write)."""
        w = self.t.write(text)
        return w.admitted, w.id, w.reason, self.t.store.used_bytes(self.ns)

    def recall(self, query: str) -> tuple[list[str], Any]:
        """(ids, what feedback takes)."""
        r = self.t.recall(query, k=5)
        return list(r.ids), r


class _ApiOps(_Ops):
    """The same calls through :class:`memcurator.client.Client` against ``memcurator serve``
    (the namespace is the key's; its policy and budget are the server's)."""

    def __init__(self, url: str, key: str):
        from memcurator.client import Client

        self.t = Client(url, key=key, timeout=120)

    def write(self, text: str) -> tuple[bool, str | None, str, int]:
        w = self.t.write(text)
        return bool(w["admitted"]), w["id"], str(w["reason"]), int(w["used_bytes"])

    def recall(self, query: str) -> tuple[list[str], Any]:
        r = self.t.recall(query, k=5)
        return list(r["ids"]), r


def worker(
    target: str,
    ns: str,
    idx: int,
    n_ops: int,
    max_bytes: int,
    seed: int,
    api: tuple[str, str] | None = None,
) -> dict:
    """One process's run; returns what it saw (times are ``time.time()``, one machine).

    ``api``: ``(url, key)`` of a ``memcurator serve`` serving ``target``; the operations then go
    through the REST API instead of a :class:`memcurator.Memory` of this process.
    """
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
    ops: _LibraryOps | _ApiOps
    try:
        ops = _ApiOps(*api) if api is not None else _LibraryOps(target, ns, idx, max_bytes)
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
                admitted, wid, reason, used = ops.write(text)
                if admitted and wid is not None and not reason.startswith("reinforced"):
                    out["admitted"].append(wid)
                    mine.append(wid)
                if used > max_bytes:
                    out["over"].append(used)
            elif r < 0.8:
                op = "recall"
                start = time.time()
                ids, last = ops.recall(f"orders of process {rng.randrange(8)}")
                out["recalls"].append((start, ids))
                if not ids:
                    last = None
            elif r < 0.9:
                op = "feedback"
                if last is not None:
                    try:
                        ops.feedback(last, rng.choice([0.0, 1.0]))
                    except EntryNotFound:
                        out["gone_first"] += 1
            else:
                op = "forget"
                if mine:
                    fid = mine.pop(rng.randrange(len(mine)))
                    try:
                        ops.forget(fid)
                        out["forgot"].append((time.time(), fid))
                        try:
                            ops.get(fid)
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
    ops.close()
    return out


def _run_one(args: tuple[Any, ...]) -> dict:
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


def run(
    target: str,
    *,
    procs: int,
    ops: int,
    max_bytes: int = 60_000,
    seed: int = 0,
    api: bool = False,
    servers: int = 1,
) -> Report:
    """Run ``procs`` worker processes on namespace ``mp<seed>`` of ``target`` and verify.

    ``api``: the workers call ``memcurator serve`` (``servers`` server processes on ``target``,
    127.0.0.1, worker ``i`` on server ``i % servers``) through :class:`memcurator.client.Client`
    instead of opening the store themselves; the namespace's policy (lru) and budget are the
    server's, set with its key. A server log with a traceback is a problem too.
    """
    ns = f"mp{seed}"
    from memcurator import Memory

    Memory(target, namespace=ns, policy="lru", max_bytes=max_bytes).close()  # create it once
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as d:
        srvs = []
        jobs: list[tuple[Any, ...]] = [(target, ns, i, ops, max_bytes, seed) for i in range(procs)]
        if api:
            from memcurator.service.keys import KeyTable
            from memcurator.service.launch import ServeProcess

            keys = str(Path(d) / "mp.keys")
            table = KeyTable(keys)
            _, token = table.create(ns, name="bench", scopes=("read", "write"))
            table.configure(ns, policy="lru", max_bytes=max_bytes)
            table.close()
            srvs = [
                ServeProcess(target, keys=keys, log_path=str(Path(d) / f"serve{i}.log"))
                for i in range(servers)
            ]
            jobs = [j + ((srvs[i % servers].url, token),) for i, j in enumerate(jobs)]
        try:
            for srv in srvs:
                srv.start()
            t0 = time.perf_counter()
            with ctx.Pool(procs) as pool:
                outs = pool.map(_run_one, jobs)
            secs = time.perf_counter() - t0
        finally:
            for srv in srvs:
                srv.stop()
        logs = [srv.log(10**8) for srv in srvs]
    rep = verify(target, ns, outs, max_bytes=max_bytes, procs=procs, ops=ops, seconds=secs)
    if api:
        rep.backend += f"+api/{servers}srv"
        rep.problems += [
            f"server {i} logged a traceback" for i, t in enumerate(logs) if "Traceback" in t
        ]
    return rep


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


#: the operations whose latencies the table shows (ms)
OPS = ("write", "recall", "feedback", "forget")


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
    ap.add_argument(
        "--api",
        action="store_true",
        help="through `memcurator serve` (REST, memcurator.client.Client) instead of the library",
    )
    ap.add_argument(
        "--servers",
        default="1",
        help="--api: server processes on the store, comma-separated counts (one run each)",
    )
    a = ap.parse_args(argv)
    modes = [(True, int(n)) for n in a.servers.split(",")] if a.api else [(False, 1)]
    reports = []

    def run_modes(target: str) -> None:
        for i, (api, n) in enumerate(modes):
            reports.append(
                run(
                    target,
                    procs=a.procs,
                    ops=a.ops,
                    max_bytes=a.max_bytes,
                    api=api,
                    servers=n,
                    seed=i,
                )
            )

    if a.sqlite:
        with tempfile.TemporaryDirectory() as d:
            run_modes(str(Path(d) / "mp.sqlite"))
    if a.pg:
        run_modes(a.pg)
    if a.local_pg:
        from memcurator.store.pglocal import LocalPostgres

        with LocalPostgres() as pg:
            run_modes(pg.url)
    hdr = (
        f"{'backend':20} {'procs':>5} {'ops':>6} {'s':>7} {'ops/s':>7} {'admit':>6} {'evict':>6} "
        f"{'forget':>6} {'resident':>8} {'max used':>9} {'budget':>7} "
        + " ".join(f"{k[:8] + ' p50/p95':>17}" for k in OPS)
        + " problems"
    )
    print(hdr)
    for r in reports:
        total = r.procs * r.ops
        lat = " ".join(
            f"{_pct(r.lat.get(k, []), 0.5):>8.1f}/{_pct(r.lat.get(k, []), 0.95):<8.1f}" for k in OPS
        )
        print(
            f"{r.backend:20} {r.procs:>5} {total:>6} {r.seconds:>7.1f} {total / r.seconds:>7.1f} "
            f"{r.admitted:>6} {r.evicted:>6} {r.forgotten:>6} {r.resident:>8} {r.max_used:>9} "
            f"{r.max_bytes:>7} {lat} {len(r.problems)}"
        )
        for p in r.problems[:10]:
            print("   ", p)
    return 1 if any(r.problems for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
