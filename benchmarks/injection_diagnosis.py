"""What did each policy inject, and how often did the same-family entry lead to a correct answer?

Re-runs policies on one bench stream (with the completion cache, a stream already run costs no
model calls) and records, for every injected entry, its kind, who solved the task it came from
(local model or expert), and its use / success / failure counts at injection time. Prints, per
policy, the accuracy of same-family injections by the entry's prior uses.

    python benchmarks/injection_diagnosis.py --policies curator,success-only --tasks 1000 --seed 0

Numbers from a run, not a test: see docs/bench-1000-seed0.md for what it showed.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

import numpy as np

import memcurator.bench.agent as agent
from memcurator.bench.runner import BenchConfig, load_families, run_bench
from memcurator.bench.stream import StreamConfig
from memcurator.llm import CachedExecutor, create_executor
from memcurator.llm.gguf import cache_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="curator,success-only")
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-bytes", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    injected: list[list[dict[str, Any]]] = []
    original = agent.memory_block

    def spy(entries, budget):  # type: ignore[no-untyped-def]
        block, used = original(entries, budget)
        injected.append(
            [
                {
                    "kind": m.kind,
                    "solver": m.origin_detail,
                    "uses": m.uses,
                    "successes": m.successes,
                    "failures": m.failures,
                }
                for m in entries
                if m.id in used
            ]
        )
        return block, used

    agent.memory_block = spy
    ex = CachedExecutor(
        create_executor("gguf", n_threads=args.threads), cache_dir() / "completions.sqlite"
    )
    cfg = BenchConfig(
        policies=args.policies.split(","),
        seeds=[args.seed],
        stream=StreamConfig(n_tasks=args.tasks),
        max_bytes=args.max_bytes,
    )
    runs = run_bench(cfg, ex, families=load_families())
    print(f"completion cache: {ex.hits} hits, {ex.misses} misses")
    i = 0
    for run in runs:
        by_kind: dict[tuple[str, str], list[bool]] = defaultdict(list)
        rows = []
        for r in run.records:
            inj = injected[i]
            i += 1
            if not r.injected_same_family or not inj:
                continue
            e = inj[0]
            by_kind[(e["kind"], e["solver"])].append(r.local_ok)
            rows.append((e["uses"], e["successes"], r.local_ok))
        acc = np.mean([r.local_ok for r in run.records])
        print(f"\n{run.policy}: task accuracy {acc:.3f}, same-family injections {len(rows)}")
        for (kind, solver), oks in sorted(by_kind.items()):
            print(f"  {kind:8s} from {solver:7s} n={len(oks):4d} accuracy={np.mean(oks):.3f}")
        a = np.array(rows, dtype=float)
        for lo, hi in ((0, 0), (1, 2), (3, 10), (11, 10**9)):
            m = (a[:, 0] >= lo) & (a[:, 0] <= hi)
            if m.any():
                rate = (a[m, 1] / np.maximum(a[m, 0], 1)).mean()
                label = f"{lo}+" if hi > 10**6 else f"{lo}-{hi}"
                print(
                    f"  prior uses {label:5s} n={int(m.sum()):4d} accuracy={a[m, 2].mean():.3f} "
                    f"entry's past success rate={rate:.2f}"
                )


if __name__ == "__main__":
    main()
