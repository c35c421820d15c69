"""Paired comparisons of the 300-task real-LLM front, sessions 16-17 (bundled gemma-3-270m,
binary vectors, text as is, code d1e100c). One arm per run folder, ARM-sS, under the session
folders given (default /work/runs/s16 and /work/runs/s17; the later wins for an arm both hold):
jitmem (unbounded reader, binary), jitmem32 (the same at float32), curB / lruB for
curator/align and lru at B KB. Reads what exists; a comparison uses the seeds where both of
its arms ran, and says which (partial runs are labelled by their seeds)."""
import csv
import os
import sys

from memcurator.bench.compare import paired_differences

DIRS = sys.argv[1:] or ["/work/runs/s16", "/work/runs/s17"]
T = ("True", "1", "true")


def rows(arm: str, seed: int, label: str) -> list[dict]:
    for d in reversed(DIRS):
        path = f"{d}/{arm}-s{seed}/records.csv"
        if os.path.exists(path):
            return [dict(r, policy=label, task_id=f"{seed}:{r['task_id']}:{r['step']}")
                    for r in csv.DictReader(open(path))]
    return []


def acc(recs: list[dict]) -> float:
    return sum(r["local_ok"] in T for r in recs) / max(1, len(recs))


def show(title: str, a: str, b: str, base: str) -> None:
    seeds = [s for s in range(3) if rows(a, s, "x") and rows(b, s, "x")]
    if not seeds:
        return
    recs = [r for s in seeds for r in rows(a, s, "A") + rows(b, s, "B")]
    print(f"\n{title}, seeds {seeds} ({len(seeds) * 300} paired tasks)")
    for d in paired_differences(recs, "B", n_boot=4000):
        print(f"  A {d['rate']:.3f} vs B {d['baseline_rate']:.3f}  "
              f"diff {d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] p={d['p']:.3g}")
    if base == "share":
        per = [acc(rows(a, s, "A")) / acc(rows(b, s, "B")) for s in seeds]
        pooled = acc([r for r in recs if r["policy"] == "A"]) / acc(
            [r for r in recs if r["policy"] == "B"])
        print(f"  share of B's accuracy: pooled {pooled:.3f}; per seed "
              + ", ".join(f"{x:.3f}" for x in per))


print("accuracy and peak resident kB (1,000 B; the summaries give KiB) per arm and seed")
arms = ["jitmem", "jitmem32"] + [f"{p}{b}" for b in (25, 36, 50, 100, 200, 400) for p in ("cur", "lru")]
for arm in arms:
    cells = []
    for s in range(3):
        r = rows(arm, s, arm)
        if r:
            peak = max(float(x["resident_bytes"]) for x in r) / 1000
            cells.append(f"s{s} {acc(r):.3f} ({peak:.1f} kB)")
    if cells:
        print(f"  {arm:<9} " + "; ".join(cells))
show("binary vs float32 vectors, jitmem/extractive unbounded (A: binary, B: float32)",
     "jitmem", "jitmem32", "")
for b in (25, 36, 50, 100, 200, 400):
    show(f"curator/align vs lru at {b}k (A: curator/align, B: lru)", f"cur{b}", f"lru{b}", "")
    show(f"curator/align at {b}k vs jitmem/extractive unbounded (A: curator, B: jitmem)",
         f"cur{b}", "jitmem", "share")
