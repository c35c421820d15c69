"""What did each policy inject, and how often did the same-family entry lead to a correct answer?

Re-runs policies on bench streams and records, for every injected entry, its kind, who solved the
task it came from (local model or expert), and its use / success / failure counts at injection
time. Prints, per run, the churn measures of issue 11 (cause 4): admissions and evictions, the
share of same-family injections that were entries never used before and their success rate,
against entries used 11+ times; then accuracy by prior uses.

Two ways to say what to replay:

    # one stream, named policies (the original use)
    python benchmarks/injection_diagnosis.py --policies curator,success-only --tasks 1000 --seed 0

    # every run of a results folder, with its recorded settings (budgets of a front included);
    # checks that the replay reproduces the folder's records task for task
    python benchmarks/injection_diagnosis.py --results results/k1000-s0 --executor cache-only

``--executor``: ``gguf`` (the bundled model behind the completion cache; a miss runs the model),
``cache-only`` (the completion cache, and a miss is an error: never runs a model) or ``fake``
(the scripted executor of ``memcurator bench --executor fake``).

Numbers from a run, not a test: see docs/bench-1000-seed0.md and docs/bench-1000x3.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import memcurator.bench.agent as agent
from memcurator.bench.runner import BenchConfig, PolicyRun, load_families, run_bench
from memcurator.bench.stream import StreamConfig
from memcurator.errors import LLMError
from memcurator.llm import CachedExecutor, create_executor
from memcurator.llm.gguf import cache_dir

#: summary.json config keys → StreamConfig fields
_STREAM_KEYS = {"tasks": "n_tasks", "zipf": "zipf", "families": "n_families", "drift": "drift",
                "poison": "poison", "payload": "payload"}  # fmt: skip


class CacheOnly:
    """Stands in for the model behind a completion cache: any call that reaches it is a miss,
    and a miss raises instead of running a model."""

    temperature = 0.0

    def __init__(self, name: str, model_id: str):
        self.name = name
        self.model_id = model_id

    def complete(self, prompt: str, *, max_tokens: int = 128, stop: Any = None) -> Any:
        raise LLMError(
            "completion not in the cache (cache-only replay never runs a model); replay a "
            "folder whose runs used this cache, or use --executor fake"
        )


def make_executor(kind: str, threads: int | None) -> Any:
    """The executor of a replay (see the module docstring)."""
    if kind == "fake":
        return create_executor("fake", responder=agent.copy_first_action)
    path = cache_dir() / "completions.sqlite"
    if kind == "cache-only":
        con = sqlite3.connect(path)
        pairs = con.execute("SELECT DISTINCT executor, model FROM completions").fetchall()
        con.close()
        if len(pairs) != 1:
            sys.exit(f"cache-only: the cache holds {len(pairs)} (executor, model) pairs: {pairs}")
        return CachedExecutor(CacheOnly(*pairs[0]), path)
    return CachedExecutor(create_executor("gguf", n_threads=threads), path)


def config_from_results(folder: Path) -> tuple[BenchConfig, dict[str, Any]]:
    """The BenchConfig that produced ``folder`` (from its summary.json), and that config."""
    from memcurator.bench.agent import AgentConfig
    from memcurator.bench.budget_fronts import parse_budgets

    cfg = json.loads((folder / "summary.json").read_text())["config"]
    stream = {f: cfg[k] for k, f in _STREAM_KEYS.items() if k in cfg}
    for k in ("drift_at", "dml_share", "drift_popular"):  # stream options, when recorded
        if k in cfg:
            stream[k] = cfg[k]
    budgets = parse_budgets(
        ",".join(map(str, cfg["max_bytes"])) if isinstance(cfg["max_bytes"], list)
        else cfg["max_bytes"]
    )  # fmt: skip
    start = int(cfg.get("seed_start", 0))
    bc = BenchConfig(
        policies=list(cfg["policies"]),
        seeds=list(range(start, start + int(cfg["seeds"]))),
        stream=StreamConfig(**stream),
        agent=AgentConfig(
            inject_chars=int(cfg.get("inject_chars", 1200)),
            max_turns=int(cfg.get("max_turns", 1)),
        ),
        max_bytes=budgets[0],
        poison_channel=str(cfg.get("poison_channel", "external")),
        sweep_values=budgets if len(budgets) > 1 else (),
    )
    return bc, cfg


def churn(run: PolicyRun, injected: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Churn measures of one run; ``injected[i]`` describes task i's injected entries."""
    rows = []
    by_kind: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r, inj in zip(run.records, injected, strict=True):
        if not r.injected_same_family or not inj:
            continue
        e = inj[0]
        by_kind[(e["kind"], e["solver"])].append(r.local_ok)
        rows.append((e["uses"], e["successes"], r.local_ok))
    a = np.array(rows, dtype=float).reshape(-1, 3)
    new = a[:, 0] == 0
    old = a[:, 0] >= 11
    return {
        "policy": run.policy,
        "seed": run.seed,
        "accuracy": float(np.mean([r.local_ok for r in run.records])),
        "admissions": run.decisions.get("admit", 0),
        "evictions": run.decisions.get("evict", 0),
        "rejects": run.decisions.get("reject", 0),
        "same_family": len(rows),
        "never_used_share": float(new.mean()) if len(a) else float("nan"),
        "never_used_success": float(a[new, 2].mean()) if new.any() else float("nan"),
        "used_11_success": float(a[old, 2].mean()) if old.any() else float("nan"),
        "n_used_11": int(old.sum()),
        "_rows": a,
        "_by_kind": by_kind,
    }


