"""Write and recall latency with the entry text stored as is vs zstd+dictionary (issue 35).

Two namespaces of ``n`` synthetic SQL-stream entries (``governance.build``; one with
``compress_text=True``), each governed to 90% of its bytes; then rounds of one write at the
budget (admission + Keep pass + commit) and one recall (k = 10), the two stores interleaved and
alternated per round so that machine load falls on both alike. Prints medians (ms) and ratios.

Usage::

    python benchmarks/compression_latency.py 10000
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import governance as g  # noqa: E402


def main(n: int) -> None:
    warnings.simplefilter("ignore")
    mems = {}
    for comp in (False, True):
        p = os.path.join(tempfile.mkdtemp(), "b.sqlite")
        g.build(p, n, compress_text=comp)
        m = g.open_memory(p, n)
        m.max_bytes = int(m.used_bytes * 0.9)
        m.govern()
        m.recall("warm up", k=10)
        mems[comp] = m
    res: dict[bool, dict[str, list[float]]] = {c: {"w": [], "r": []} for c in (False, True)}
    for rnd in range(6):  # interleaved, alternating rounds
        for comp in (False, True) if rnd % 2 == 0 else (True, False):
            m = mems[comp]
            for k in range(3):
                t0 = time.perf_counter()
                m.write(
                    f"Task: count rows of orders where amount > {rnd}{k} (b {rnd}{k} {comp})\n"
                    f"Action: SELECT COUNT(*) FROM orders WHERE amount > {rnd}{k};"
                )
                res[comp]["w"].append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                m.recall(f"count the rows of table t{k} where amount is high", k=10)
                res[comp]["r"].append((time.perf_counter() - t0) * 1e3)
    print("| n | op | text as is, ms | zstd+dict, ms | ratio |\n|---|---|---|---|---|")
    for op, name in (("w", "write at budget"), ("r", "recall k=10")):
        a, b = statistics.median(res[False][op]), statistics.median(res[True][op])
        print(f"| {n:,} | {name} | {a:.2f} | {b:.2f} | {b / a:.2f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
