"""Paired comparisons of the session-16 front (real LLM, bundled gemma-3-270m, 300 tasks, binary
vectors, text as is; one arm per run folder under /work/runs/s16: jitmem-sS, cur36-sS,
lru36-sS, cur25-sS, lru25-sS). Reads what exists: a seed whose arms are not all there is left
out of the comparisons that need them (partial runs are labelled by the seeds listed)."""
import csv
import os
import sys

from memcurator.bench.compare import paired_differences

RUNS = sys.argv[1] if len(sys.argv) > 1 else "/work/runs/s16"


def rows(arm: str, seed: int, label: str) -> list[dict]:
    path = f"{RUNS}/{arm}-s{seed}/records.csv"
    if not os.path.exists(path):
        return []
    return [dict(r, policy=label) for r in csv.DictReader(open(path))]


def show(title: str, recs: list[dict], base: str) -> None:
    print(f"\n{title} (baseline {base})")
    for d in paired_differences(recs, base, n_boot=4000):
        print(f"  {d['policy']:<24} n={d['n']:>4} {d['rate']:.3f} vs {d['baseline_rate']:.3f}  "
              f"diff {d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] p={d['p']:.3g}")


for b in ("36", "25"):
    seeds = [s for s in range(3) if rows(f"cur{b}", s, "x") and rows(f"lru{b}", s, "x")]
    recs = [r for s in seeds for r in rows(f"cur{b}", s, f"curator/align@{b}k")
            + rows(f"lru{b}", s, f"lru@{b}k")]
    if recs:
        show(f"curator/align vs lru at {b}k, seeds {seeds}", recs, f"lru@{b}k")
    seeds = [s for s in range(3) if rows(f"cur{b}", s, "x") and rows("jitmem", s, "x")]
    recs = [r for s in seeds for r in rows(f"cur{b}", s, f"curator/align@{b}k")
            + rows("jitmem", s, "jitmem/extractive")]
    if recs:
        show(f"curator/align at {b}k vs jitmem/extractive unbounded, seeds {seeds}", recs,
             "jitmem/extractive")
        acc = {p: sum(r["local_ok"] in ("True", "1", "true") for r in recs if r["policy"] == p)
               / max(1, sum(r["policy"] == p for r in recs))
               for p in {r["policy"] for r in recs}}
        print(f"  share of unbounded accuracy: {acc[f'curator/align@{b}k'] / acc['jitmem/extractive']:.3f}")
