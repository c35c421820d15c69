"""Cold first write of the core: what a fresh interpreter pays for ``Memory.write`` of the README
quickstart's ``Task:/Action:`` entry, and which modules it loads (issue 31: target ≤ 150 ms, no
``memcurator.bench``/``memcurator.envs`` module).

Each run is a fresh interpreter (the operating system's file cache is warm after the first) that
imports memcurator, opens an in-memory ``Memory(policy="curator")``, and times its first write of
one entry, then reports the modules the write added. Entries: the README library example's SQL
entry (a plain SELECT), an SQL action beyond the plain-SELECT grammar (a join), a destructive SQL
action, a shell action, a prose action, and free prose. Columns: the first write alone (the
issue's measure), and import + open + first write (what a script that writes once pays). With
``--baseline PATH`` (a checkout of another commit, e.g. made by ``git archive``) the same runs go
against that tree too, interleaved, and the table shows both and their ratio. The machine's load
moves every number; read the ratio of interleaved runs, and the load average printed first.

    python benchmarks/core_import.py [--runs 5] [--baseline /tmp/orig]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ENTRIES = {
    "sql action": "Task: count the orders of customer 5\nAction: SELECT COUNT(*) FROM orders "
    "WHERE cid = 5;",
    "sql join": "Task: count the orders of customer 5\nAction: SELECT COUNT(*) FROM orders o "
    "JOIN customers c ON o.cid = c.id WHERE c.id = 5;",
    "sql drop": "Task: count the orders of customer 9\nAction: DROP TABLE orders;",
    "shell action": "Task: create the log folder\nAction: mkdir -p /var/log/app",
    "prose action": "Task: speed up reports\nAction: rebuild the cache nightly",
    "prose": "prefer short keys; update the index later",
}

PROBE = """
import json, sys, time
t0 = time.perf_counter()
from memcurator import Memory
t1 = time.perf_counter()
m = Memory(policy="curator")
before = set(sys.modules)
t2 = time.perf_counter()
m.write({text!r})
t3 = time.perf_counter()
added = set(sys.modules) - before
print(json.dumps({{
    "import_ms": (t1 - t0) * 1e3, "write_ms": (t3 - t2) * 1e3, "total_ms": (t3 - t0) * 1e3,
    "bench_envs": sum(n.startswith(("memcurator.bench", "memcurator.envs")) for n in added),
    "sqlglot": sum(n.split(".")[0] == "sqlglot" for n in added),
    "added": len(added),
}}))
"""


def probe(src: Path, text: str) -> dict[str, float]:
    """One fresh interpreter with ``src`` first on its path: the timings and module counts."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(text=text)],
        capture_output=True,
        text=True,
        check=True,
        cwd=src,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    args = ap.parse_args()
    trees = {"this": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"{args.runs} fresh interpreters per entry and tree; medians (ms); load average {load}")
    head = f"{'entry':14s} {'tree':9s} {'first write':>11s} {'import':>7s} {'total':>7s}"
    print(head + f" {'bench/envs':>10s} {'sqlglot':>7s} {'modules':>7s}")
    for label, text in ENTRIES.items():
        results: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
        probe(ROOT, text)  # warm the file cache
        for _ in range(args.runs):
            for name, src in trees.items():  # interleaved, so drift hits both alike
                results[name].append(probe(src, text))
        med = {}
        for name, rows in results.items():
            w = statistics.median(r["write_ms"] for r in rows)
            i = statistics.median(r["import_ms"] for r in rows)
            t = statistics.median(r.get("total_ms", float("nan")) for r in rows)
            last = rows[-1]
            med[name] = w
            print(
                f"{label:14s} {name:9s} {w:11.1f} {i:7.1f} {t:7.1f} {last['bench_envs']:10.0f} "
                f"{last['sqlglot']:7.0f} {last['added']:7.0f}"
            )
        if "baseline" in med:
            print(f"{'':14s} {'ratio':9s} {med['this'] / med['baseline']:11.2f}")


if __name__ == "__main__":
    main()
