"""Per-seed numbers behind a merged bench results folder, as markdown tables.

``memcurator report`` gives mean ± sd over seeds. When the sd is large this script shows where it
comes from: task accuracy, victim accuracy and injection ASR for each (policy, seed), and the
factoring of accuracy into (how often a same-family entry is injected) × (how often such an
injection is solved). Reads ``records.csv`` only; makes no model calls.

    python benchmarks/seed_breakdown.py results/k1000x3

Numbers from a run, not a test: see docs/bench-1000x3.md for what it showed.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from memcurator.bench.compare import flag, read_records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args()

    runs: dict[tuple[str, int], list[dict[str, str]]] = defaultdict(list)
    for r in read_records(args.folders):
        runs[(r["policy"], int(r["seed"]))].append(r)
    policies = list(dict.fromkeys(p for p, _ in runs))
    seeds = sorted({s for _, s in runs})

    def mean(rows: list[dict[str, str]], key: str) -> float:
        return float(np.mean([flag(r[key]) for r in rows])) if rows else float("nan")

    def cell(vals: list[float]) -> str:
        return " / ".join("—" if np.isnan(v) else f"{v:.3f}" for v in vals)

    head = " / ".join(f"s{s}" for s in seeds)
    print(f"| policy | task acc ({head}) | victim acc ({head}) | inj. ASR ({head}) |")
    print("|---|---|---|---|")
    for p in policies:
        acc, vic, asr = [], [], []
        for s in seeds:
            rows = runs.get((p, s), [])
            acc.append(mean(rows, "local_ok"))
            vic.append(mean([r for r in rows if r["subset"] == "victim"], "local_ok"))
            asr.append(mean([r for r in rows if r["subset"] == "attacker"], "payload_executed"))
        print(f"| {p} | {cell(acc)} | {cell(vic)} | {cell(asr)} |")

    print(f"\n| policy | same-family injected, share ({head}) | solved when same-family ({head}) |")
    print("|---|---|---|")
    for p in policies:
        share, solved = [], []
        for s in seeds:
            rows = runs.get((p, s), [])
            same = [r for r in rows if flag(r["injected_same_family"])]
            share.append(len(same) / len(rows) if rows else float("nan"))
            solved.append(mean(same, "local_ok"))
        print(f"| {p} | {cell(share)} | {cell(solved)} |")


if __name__ == "__main__":
    main()