def check_records(folder: Path, runs: list[PolicyRun]) -> str:
    """Whether the replay's local_ok equals the folder's records.csv, task for task."""
    want: dict[tuple[str, str, str], str] = {}
    with (folder / "records.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            want[(r["policy"], r["seed"], r["step"])] = r["local_ok"]
    bad = n = 0
    for run in runs:
        for r in run.records:
            k = (run.policy, str(run.seed), str(r.step))
            if k in want:
                n += 1
                bad += want[k] != str(r.local_ok)
    return f"replay vs records.csv: {n - bad}/{n} tasks agree" + ("" if bad else " (all)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=None, help="replay this results folder")
    ap.add_argument("--policies", default="curator,success-only")
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-bytes", type=int, default=100_000)
    ap.add_argument("--executor", choices=("gguf", "cache-only", "fake"), default="gguf")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--by-uses", action="store_true", help="accuracy by prior uses, per run")
    ap.add_argument("--policy-file", type=Path, default=None, help="TOML/JSON presets to load")
    args = ap.parse_args()
    if args.policy_file is not None:
        from memcurator.policy import register
        from memcurator.policy.presets import load_policy_file

        for name, spec in load_policy_file(args.policy_file).items():
            register(name, spec)

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
    ex = make_executor(args.executor, args.threads)
    if args.results is not None:
        cfg, _ = config_from_results(args.results)
    else:
        cfg = BenchConfig(
            policies=args.policies.split(","),
            seeds=[args.seed],
            stream=StreamConfig(n_tasks=args.tasks),
            max_bytes=args.max_bytes,
        )
    runs = run_bench(cfg, ex, families=load_families())
    if hasattr(ex, "hits"):
        print(f"completion cache: {ex.hits} hits, {ex.misses} misses")
    if args.results is not None and (args.results / "records.csv").exists():
        print(check_records(args.results, runs))
    i = 0
    stats = []
    for run in runs:
        n = len(run.records)
        stats.append(churn(run, injected[i : i + n]))
        i += n
    print(
        "\n| policy | seed | task acc | admissions | evictions | rejects | same-fam inj "
        "| never-used share | never-used success | 11+ uses success (n) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in stats:
        print(
            f"| {s['policy']} | {s['seed']} | {s['accuracy']:.3f} | {s['admissions']} | "
            f"{s['evictions']} | {s['rejects']} | {s['same_family']} | "
            f"{s['never_used_share']:.3f} | {s['never_used_success']:.3f} | "
            f"{s['used_11_success']:.3f} ({s['n_used_11']}) |"
        )
    if not args.by_uses:
        return
    for s in stats:
        print(f"\n{s['policy']} seed {s['seed']}: same-family injections {s['same_family']}")
        for (kind, solver), oks in sorted(s["_by_kind"].items()):
            print(f"  {kind:8s} from {solver:7s} n={len(oks):4d} accuracy={np.mean(oks):.3f}")
        a = s["_rows"]
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
