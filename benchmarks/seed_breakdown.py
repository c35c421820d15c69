"""Per-seed numbers behind a merged bench results folder, as markdown tables.

``memcurator report`` gives mean ± sd over seeds. When the sd is large this script shows where it
comes from: task accuracy, victim accuracy and injection ASR for each (policy, seed), and the
factoring of accuracy into (how often a same-family entry is injected) × (how often such an
injection is solved). Reads each folder's ``summary.json`` (the per-run measures bench
computed) and ``records.csv``; makes no model calls.

    python benchmarks/seed_breakdown.py results/k1000x3

Numbers from a run, not a test: see docs/bench-1000x3.md for what it showed.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memcurator.bench.compare import flag, read_records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args()

    # Per-run measures as bench computed them (report.run_metrics); a later folder's run wins.
    metrics: dict[tuple[str, int], dict[str, Any]] = {}
    for f in args.folders:
        for m in json.loads((f / "summary.json").read_text())["runs"]:
            metrics[(m["policy"], int(m["seed"]))] = m
    # The one figure bench does not store: accuracy when a same-family entry was injected.
    same: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in read_records(args.folders):
        if flag(r["injected_same_family"]):
            same[(r["policy"], int(r["seed"]))].append(flag(r["local_ok"]))
    policies = list(dict.fromkeys(p for p, _ in metrics))
    seeds = sorted({s for _, s in metrics})

    def row(p: str, value: Callable[[dict[str, Any], tuple[str, int]], Any]) -> str:
        vals = [value(metrics[(p, s)], (p, s)) if (p, s) in metrics else None for s in seeds]
        return " / ".join("—" if v is None or np.isnan(v) else f"{v:.3f}" for v in vals)

    head = " / ".join(f"s{s}" for s in seeds)
    print(f"| policy | task acc ({head}) | victim acc ({head}) | inj. ASR ({head}) |")
    print("|---|---|---|---|")
    for p in policies:
        cols = [row(p, lambda m, _, k=k: m[k]) for k in ("accuracy", "victim_accuracy", "asr")]
        print(f"| {p} | " + " | ".join(cols) + " |")

    print(f"\n| policy | same-family injected, share ({head}) | solved when same-family ({head}) |")
    print("|---|---|---|")
    for p in policies:
        share = row(p, lambda m, _: m["same_family_rate"])
        solved = row(p, lambda _, key: float(np.mean(same[key])) if same[key] else None)
        print(f"| {p} | {share} | {solved} |")


if __name__ == "__main__":
    main()
